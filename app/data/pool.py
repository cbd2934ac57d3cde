"""The read-only serving pool: where each read runs, and how long it holds a connection.

The serving process only reads (``PRAGMA query_only``). Short reads run right on the
event loop's own connection: on this kind of machine a hop to a thread costs more than
a small query. Everything that may take long (a count not yet known, a deep page, a
long array, any page of reports) runs on one of a few pooled connections, each with
its own thread, so the loop is never blocked for more than a short read; and a read
meant to be short that runs past INLINE_SECONDS after all is stopped and read there.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TypeVar

import aiosqlite

from . import feed, webhooks
from .aiosqlite_shim import run_in_thread
from .api_keys import ActiveKey, find_caller
from .listings import (
    ChunkEncoder,
    Guard,
    Listing,
    Page,
    Paging,
    Records,
    StreamState,
    Window,
    check_guard,
    close_stream,
    next_records,
    open_stream,
    read_one,
    read_page,
    read_small,
    read_window,
)
from .schema import DatabaseError, check_readable, data_token, file_identity
from .store import Unavailable

T = TypeVar("T")

# A whole array shorter than this is read on the event loop; longer ones stream.
INLINE_ROWS = 200
# A page is read on the event loop when its total is known and it reads no further
# than this many rows (OFFSET walks every row it skips: deep pages go to a thread).
INLINE_PAGE_ROWS = 1000
# A read meant to be short that runs longer than this on the event loop is stopped and read
# again on a pooled thread: a filter may pass over a company's every row to find none (a due
# date no inscription has took 240 ms on the large set), and every other request would wait.
INLINE_SECONDS = 0.02
# How many SQLite instructions run between two looks at the clock (about 1 ms).
INLINE_CHECK_STEPS = 10_000

# Every serving connection maps the file (up to SQLite's build limit, 2 GiB in Debian's):
# a page missing from a connection's cache is then memory the kernel already holds, not a
# system call and a copy. A short read after a start or a load finds its pages at once,
# and a long stream reads the index of its employees' fields at random without a system
# call per page (on the large set campaign 1's million events: 2.0 s to 1.7 s). The
# mapped pages count in the process's resident memory as shared file pages, which the
# kernel may drop.
MMAP_BYTES = 1 << 31
# How often an idle pool looks whether its file was replaced (see ReadPool.reopen).
WATCH_SECONDS = 1.0
REPLACED = "the database file is being replaced"

READ_PRAGMAS = (
    "PRAGMA query_only = ON",
    "PRAGMA busy_timeout = 5000",
    "PRAGMA cache_size = -16000",
    f"PRAGMA mmap_size = {MMAP_BYTES}",
)


def unanswered(exc: sqlite3.DatabaseError) -> Exception:
    """What the file answered instead of rows (a table dropped behind the writers' back, a
    damaged page, an I/O error, a lock held past the busy timeout) is Unavailable: a 503
    and one log line, as on PostgreSQL, not an unexpected error with its traceback. An
    error of a statement itself (a ProgrammingError, say) stays what it is."""
    of_the_file = (sqlite3.OperationalError, sqlite3.InternalError)
    if isinstance(exc, of_the_file) or type(exc) is sqlite3.DatabaseError:  # "malformed"
        return Unavailable(f"SQLite: {exc}")
    return exc


def configure_reader(conn: sqlite3.Connection) -> None:
    """Make a connection a serving one: read-only settings.

    Filters match case-folded copies the writers store (the ``*_key`` columns), so the
    reader needs no SQL function of its own: PostgreSQL reads the same columns.
    """
    for pragma in READ_PRAGMAS:
        conn.execute(pragma)


class ReadPool:
    """A few read-only connections, so concurrent requests do not queue on one thread.

    The pool remembers which file it opened (device and inode): a database replaced by
    rename is noticed (:meth:`replaced`) and reopened (:meth:`reopen`) rather than
    served stale from the old, unlinked file. A watcher notices it too when no request
    comes, so an idle process lets go of the old file as well.
    """

    def __init__(self, path: Path, size: int) -> None:
        self._path = path
        self._size = size
        self._lock = asyncio.Lock()
        # Streams may hold all connections but one: short reads always find one.
        self._stream_slots = asyncio.Semaphore(max(1, size - 1))
        self._all: list[aiosqlite.Connection] = []
        self._idle: asyncio.LifoQueue[aiosqlite.Connection] = asyncio.LifoQueue()
        self._inline = sqlite3.connect(":memory:")
        self._identity: tuple[int, int] | None = (0, 0)
        self._companions: Companions = {}
        self._borrowed = 0
        self._closed = True  # no connection to any file: reads raise Unavailable
        self._watcher: asyncio.Task[None] | None = None
        self._reopening: asyncio.Task[None] | None = None  # waiting for borrowed reads

    @classmethod
    async def open(cls, path: str | Path, size: int) -> ReadPool:
        """Open ``size`` read-only connections to an existing database."""
        pool = cls(Path(path), size)
        await pool._connect()
        pool._watcher = asyncio.create_task(pool._watch())
        return pool

    async def _connect(self) -> None:
        """Open a set of connections to the file now at the path (none may be open)."""
        check_readable(self._path)
        identity = file_identity(self._path)
        for _ in range(self._size):
            conn = await aiosqlite.connect(self._path, isolation_level=None)
            await run_in_thread(conn, configure_reader)
            self._all.append(conn)
            self._idle.put_nowait(conn)
        self._inline = sqlite3.connect(self._path, isolation_level=None)
        configure_reader(self._inline)
        data_token(self._inline)  # a first read opens (or creates) the -wal and -shm
        self._identity = identity
        self._companions = opened_companions(self._path)
        self._closed = False

    def replaced(self) -> bool:
        """Whether another file now sits at the path (a missing file is not a new one)."""
        try:
            return file_identity(self._path) != self._identity
        except OSError:
            return False

    async def reopen(self) -> None:
        """Serve from the file now at the path, never through the old file's WAL.

        SQLite finds a WAL by the file's name, and leaves a moved file's ``-wal`` and
        ``-shm`` behind when its last connection closes: the new file would be read
        through the old frames, and the next writer would checkpoint them into it. So
        the pool closes its connections to the old file (waiting for borrowed ones),
        deletes the ``-wal`` and ``-shm`` it had open if they are still there (another
        process or the swap tool may have done so, and a newer pair is left alone),
        then opens the new file.
        """
        async with self._lock:
            if not self.replaced():
                return
            await self._let_go()  # also what a failed reopen had opened
            remove_companions(self._companions)
            await self._connect()

    async def _let_go(self) -> None:
        """Close every connection once none is borrowed; reads are refused until reopened."""
        self._closed = True
        while self._borrowed:
            await asyncio.sleep(0.01)
        await self.close_connections()

    async def _watch(self) -> None:
        """Reopen a replaced file even when no request comes to notice it."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if self.replaced():
                await self._reopen_quietly()

    def run_inline(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a short read right here, on the event loop's own connection.

        Only for work bounded to a few milliseconds. A failure rolls back whatever
        transaction the function left open.
        """
        if self._closed:
            raise Unavailable(REPLACED)
        try:
            return fn(self._inline)
        except sqlite3.DatabaseError as exc:
            raise unanswered(exc) from exc
        finally:
            if self._inline.in_transaction:
                self._inline.rollback()

    async def short_read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a read meant to be short on the event loop; past INLINE_SECONDS it is
        stopped and read again on a pooled thread, so the loop waits no longer than that."""
        try:
            return self.run_inline(lambda conn: within(conn, fn, INLINE_SECONDS))
        except TooLong:
            pass
        async with self.acquire() as conn:
            return await run_in_thread(conn, fn)

    def token_now(self) -> str:
        """The data token as the database has it now (one primary-key read, inline)."""
        return self.run_inline(data_token)

    async def current_token(self) -> str:
        """The data token now, from the file now at the path (reopened if replaced).

        A reopen waits for the reads in progress (a stream may take minutes): while one
        is borrowed, the reopen goes on in the background and this request is refused
        (503, Retry-After) instead of held with every other one until the stream ends.
        """
        if self.replaced():
            if self._lock.locked() or self._borrowed:
                self._reopen_later()
                raise Unavailable(REPLACED)
            await self.reopen()
        return self.token_now()

    def _reopen_later(self) -> None:
        """Start a background reopen, unless one runs."""
        if self._reopening is None or self._reopening.done():
            self._reopening = asyncio.create_task(self._reopen_quietly())

    async def _reopen_quietly(self) -> None:
        """A reopen whose failure waits for the next request or the next look to try again."""
        with contextlib.suppress(DatabaseError, sqlite3.Error, OSError):
            await self.reopen()

    async def known_token(self) -> str:
        """The data token now: one primary-key read on the loop's connection."""
        return await self.current_token()

    async def find_caller(self, key_hash: str) -> ActiveKey | None:
        """The key's (id, company id): one primary-key read on the loop's connection."""
        return self.run_inline(lambda conn: find_caller(conn, key_hash))

    async def check_guard(self, guard: Guard | None) -> None:
        """Raise RecordNotFound unless the company owns the record (one indexed read)."""
        self.run_inline(lambda conn: check_guard(conn, guard))

    async def ready(self) -> None:
        """Raise unless a pooled connection answers and the file reads afresh."""
        await self.token()
        await asyncio.to_thread(check_readable, self._path)

    async def token(self) -> str:
        """The data token read on a pooled connection: proves the pool answers."""
        async with self.acquire() as conn:
            return await run_in_thread(conn, data_token)

    async def page(self, listing: Listing, paging: Paging, known: tuple[str, int] | None) -> Page:
        """One page with its total; ``known`` is a total counted for the current token.

        A total read from a summary (``listing.summed``) is a short read as a known one is.
        A hand-over to a pooled thread cost a page of 25 campaigns about 300 µs more CPU
        under 32 clients (954 µs against 654 µs), 40 µs for one client alone.
        """
        short = paging.offset + paging.per_page <= INLINE_PAGE_ROWS
        if (known is not None or listing.summed) and short and listing.light(paging.per_page):
            return await self.short_read(lambda conn: read_page(conn, listing, paging, known))
        async with self.acquire() as conn:
            return await run_in_thread(conn, lambda raw: read_page(raw, listing, paging, known))

    async def window(self, listing: Listing, limit: int) -> Window:
        """Records after a position: on the event loop when the listing reads no more rows
        than it returns and they are few, else on a thread.

        A filter may skip many rows before it finds ``limit`` records: never on the loop.
        A hand-over to a pooled thread costs more than a short read itself: under 32
        clients, a change feed's answer of 100 records took twice the CPU on a thread.
        """
        if listing.light(limit) and limit <= INLINE_PAGE_ROWS:
            return await self.short_read(lambda conn: read_window(conn, listing, limit))
        async with self.acquire() as conn:
            return await run_in_thread(conn, lambda raw: read_window(raw, listing, limit))

    async def cursor_secret(self) -> bytes:
        """The database's secret for signing feed cursors (one meta row: on the loop)."""
        return self.run_inline(feed.cursor_secret)

    async def feed_mark(self, seq: int) -> str | None:
        """The mark a feed cursor at ``seq`` is signed with (one meta row: on the loop)."""
        return self.run_inline(lambda conn: feed.feed_mark(conn, seq))

    async def webhooks_version(self) -> str:
        """The version of what the webhook listings show (one meta row: on the loop)."""
        return self.run_inline(webhooks.version)

    async def one(self, listing: Listing) -> Records:
        """A listing of at most one record (a report on one object): on the event loop
        when its figures are a few short reads, else on a thread."""
        if not listing.heavy:
            return await self.short_read(lambda conn: read_one(conn, listing))
        async with self.acquire() as conn:
            return await run_in_thread(conn, lambda raw: read_one(raw, listing))

    @asynccontextmanager
    async def whole(
        self,
        listing: Listing,
        encode: ChunkEncoder,
        stream_slot: AbstractAsyncContextManager[object] | None = None,
    ) -> AsyncIterator[Records | Stream]:
        """Every record of a listing: Records when short, else a Stream from one snapshot.

        Whether it is short is read on the event loop, or on a thread for a heavy listing.

        The stream holds its pooled connection (and snapshot) until the block ends,
        whether it was read to the end or abandoned. A stream first enters
        ``stream_slot`` (the caller's own limit, which may refuse), then waits for one of
        the pool's stream slots.
        """

        def small_read(conn: sqlite3.Connection) -> Records | None:
            return read_small(conn, listing, INLINE_ROWS)

        if listing.heavy:  # a few records may still lie far apart: looked for on a thread
            async with self.acquire() as conn:
                small = await run_in_thread(conn, small_read)
        else:
            small = await self.short_read(small_read)
        if small is not None:
            yield small
            return
        async with (
            stream_slot or contextlib.nullcontext(),
            self._stream_slots,
            self.acquire() as conn,
        ):

            def start(raw: sqlite3.Connection) -> tuple[StreamState, bytes]:
                state = open_stream(raw, listing)
                return state, encode(state.first, True)

            state, first = await run_in_thread(conn, start)
            stream = Stream(conn, state, first, encode)
            try:
                yield stream
            finally:
                await stream.close()

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[aiosqlite.Connection]:
        """Borrow a connection for the length of one request."""
        if self._closed:
            raise Unavailable(REPLACED)
        conn = await self._idle.get()
        self._borrowed += 1
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            raise unanswered(exc) from exc
        finally:
            try:
                if conn.in_transaction:
                    await conn.rollback()
                self._idle.put_nowait(conn)
            finally:  # a connection that cannot roll back is not lent again, nor waited for
                self._borrowed -= 1

    async def close_connections(self) -> None:
        """Close every connection to the file."""
        self._closed = True
        while not self._idle.empty():
            self._idle.get_nowait()
        for conn in self._all:
            await conn.close()
        self._all = []
        self._inline.close()

    async def close(self) -> None:
        """Stop watching (and reopening) and close every connection (the app's cleanup).

        A borrowed connection is closed once returned: at a shutdown, aiohttp cancels a
        request still running and goes on to this cleanup without waiting for it, and a
        stream cut short ends its snapshot on its connection (closed under it, the
        request would end in a 500 instead of the warning that it was cut short).
        """
        for task in (self._watcher, self._reopening):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._let_go()


class TooLong(Exception):
    """A read on the event loop ran past its time: it goes to a pooled thread instead."""


def within(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T], seconds: float) -> T:
    """``fn(conn)``, stopped with TooLong once it has run ``seconds``."""
    deadline = time.perf_counter() + seconds

    def past() -> bool:
        return time.perf_counter() > deadline

    conn.set_progress_handler(past, INLINE_CHECK_STEPS)
    try:
        return fn(conn)
    except sqlite3.OperationalError:
        if past():
            raise TooLong from None
        raise
    finally:
        conn.set_progress_handler(None, 0)


