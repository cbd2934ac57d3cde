"""The benchmark's floors: the database alone building what a scenario answers, in-process.

A floor is the least work any server could do for a response: the database builds the
same JSON array with the app's own SQL, timed in the benchmark's own process while the
server idles. SQLite's floor runs in-process of sqlite3 (as the server's reads do);
PostgreSQL's runs in the database, fetched over one asyncpg connection (the server's
reads pay that round trip too). Each store's rows are set against its own floor.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import benchlib as lib

from app.data.feed import START, FeedFilters, feed_listing
from app.data.listings import Listing
from app.data.pg import sql as pg_sql
from app.data.pool import configure_reader

if TYPE_CHECKING:
    from bench import Scenario

ROUNDS_MAX = 5000


@dataclass(frozen=True)
class Floor:
    """What a scenario's floor builds: a listing's whole array, or its first ``limit``."""

    listing: Listing
    limit: int | None = None

    @property
    def params(self) -> list[object]:
        return [*self.listing.select_params, *([self.limit] if self.limit else [])]


def whole_array(listing: Listing, limit: bool = False, joined: bool = False) -> str:
    """SQLite's floor: the array (or its first ``?`` records) built in one value.

    By default each record goes through ``json_group_array(json(...))``; ``joined``
    concatenates the records' texts instead, the same bytes without re-parsing. Its
    parameters are ``listing.select_params`` (then the limit).
    """
    page = " LIMIT ?" if limit else ""
    array = (
        "'[' || coalesce(group_concat(j, ','), '') || ']'"
        if joined
        else "json_group_array(json(j))"
    )
    return (
        f"SELECT {array} FROM (SELECT {listing.record.json} AS j"
        f" {listing.rows_from} ORDER BY {listing.order_by}{page})"
    )


def pg_whole_array(listing: Listing, limit: bool = False) -> str:
    """PostgreSQL's floor: the array (or its first ``$n`` records) built by the database
    in one value, with the app's PostgreSQL JSON. Its parameters are
    ``listing.select_params`` (then the limit).
    """
    page = " LIMIT ?" if limit else ""
    return pg_sql.numbered(
        f"SELECT '[' || coalesce(string_agg(j::text, ',' ORDER BY n), '') || ']' FROM"
        f" (SELECT {pg_sql.record_json(listing)} AS j, row_number() OVER (ORDER BY"
        f" {listing.order_by}) AS n {pg_sql.rows_from(listing)}"
        f" ORDER BY {listing.order_by}{page}) a"
    )


class Floors(Protocol):
    """One store's floors."""

    name: str

    def measure(self, s: Scenario, budget: float) -> None:
        """Time the scenario's floor (if it has one) once more; keep the seconds and the
        array."""

    def feed(self, company: int, rounds: int) -> tuple[int, list[float]]:
        """The company's whole feed read in one statement: (events, seconds of each round)."""

    def feed_total(self, company: int) -> int:
        """How many events the company's feed holds."""

    def close(self) -> None: ...


class SqliteFloors:
    """SQLite building each array in-process, with the server's connection settings."""

    name = "SQLite"

    def __init__(self, db: str) -> None:
        self._conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)
        configure_reader(self._conn)

    def measure(self, s: Scenario, budget: float) -> None:
        if s.floor is None:
            return
        # The floor re-parses every record; the strict one joins the records' texts,
        # the same bytes with less work, so the floor cannot flatter the server.
        limit = s.floor.limit is not None
        listing = s.floor.listing
        sqls = [whole_array(listing, limit), whole_array(listing, limit, joined=True)]
        (seconds, s.floor_json), (strict, text) = lib.floor_seconds(
            self._conn, sqls, s.floor.params, budget
        )
        s.add_floor(seconds, strict if text == s.floor_json else 0.0)  # same bytes only

    def feed(self, company: int, rounds: int) -> tuple[int, list[float]]:
        listing = feed_listing(company, FeedFilters(), START)
        sql, params = listing.select_keyed(), (*listing.params, -1)  # LIMIT -1: no limit
        count = len(self._conn.execute(sql, params).fetchall())  # warms the cache
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            self._conn.execute(sql, params).fetchall()
            times.append(time.perf_counter() - started)
        return count, times

    def feed_total(self, company: int) -> int:
        listing = feed_listing(company, FeedFilters(), START)
        return int(self._conn.execute(listing.count(), listing.params).fetchone()[0])

    def close(self) -> None:
        self._conn.close()


class PgFloors:
    """PostgreSQL building each array with the app's PostgreSQL SQL, fetched by asyncpg."""

    name = "PostgreSQL"

    def __init__(self, url: str) -> None:
        import asyncpg

        self._loop = asyncio.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(url))

    def _run(self, work: Any) -> Any:
        return self._loop.run_until_complete(work)

    def measure(self, s: Scenario, budget: float) -> None:
        if s.floor is not None:
            statement = pg_whole_array(s.floor.listing, s.floor.limit is not None)
            seconds, s.floor_json = self._run(self._time(statement, s.floor.params, budget))
            s.add_floor(seconds)

    async def _time(self, statement: str, params: list[object], budget: float) -> tuple[float, str]:
        text = str(await self._conn.fetchval(statement, *params))  # warms the cache
        times: list[float] = []
        started = time.perf_counter()
        while len(times) < 5 or (
            time.perf_counter() - started < budget and len(times) < ROUNDS_MAX
        ):
            t0 = time.perf_counter()
            await self._conn.fetchval(statement, *params)
            times.append(time.perf_counter() - t0)
        return statistics.median(times), text

    def feed(self, company: int, rounds: int) -> tuple[int, list[float]]:
        listing = feed_listing(company, FeedFilters(), START)
        statement, params = pg_sql.select_keyed(listing), (*listing.params, None)  # no limit
        count = len(self._run(self._conn.fetch(statement, *params)))  # warms the cache
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            self._run(self._conn.fetch(statement, *params))
            times.append(time.perf_counter() - started)
        return count, times

    def feed_total(self, company: int) -> int:
        listing = feed_listing(company, FeedFilters(), START)
        return int(self._run(self._conn.fetchval(pg_sql.count(listing), *listing.params)))

    def close(self) -> None:
        self._run(self._conn.close())
        self._loop.close()


def open_floors(db: str, database_url: str) -> Floors:
    """The floors of the store a setup serves from."""
    return PgFloors(database_url) if database_url else SqliteFloors(db)


@contextlib.contextmanager
def postgresql(option: str, db: str) -> Iterator[str]:
    """The URL of a PostgreSQL database holding the data set ('' without the option).

    ``auto`` starts a throwaway cluster on 127.0.0.1 (the tests' own), stopped by PID
    when the block ends; a URL names an empty database the data set is copied into.
    """
    if not option:
        yield ""
        return
    from app.data.schema import upgrade_if_older
    from app.tools.pg_copy import copy_to_pg

    upgrade_if_older(db)  # as the server would at start: the copy needs today's schema
    with contextlib.ExitStack() as stack:
        url = option
        if option == "auto":
            from pgcluster import cluster

            url = stack.enter_context(cluster())
        asyncio.run(copy_to_pg(db, url))
        yield url
