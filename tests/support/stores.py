"""The two stores the behaviour suite runs on: SQLite files and a PostgreSQL database.

A test module that runs on both declares ``store_kind = on_both_stores()``; the
``store`` fixture then gives the sample data in that store, loads more into it and
writes to it as an operator would (contract.md 15: every answer the same on both).

A module whose tests only read may say so (``STORE_READS_ONLY = True``): its PostgreSQL
tests then share one copy of the sample, made once for the module instead of once a
test. The store refuses to write there; a test of such a module that writes is marked
``writes`` and gets a copy of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from pgcluster import cluster, server_bin

from app.data.pg.sql import numbered
from app.tools.loader import SAMPLE_FIXTURE, load_files
from app.tools.pg_loader import load_pg

STORES = ("sqlite", "postgresql")
TEMPLATE = "reporting_sample"


def on_both_stores() -> Any:
    """A ``store_kind`` fixture running each test of a module on both stores."""

    @pytest.fixture(params=STORES, name="store_kind")
    def store_kind(request: pytest.FixtureRequest) -> str:
        return str(request.param)

    return store_kind


# The same for one test of a module: on each store, or on PostgreSQL alone (where a
# module's SQLite test has a PostgreSQL twin with settings of its own).
EACH_STORE = pytest.mark.parametrize("store_kind", STORES)
ON_POSTGRESQL = pytest.mark.parametrize("store_kind", ["postgresql"])


def shares_store(request: pytest.FixtureRequest) -> bool:
    """Whether this test reads its module's shared copy of the sample (see above)."""
    reads_only = bool(getattr(request.module, "STORE_READS_ONLY", False))
    return reads_only and request.node.get_closest_marker("writes") is None