def companions(path: Path) -> tuple[Path, Path]:
    """The WAL and shared-memory files SQLite keeps beside a database in WAL mode."""
    return Path(f"{path}-wal"), Path(f"{path}-shm")


Companions = dict[Path, tuple[int, int] | None]  # each file's identity when opened, or None


def opened_companions(path: Path) -> Companions:
    """The -wal and -shm a connection to ``path`` opened, by identity: once another file is
    at the path, these and only these are removed (see ReadPool.reopen)."""
    return {file: file_identity(file, True) for file in companions(path)}


def remove_companions(opened: Companions) -> None:
    """Delete a moved file's -wal and -shm if they are still the ones opened (another
    process or the swap tool may have done so, and a newer pair is left alone)."""
    for file, identity in opened.items():
        if identity is not None and file_identity(file, True) == identity:
            file.unlink(missing_ok=True)


class Stream:
    """A long listing being read on a pooled connection, chunk by chunk.

    While the caller sends one chunk, the connection's thread reads and encodes the
    next, so the event loop only ever writes finished bytes.
    """

    def __init__(
        self, conn: aiosqlite.Connection, state: StreamState, first: bytes, encode: ChunkEncoder
    ) -> None:
        self.token = state.token
        self.first = first
        self._conn = conn
        self._state = state
        self._encode = encode
        self._pending: asyncio.Future[bytes] | None = None

    def _read_next(self, raw: sqlite3.Connection) -> bytes:
        return self._encode(next_records(raw, self._state), False)

    async def rest(self) -> AsyncIterator[bytes]:
        """The encoded chunks after the first, until the listing ends."""
        if self._state.cursor is not None:
            self._pending = self._next()
        while self._pending is not None:
            chunk = await self._pending
            # Read chunk n+1 on the thread while the caller sends chunk n.
            more = self._state.cursor is not None
            self._pending = self._next() if more else None
            if chunk:
                yield chunk

    def _next(self) -> asyncio.Future[bytes]:
        return asyncio.ensure_future(run_in_thread(self._conn, self._read_next))

    async def close(self) -> None:
        """End the snapshot, also when the client went away mid-stream."""
        if self._pending is not None:
            with contextlib.suppress(Exception):
                await self._pending
            self._pending = None
        if self._state.cursor is not None:
            await run_in_thread(self._conn, lambda raw: close_stream(raw, self._state))
