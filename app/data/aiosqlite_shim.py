"""The one use of aiosqlite's private API: run a whole function in a connection's thread.

aiosqlite offers one thread hop per statement; a read that needs a transaction, an
ownership check, a count and a page would pay four. ``Connection._execute`` (queue a
callable on the connection's own thread) and ``Connection._conn`` (the sqlite3
connection) are what every public aiosqlite call goes through, so a whole read costs
one hop. Everything else (connect, rollback, close, in_transaction) goes through
aiosqlite's public API. ``check_private_api`` runs at import (and in
tests/test_shims.py), and pyproject caps aiosqlite below the next minor version: an
upgrade that moves either name fails at once, loudly.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from importlib.metadata import version
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")


def check_private_api(connection: type[Any] = aiosqlite.Connection) -> None:
    """Fail with one clear error if this aiosqlite lacks what the module relies on."""
    missing = []
    if not asyncio.iscoroutinefunction(getattr(connection, "_execute", None)):
        missing.append("Connection._execute")
    if not isinstance(getattr(connection, "_conn", None), property):
        missing.append("Connection._conn")
    if missing:
        raise RuntimeError(
            f"aiosqlite {version('aiosqlite')} lacks {', '.join(missing)}: "
            "update app/data/aiosqlite_shim.py"
        )


check_private_api()


async def run_in_thread(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(sqlite3_connection)`` in the aiosqlite connection's own thread."""
    raw: sqlite3.Connection = conn._conn
    result: T = await conn._execute(fn, raw)  # type: ignore[no-untyped-call]
    return result
