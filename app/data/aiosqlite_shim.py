"""The one use of aiosqlite's private API: run a whole function in a connection's thread.

aiosqlite offers one thread hop per statement; a read that needs a transaction, an
ownership check, a count and a page would pay four. ``Connection._execute`` (queue a
callable on the connection's own thread) and ``Connection._conn`` (the sqlite3
connection) are what every public aiosqlite call goes through, so a whole read costs
one hop. pyproject pins aiosqlite below the next minor version, and
tests/test_shims.py fails loudly if an upgrade moves either name.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

import aiosqlite

T = TypeVar("T")


async def run_in_thread(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(sqlite3_connection)`` in the aiosqlite connection's own thread."""
    raw: sqlite3.Connection = conn._conn
    result: T = await conn._execute(fn, raw)  # type: ignore[no-untyped-call]
    return result
