"""The private library names our shims rely on still exist (fails loudly on an upgrade).

app/data/aiosqlite_shim.py runs a whole read in an aiosqlite connection's thread through
``Connection._execute`` and ``Connection._conn``; pyproject pins aiosqlite below the next
minor version. If this test fails after an upgrade, rewrite the shim, then lift the pin.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import aiosqlite

from app.data.aiosqlite_shim import run_in_thread


async def test_aiosqlite_private_names_exist() -> None:
    assert callable(getattr(aiosqlite.Connection, "_execute", None))
    assert isinstance(getattr(aiosqlite.Connection, "_conn", None), property)


async def test_run_in_thread_runs_on_the_connection_thread(tmp_path: Path) -> None:
    """The function gets the sqlite3 connection, on the connection's own thread."""
    async with aiosqlite.connect(tmp_path / "x.sqlite3") as conn:

        def probe(raw: sqlite3.Connection) -> tuple[int, bool]:
            value = raw.execute("SELECT 41 + 1").fetchone()[0]
            return value, threading.current_thread() is not threading.main_thread()

        assert await run_in_thread(conn, probe) == (42, True)