@dataclass
class Store:
    """The store under test: where the sample lives and how an operator writes to it."""

    kind: str
    sqlite_path: Path
    url: str = ""
    shared: bool = False  # the module's tests share it: writing is refused

    def settings(self) -> dict[str, Any]:
        """The app's configuration for this store."""
        return {"db": str(self.sqlite_path), "database_url": self.url}

    def _writable(self) -> None:
        if self.shared:
            raise AssertionError("the module's tests share this store: mark a test that writes")

    async def load(self, files: Sequence[Path]) -> None:
        """Load fixture files with the store's own loader."""
        self._writable()
        if self.url:
            await load_pg(self.url, files)
        else:
            await asyncio.to_thread(load_files, self.sqlite_path, files)

    @contextlib.asynccontextmanager
    async def scratch(self, directory: Path) -> AsyncIterator[Store]:
        """An empty store of the same kind: a new file in ``directory``, or a new database
        on the same cluster (dropped afterwards), for a test's hand-made fixture."""
        file = directory / "scratch.sqlite3"
        if not self.url:
            yield Store(self.kind, file)
            return
        name = f"t_{uuid.uuid4().hex[:16]}"
        await _admin(self.url, f"CREATE DATABASE {name} TEMPLATE template0")
        try:
            yield Store(self.kind, file, database_url(self.url, name))
        finally:
            await _admin(self.url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    async def execute(self, sql: str, *params: Any) -> None:
        """One write statement (SQLite's ``?`` parameters) committed on its own."""
        self._writable()
        if self.url:
            conn = await asyncpg.connect(self.url)
            try:
                await conn.execute(numbered(sql), *params)
            finally:
                await conn.close()
        else:
            with sqlite3.connect(self.sqlite_path) as writer:
                writer.execute(sql, params)
            writer.close()


def require_postgresql() -> None:
    """Skip without PostgreSQL's server, except in CI (CI=true), where its absence fails."""
    if server_bin() is not None:
        return
    reason = "PostgreSQL is not installed (make postgresql installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def start_cluster() -> Iterator[str]:
    """A throwaway cluster for the session, or a skip (a failure under CI) without one."""
    require_postgresql()
    with cluster() as url:
        asyncio.run(_create_template(url))
        yield url


async def _create_template(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"CREATE DATABASE {TEMPLATE}")
    finally:
        await conn.close()
    await load_pg(database_url(url, TEMPLATE), [SAMPLE_FIXTURE])


def database_url(url: str, name: str) -> str:
    return f"{url.rsplit('/', 1)[0]}/{name}"


def fresh_database(url: str, template: str = TEMPLATE) -> Iterator[str]:
    """A database copied from ``template`` for one test (template0: empty); dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    # FILE_COPY copies the files (the cluster runs without fsync): about half the time
    # of PostgreSQL's default, which writes every page through the WAL.
    run_apart(_admin(url, f"CREATE DATABASE {name} TEMPLATE {template} STRATEGY FILE_COPY"))
    try:
        yield database_url(url, name)
    finally:
        run_apart(_admin(url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


def run_apart(work: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine to the end on a loop of its own, also from an event loop's thread."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, work).result()


def postmaster_pid(url: str) -> int:
    """The postmaster of the cluster at ``url``: the parent of a backend's process."""
    return int(run_apart(_postmaster(url)))


def _parent(pid: int) -> int:
    # /proc/PID/stat: "pid (name) state ppid ...", the name may hold spaces.
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@contextlib.contextmanager
def frozen(url: str) -> Iterator[None]:
    """Every process of the cluster stopped (SIGSTOP) for the block, then resumed by PID.

    The postmaster first, so that it forks no backend that would escape the freeze. As
    root the postmaster's parent is ``runuser``, which stops itself when its child stops
    and waits for a SIGCONT of its own: it gets one too.
    """
    postmaster = postmaster_pid(url)
    stopped = [postmaster, _parent(postmaster)]
    try:
        os.kill(postmaster, signal.SIGSTOP)
        for pid in children(postmaster):
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (a postmaster's backends and helpers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            if _parent(int(stat.parent.name)) == parent:
                found.append(int(stat.parent.name))
    return found


def stop_cluster(url: str, guard_seconds: float = 60.0) -> None:
    """Shut the cluster down (SIGINT to its postmaster: a fast shutdown); wait until its
    port refuses connections. The cluster's own context still cleans up after it."""
    os.kill(postmaster_pid(url), signal.SIGINT)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    deadline = time.monotonic() + guard_seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return
        assert time.monotonic() < deadline, "the PostgreSQL server does not stop"
        time.sleep(0.05)


async def _postmaster(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:  # the parent is read while the backend still runs
        return _parent(int(await conn.fetchval("SELECT pg_backend_pid()")))
    finally:
        await conn.close()


async def _admin(url: str, statement: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def database_copy(url: str) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """A copy of the PostgreSQL database at ``url`` now; the function that makes the
    database again from it (a restore in place). The copy is dropped afterwards."""
    name, copy = url.rsplit("/", 1)[1], f"b_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(database_url(url, "postgres"))
    try:
        await admin.execute(f"CREATE DATABASE {copy} TEMPLATE {name}")

        async def restore_database() -> None:
            await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
            await admin.execute(f"CREATE DATABASE {name} TEMPLATE {copy}")

        yield restore_database
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {copy} WITH (FORCE)")
        await admin.close()


async def read_only_role(url: str) -> str:
    """The reading role of docs/operations.md for the server on the database at ``url``
    (it may read and nothing else); the URL that connects as it."""
    name = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'reporting_reader')"
            " THEN CREATE ROLE reporting_reader LOGIN; END IF; END $$"
        )
        await admin.execute(f"GRANT CONNECT ON DATABASE {name} TO reporting_reader")
        await admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reporting_reader")
        await admin.execute("ALTER ROLE reporting_reader SET default_transaction_read_only = on")
    finally:
        await admin.close()
    return url.replace("postgres@", "reporting_reader@")


async def fetch_all(url: str, sql: str, *params: Any) -> list[Any]:
    conn = await asyncpg.connect(url)
    try:
        return list(await conn.fetch(sql, *params))
    finally:
        await conn.close()


async def activity(url: str) -> set[tuple[Any, ...]]:
    """Each other backend of the database: its last statement and when its state changed."""
    rows = await fetch_all(
        url,
        "SELECT pid, query, state_change FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    return {tuple(row) for row in rows}
