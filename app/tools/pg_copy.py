"""Copying a whole SQLite database into an empty PostgreSQL one (the generator's
``--database-url``, or any generated file moved to PostgreSQL).

The generator writes its synthetic data set into SQLite (its fastest path); with
``--database-url`` that file is then copied here, table by table with COPY, in one
transaction that also moves the data version, so servers see all of it or none.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg

from ..data.pg.schema import bump_data_version, schema_for_a_write
from ..data.pg.session import connect
from ..data.pg.stats_summary import refresh as refresh_stats
from ..data.pg.summaries import fill as fill_reports
from ..data.stats_summary import EVERYTHING
from .cli import ToolError
from .fixture_format import TABLES as FIXTURE_TABLES
from .pg_loader import sqlite_decimal

# Dependency order (the fixture format's); meta's change sequence and cursor secret come along.
TABLES = tuple(FIXTURE_TABLES)
BATCH_ROWS = 50_000
GENERATED = (
    "SELECT coalesce(array_agg(column_name::text), '{}') FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'ALWAYS'"
)


class CopyRefused(ToolError):
    """The target database already holds data."""


def _batches(conn: sqlite3.Connection, table: str, columns: list[str]) -> Iterator[list[Any]]:
    cursor = conn.execute(f"SELECT {', '.join(columns)} FROM {table}")
    result = columns.index("result") if table == "section_results" else -1
    while rows := cursor.fetchmany(BATCH_ROWS):
        if result >= 0:
            rows = [(*r[:result], _result(r[result]), *r[result + 1 :]) for r in rows]
        yield rows


def _result(value: float | None) -> Any:
    return None if value is None else sqlite_decimal(value)


async def _keep_places(source: sqlite3.Connection, conn: asyncpg.Connection) -> None:
    """The change feeds' places as the file has them: copying results and team members
    left their inscriptions and employees unplaced (the triggers of a write)."""
    for table in ("inscriptions", "employees"):
        placed = f"CREATE TEMP TABLE placed_{table} (id BIGINT, seq BIGINT) ON COMMIT DROP"
        await conn.execute(placed)
        for rows in _batches(source, table, ["id", "seq"]):
            await conn.copy_records_to_table(f"placed_{table}", records=rows)
        await conn.execute(
            f"UPDATE {table} t SET seq = p.seq FROM placed_{table} p"
            " WHERE p.id = t.id AND t.seq IS NULL"
        )


async def copy_to_pg(sqlite_path: str | Path, url: str) -> dict[str, int]:
    """Copy every row of the SQLite file into the empty PostgreSQL database at ``url``."""
    source = sqlite3.connect(f"{Path(sqlite_path).resolve().as_uri()}?mode=ro", uri=True)
    # The copy commits synchronously even where the server's default is not: VACUUM only
    # marks a page all-visible once its rows' commit is flushed (measured on a server
    # with synchronous_commit=off: no page marked right after the copy).
    conn = await connect(url, synchronous_commit="on")
    counts: dict[str, int] = {}
    try:
        async with schema_for_a_write(conn), conn.transaction():
            for table in TABLES:
                if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {table})"):
                    raise CopyRefused(f"the PostgreSQL database already holds {table}")
            for table in TABLES:
                made = set(await conn.fetchval(GENERATED, table))  # PostgreSQL's to write
                info = source.execute(f"PRAGMA table_info({table})")
                columns = [row[1] for row in info if row[1] not in made]
                counts[table] = 0
                for rows in _batches(source, table, columns):
                    await conn.copy_records_to_table(table, records=rows, columns=columns)
                    counts[table] += len(rows)
            await _keep_places(source, conn)
            if counts["api_keys"]:
                await conn.execute(
                    "SELECT setval(pg_get_serial_sequence('api_keys', 'id'), max(id)) FROM api_keys"
                )
            for key in ("change_seq", "cursor_secret"):
                row = source.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    await conn.execute("UPDATE meta SET value = $1 WHERE key = $2", row[0], key)
            # The feed's marks too, so that the file's cursors keep working here, and the
            # settings the verdicts were made with.
            await conn.execute("DELETE FROM meta WHERE key LIKE 'feed_mark:%'")
            marks = source.execute(
                "SELECT key, value FROM meta WHERE key LIKE 'feed_mark:%'"
                " OR key LIKE 'automation_rules:%'"
            )
            await conn.executemany("INSERT INTO meta (key, value) VALUES ($1, $2)", list(marks))
            await refresh_stats(conn, 0, EVERYTHING)
            await fill_reports(conn)
            await bump_data_version(conn)
        # Statistics, and the visibility map: the reports' figures come from index-only
        # scans, which PostgreSQL only plans once the copied pages are known all-visible
        # (a courses page: 150 ms before, 10 ms after, on 40,000 inscriptions; the
        # standard set's: 800 ms, then 42 ms).
        await conn.execute("VACUUM ANALYZE")
    finally:
        source.close()
        await conn.close()
    return counts
