"""The read-only serving pool: pooled aiosqlite connections and one on the event loop.

The serving process only reads (``PRAGMA query_only``).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from .schema import check_readable

T = TypeVar("T")

READ_PRAGMAS = (
    "PRAGMA query_only = ON",
    "PRAGMA busy_timeout = 5000",
    "PRAGMA cache_size = -16000",
)


class ReadPool:
    """A few read-only connections, so concurrent requests do not queue on one thread."""

    def __init__(self, connections: list[aiosqlite.Connection], inline: sqlite3.Connection) -> None:
        self._all = connections
        self._inline = inline
        self._idle: asyncio.LifoQueue[aiosqlite.Connection] = asyncio.LifoQueue()
        for conn in connections:
            self._idle.put_nowait(conn)

    @classmethod
    async def open(cls, path: str | Path, size: int) -> ReadPool:
        """Open ``size`` read-only connections to an existing database."""
        check_readable(path)
        connections = []
        for _ in range(size):
            conn = await aiosqlite.connect(path, isolation_level=None)
            for pragma in READ_PRAGMAS:
                await conn.execute(pragma)
            connections.append(conn)
        inline = sqlite3.connect(path, isolation_level=None)
        for pragma in READ_PRAGMAS:
            inline.execute(pragma)
        return cls(connections, inline)

    def run_inline(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a query function right here, on the event loop's own connection.

        Only for work bounded to a few milliseconds (a page, a probe of a small result):
        it saves the thread hop, which on this kind of machine costs more than the
        query. The function must finish its transaction; a failure rolls it back.
        """
        try:
            return fn(self._inline, *args, **kwargs)
        finally:
            if self._inline.in_transaction:
                self._inline.rollback()

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[aiosqlite.Connection]:
        """Borrow a connection for the length of one request."""
        conn = await self._idle.get()
        try:
            yield conn
        finally:
            if conn.in_transaction:
                await conn.rollback()
            self._idle.put_nowait(conn)

    async def close(self) -> None:
        """Close every connection (the app's cleanup)."""
        for conn in self._all:
            await conn.close()
        self._inline.close()

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(sqlite3_connection, *args, **kwargs)`` on an idle connection, in one hop."""
        async with self.acquire() as conn:
            return await run_on(conn, fn, *args, **kwargs)


async def run_on(conn: aiosqlite.Connection, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a synchronous query function in the connection's own thread.

    aiosqlite offers one hop per statement; a request that needs a transaction, an
    existence check and a query would pay three or four. ``_execute`` is the method
    every aiosqlite call goes through, so a whole query function costs a single hop.
    """
    return await conn._execute(lambda: fn(conn._conn, *args, **kwargs))
