"""A read meant to be short never holds the event loop long (one tenant cannot starve
another): past its time on the loop's connection, it is stopped and read on a thread."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from app.data.listings import Listing, Paging, Record
from app.data.pool import ReadPool, TooLong, within

from .support.factories import make_sample_db

# A filter that passes over many rows to find none, the way a due date no inscription
# has walks a company's every inscription: millions of rows on any database.
MANY = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 3000000)"
NOTHING_AMONG_MANY = f"FROM ({MANY} SELECT x FROM n) AS n WHERE n.x < 0"
# Its total from a summary, as the inscriptions' and the directory's are: a short read.
SUMMED = Listing(
    Record("probe", "json_object('x', n.x)"), NOTHING_AMONG_MANY, NOTHING_AMONG_MANY, "n.x", (),
    summed="SELECT 0",
)  # fmt: skip


def count_many(conn: sqlite3.Connection) -> int:
    return int(conn.execute(f"{MANY} SELECT count(*) FROM n").fetchone()[0])


def test_within_stops_a_read_past_its_time_and_leaves_the_connection_as_it_was() -> None:
    conn = sqlite3.connect(":memory:")
    with pytest.raises(TooLong):
        within(conn, count_many, 0.0)
    assert within(conn, lambda c: c.execute("SELECT 1").fetchone()[0], 0.0) == 1  # too short
    assert count_many(conn) == 3_000_000  # no handler left to stop it


async def test_a_long_short_read_moves_to_a_thread(tmp_path: Path) -> None:
    """The loop goes on while the read runs: a ticker turns many times meanwhile (run on
    the loop's connection, the whole read would pass between two of its turns)."""
    pool = await ReadPool.open(make_sample_db(tmp_path), 2)
    try:
        read = asyncio.ensure_future(pool.page(SUMMED, Paging(1, 25), None))
        turns = 0
        while not read.done():
            await asyncio.sleep(0.001)
            turns += 1
        page = await read
    finally:
        await pool.close()
    assert (page.texts, page.total) == ([], 0)
    assert turns >= 10
