"""Serving from PostgreSQL: the store the responder reads through, over an asyncpg pool.

Every read runs in one ``REPEATABLE READ READ ONLY`` transaction, so the data token,
the ownership check, the count and the records all come from one snapshot: no answer
mixes two loads. Long arrays stream from a server-side cursor inside that transaction.
The server never writes, so it works against a read-only role or a hot standby.
Loads are heard of by ``LISTEN`` (the loader notifies at commit), with a read of the
token at least every second as the fallback; a listening connection lost to an outage
is opened again once the database answers.

Every read takes a pooled connection and runs its statements within the read timeout;
a database that is stopped, unreachable or frozen raises :class:`Unavailable` (a 503
for the client) instead of hanging the request or failing it with a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg

from .. import feed, webhooks
from ..api_keys import CALLER_COLUMNS, ActiveKey, active_key
from ..listings import (
    CHUNK_ROWS,
    ChunkEncoder,
    Guard,
    Listing,
    Page,
    Paging,
    RecordNotFound,
    Records,
    Window,
)
from ..schema import SCHEMA_VERSION, TOKEN, DatabaseError
from ..store import Unavailable
from . import sql
from .schema import CHANNEL
from .session import SESSION, connect

log = logging.getLogger("app.pg")

INLINE_ROWS = 200
CALLER = (
    "SELECT " + CALLER_COLUMNS.format(agg="string_agg(company_id::text, ',')") + ","
    " extract(epoch FROM expires_at::timestamptz - now())::float8"
    " FROM api_keys k WHERE key_hash = $1 AND revoked_at IS NULL"
    " AND (expires_at IS NULL OR expires_at::timestamptz > now())"
)
POLL_SECONDS = 1.0
# What an outage raises: no connection, a lost or refused one, a shutdown, a timeout,
# the database dropped.
UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.InsufficientResourcesError,
    asyncpg.InvalidCatalogNameError,
    asyncpg.InsufficientPrivilegeError,  # a role without SELECT on a table: no answer either
    asyncpg.UndefinedTableError,  # a table (or column) dropped behind the writers' back
    asyncpg.UndefinedColumnError,
)
# The tables the role may not read, if any (the documented role reads them all).
UNREADABLE = (
    "SELECT string_agg(relname, ', ' ORDER BY relname) FROM pg_class"
    " WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')"
    " AND NOT has_table_privilege(oid, 'SELECT')"
)


def failure(exc: BaseException) -> str:
    """Why a statement failed, on one line. A connection lost inside a transaction fails
    its end too (asyncpg's ``cannot call Transaction.__aexit__()``): that must not hide
    why it was lost."""
    while isinstance(exc, asyncpg.InterfaceError) and "__aexit__" in str(exc):
        if exc.__context__ is None:
            break
        exc = exc.__context__
    return " ".join(str(exc).split()) or type(exc).__name__


class PgVersion:
    """The data token, kept current by notifications; read again after a quiet second."""

    def __init__(self, token: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.token = token
        self._clock = clock
        self._checked = clock()

    def is_stale(self) -> bool:
        return self._clock() - self._checked > POLL_SECONDS

    def update(self, token: str) -> None:
        self.token = token
        self._checked = self._clock()


class PgStream:
    """A long listing read from a server-side cursor, chunk by chunk, in one snapshot."""

    def __init__(self, token: str, first: bytes, cursor: Any, encode: ChunkEncoder) -> None:
        self.token = token
        self.first = first
        self._cursor = cursor
        self._encode = encode

    async def rest(self) -> AsyncIterator[bytes]:
        while True:
            rows = await self._cursor.fetch(CHUNK_ROWS)
            if rows:
                yield self._encode([row[0] for row in rows], False)
            if len(rows) < CHUNK_ROWS:
                return


class PgStore:
    """An asyncpg pool of read connections and a listening connection for loads."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        listener: asyncpg.Connection,
        token: str,
        size: int,
        timeout: float,
        url: str = "",
    ) -> None:
        self._pool = pool
        self._listener = listener
        self._timeout = timeout
        self._url = url  # empty: never listen again (a hot standby cannot)
        self._relisten_task: asyncio.Task[None] | None = None
        self._relistened = 0.0
        # Streams may hold all connections but one: short reads always find one.
        self._stream_slots = asyncio.Semaphore(max(1, size - 1))
        self.version = PgVersion(token)

    @classmethod
    async def open(cls, url: str, size: int, timeout: float) -> PgStore:
        """Connect, check the schema, and start listening for loads.

        ``timeout`` bounds each statement (and the cancel request asyncpg sends after
        one times out) and each wait for a pooled connection.
        """
        # No floor of open connections (min_size 0): asyncpg would restore one in the
        # background through an outage, logging a traceback at every try.
        pool = await asyncpg.create_pool(
            url,
            min_size=0,
            max_size=size,
            command_timeout=timeout,
            timeout=timeout,
            reset=keep_session,
            server_settings=SESSION,
        )
        try:
            async with pool.acquire() as conn:
                token = await check_schema(conn)
            listener = await connect(url, timeout=timeout)
        except (*UNAVAILABLE, asyncpg.PostgresError) as exc:
            await pool.close()
            raise DatabaseError(f"cannot connect to PostgreSQL: {exc}") from None
        except BaseException:
            await pool.close()
            raise
        store = cls(pool, listener, token, size, timeout, url)
        try:
            await listener.add_listener(CHANNEL, store._heard)
        except asyncpg.PostgresError as exc:  # a hot standby cannot LISTEN
            log.info("no notifications (%s): the data token is read every second", exc)
            await listener.close()
            store._url = ""
        return store

    def _relisten(self) -> None:
        """Open the lost listening connection again, in the background, once a second at most.

        Until it listens, :meth:`known_token` says None and answers are read afresh.
        """
        busy = self._relisten_task is not None and not self._relisten_task.done()
        if not self._url or busy or time.monotonic() - self._relistened < POLL_SECONDS:
            return
        self._relistened = time.monotonic()
        self._relisten_task = asyncio.create_task(self._listen_again())

    async def _listen_again(self) -> None:
        try:
            listener = await connect(self._url, timeout=self._timeout)
        except (*UNAVAILABLE, asyncpg.PostgresError):
            return  # still down: the next request tries again
        try:
            await listener.add_listener(CHANNEL, self._heard)
            # Loads missed while deaf: the token now, then every one heard from here on.
            self.version.update(str(await listener.fetchval(TOKEN, timeout=self._timeout)))
        except (*UNAVAILABLE, asyncpg.PostgresError):
            listener.terminate()
            return
        self._listener = listener

    def _heard(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        self.version.update(payload)

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection for one read; Unavailable when the database does not answer."""
        try:
            async with self._pool.acquire(timeout=self._timeout) as conn:
                yield conn
        except UNAVAILABLE as exc:
            raise Unavailable(f"PostgreSQL: {failure(exc)}") from None

    @asynccontextmanager
    async def _snapshot(self, guard: Guard | None) -> AsyncIterator[tuple[asyncpg.Connection, str]]:
        """A read-only repeatable-read transaction: its token, the ownership checked."""
        async with (
            self._connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            token = str(await conn.fetchval(TOKEN))
            await _check_guard(conn, guard)
            yield conn, token

    async def current_token(self) -> str:
        """The data token now; Unavailable while the database does not answer."""
        async with self._connection() as conn:
            return str(await conn.fetchval(TOKEN))

    async def token(self) -> str:
        return await self.current_token()

    async def known_token(self) -> str | None:
        """The token the notifications keep (sent at each load's commit); None while the
        store hears none (a hot standby, a lost listening connection)."""
        if self._listener.is_closed():
            self._relisten()
            return None
        return self.version.token

    async def ready(self) -> None:
        """Raise DatabaseError unless the database answers with our schema."""
        try:
            async with self._connection() as conn:
                await check_schema(conn)
                unreadable = await conn.fetchval(UNREADABLE)
        except asyncpg.PostgresError as exc:  # a role that may not read: not ready either
            raise DatabaseError(str(exc)) from None
        if unreadable:
            raise DatabaseError(f"the role may not read the tables {unreadable}")

    async def find_caller(self, key_hash: str) -> ActiveKey | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(CALLER, key_hash)
        return active_key(row) if row else None

    async def check_guard(self, guard: Guard | None) -> None:
        async with self._connection() as conn:
            await _check_guard(conn, guard)

    async def _short(
        self, listing: Listing, count: bool, window: str, *bounds: int
    ) -> tuple[str, int | None, list[bytes]]:
        """Token, total and records of a short read: one statement, one snapshot."""
        statement, params = sql.one_statement(listing, count, window)
        async with self._connection() as conn:
            token, owned, total, texts = await conn.fetchrow(statement, *params, *bounds)
        if not owned:
            raise RecordNotFound
        return str(token), total, list(texts)

    async def page(self, listing: Listing, paging: Paging, known: tuple[str, int] | None) -> Page:
        """One page and its total, counted unless ``known`` holds this token's total.

        A known total is only trusted when the token read with the page matches it;
        otherwise the page is read again with its count (a load came in between).
        """
        bounds = (paging.per_page, paging.offset)
        if known is not None:
            token, _, texts = await self._short(listing, False, "LIMIT ? OFFSET ?", *bounds)
            if token == known[0]:
                return Page(token, texts, known[1])
        token, total, texts = await self._short(listing, True, "LIMIT ? OFFSET ?", *bounds)
        return Page(token, texts, int(total or 0))

    async def window(self, listing: Listing, limit: int) -> Window:
        """Records after a feed position, at most ``limit``, from one snapshot."""
        statement = sql.select_keyed(listing)
        async with self._snapshot(listing.guard) as (conn, token):
            rows = await conn.fetch(statement, *listing.select_params, limit)
        return Window(token, [row[0] for row in rows], tuple(rows[-1][1:]) if rows else None)

    async def cursor_secret(self) -> bytes:
        """The database's secret for signing feed cursors (meta ``cursor_secret``)."""
        async with self._connection() as conn:
            value = await conn.fetchval("SELECT value FROM meta WHERE key = 'cursor_secret'")
        if not value:
            raise DatabaseError("the database has no cursor secret (meta cursor_secret)")
        return bytes.fromhex(str(value))

    async def feed_mark(self, seq: int) -> str | None:
        """The mark a feed cursor at ``seq`` is signed with (SQLite's :func:`feed.feed_mark`)."""
        async with self._connection() as conn:
            value = await conn.fetchval(sql.numbered(feed.FEED_MARK), feed.feed_mark_key(seq))
        return None if value is None else str(value)

    async def webhooks_version(self) -> str:
        """The version of what the webhook listings show (SQLite's :func:`webhooks.version`)."""
        async with self._connection() as conn:
            value = await conn.fetchval(webhooks.VERSION)
        return "0" if value is None else str(value)

    async def one(self, listing: Listing) -> Records:
        token, _, texts = await self._short(listing, False, "LIMIT ?", 2)
        if len(texts) != 1:
            raise RecordNotFound
        return Records(token, texts)

    @asynccontextmanager
    async def whole(
        self,
        listing: Listing,
        encode: ChunkEncoder,
        stream_slot: AbstractAsyncContextManager[object] | None = None,
    ) -> AsyncIterator[Records | PgStream]:
        """Records when short, else a stream from a cursor; one snapshot either way."""
        token, _, texts = await self._short(listing, False, "LIMIT ?", INLINE_ROWS)
        if len(texts) < INLINE_ROWS:
            yield Records(token, texts)
            return
        async with (
            stream_slot or contextlib.nullcontext(),
            self._stream_slots,
            self._snapshot(listing.guard) as (conn, token),
        ):
            cursor = await conn.cursor(sql.select(listing), *listing.select_params)
            texts = [row[0] for row in await cursor.fetch(CHUNK_ROWS)]
            if len(texts) < INLINE_ROWS:  # the data shrank since the first look
                yield Records(token, texts)
                return
            yield PgStream(token, encode(texts, True), cursor, encode)

    async def close(self) -> None:
        if self._relisten_task is not None:
            self._relisten_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._relisten_task
        with contextlib.suppress(Exception):
            if not self._listener.is_closed():
                await self._listener.close()
        await self._pool.close()


async def keep_session(conn: asyncpg.Connection) -> None:
    """What a pooled connection needs before its next read: nothing.

    The pool's reads change no session state (no SET, LISTEN or advisory lock; cursors
    close with their transaction, which asyncpg ends itself), so asyncpg's default reset
    statement would only add a round trip to every request.
    """


async def _check_guard(conn: asyncpg.Connection, guard: Guard | None) -> None:
    if guard is not None and await conn.fetchval(sql.guard(guard), *guard.params) is None:
        raise RecordNotFound


async def check_schema(conn: asyncpg.Connection) -> str:
    """The data token of a database with our schema; DatabaseError otherwise."""
    if await conn.fetchval("SELECT to_regclass('meta')") is None:
        raise DatabaseError("the PostgreSQL database has no schema (load fixtures first)")
    version = await conn.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
    if version != str(SCHEMA_VERSION):
        raise DatabaseError(
            f"the PostgreSQL database has schema version {version}, not {SCHEMA_VERSION}"
            " (a load or the key tool, run as the tables' owner, upgrades an older one)"
        )
    return str(await conn.fetchval(TOKEN))
