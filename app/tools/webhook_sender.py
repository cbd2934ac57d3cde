"""The webhook sender (``reporting-webhooks run``): each subscription is a reader of the
event feed that POSTs, Standard Webhooks 1.0.

Per subscription, in feed order: one message per event of its types, signed with its
secret (and the old one during a rotation); its position moves only after a 2xx, in
the transaction that logs the delivery. Each subscription is followed on its own (one
that keeps failing never holds up the others), and its row is read again before every
attempt and during the waits between them: a subscription disabled, deleted or given a
new secret meanwhile is sent nothing more, or signed with the secret it has now; one
enabled again goes on at once. ``webhook-id`` is the event's place in the
feed and the feed mark of that change (``msg_<seq>_<id>_<mark>``): the same for every
retry and after a restart, new when the event changes (a changed event takes a new
place, and one written again at an old place after a restore has a new mark). A lock
per store (a file lock beside the SQLite file; an advisory lock on PostgreSQL) keeps a
second sender out; a SQLite file swapped in while it runs is opened in place of the old
one, and each subscription goes on from its position there. SIGTERM lets the message
in flight finish, then the sender exits 0.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import fcntl
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import re
import signal
import socket
import sqlite3
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import aiohttp
import asyncpg
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from ..data.feed import FEED_MARK, FeedFilters, feed_listing, feed_mark, feed_mark_key
from ..data.pg import sql as pg_sql
from ..data.pg.schema import upgrade_if_older
from ..data.pg.session import connect
from ..data.pg.store import check_schema
from ..data.pool import opened_companions, remove_companions
from ..data.schema import changed_rows, connect_writer, file_identity, write_transaction
from ..data.webhooks import CHANGED, utc_text
from .cli import ToolError
from .keytool import existing

LOG = logging.getLogger("reporting.webhooks")
HUP_IGNORED = "SIGHUP ignored: the sender reloads nothing (restart it to change settings)"
# The Standard Webhooks schedule: the delays before attempts 1 to 10 (seconds).
SCHEDULE = (0.0, 5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0)
TIMEOUT = 15.0
SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")  # a delay as the docs write one
BATCH = 100  # events read at a time per subscription
# The delivery attempts kept per subscription, the newest: the log is for looking into
# recent failures (a message that spends the whole schedule is 10 attempts), not an archive.
KEPT = 1000

_COLUMNS = (
    "SELECT id, company_id, url, event_types, secret, old_secret, old_secret_until,"
    " position_seq, position_id, created_at, consecutive_failures FROM webhooks"
)
SUBSCRIPTIONS = f"{_COLUMNS} WHERE status = 'enabled' ORDER BY id"
# The subscription a run follows, as it is now: the same one (an id a deleted one freed
# may be given to another, of another company), still enabled. Every write checks it too.
_SAME = "id = ? AND company_id = ? AND created_at = ?"
CURRENT = f"{_COLUMNS} WHERE {_SAME} AND status = 'enabled'"
LOGGED = (
    "INSERT INTO webhook_deliveries (webhook_id, message_id, event_id, attempt,"
    " attempted_at, status, response_status, error) SELECT ?, ?, ?, ?, ?, ?, ?, ?"
    f" WHERE EXISTS (SELECT 1 FROM webhooks WHERE {_SAME})"
)
# After each logged attempt, the subscription's attempts older than its newest ``?`` go
# (one row, once the log is full: a walk of the (webhook_id, id) index).
PRUNED = (
    "DELETE FROM webhook_deliveries WHERE webhook_id = ? AND id <= (SELECT id FROM"
    " webhook_deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)"
)
MOVED = (
    "UPDATE webhooks SET position_seq = ?, position_id = ?, last_success_at = ?,"
    f" consecutive_failures = 0 WHERE {_SAME}"
)
FAILED = (
    "UPDATE webhooks SET last_failure_at = ?, consecutive_failures = consecutive_failures + 1"
    f" WHERE {_SAME}"
)
# Never over the operator's own change (a subscription disabled while its message failed).
STATUS = f"UPDATE webhooks SET status = ? WHERE {_SAME} AND status = 'enabled'"
# (each write also runs CHANGED)


@dataclass(frozen=True, slots=True)
class Hook:
    id: int
    company_id: int
    url: str
    types: tuple[str, ...]
    secrets: tuple[str, ...]  # the current one first, then the old one while it still signs
    position: tuple[int, int]
    created_at: str
    failures: int  # consecutive; `enable` sets it back to 0
    opened: int = 0  # which file it was read from (SqliteStore: a file swapped in is another)

    @property
    def same(self) -> tuple[int, int, str]:
        """The parameters of _SAME."""
        return self.id, self.company_id, self.created_at


@dataclass(frozen=True, slots=True)
class Attempt:
    message_id: str
    event_id: int
    attempt: int
    ok: bool
    status: int | None
    error: str | None


def hook_of(row: Sequence[Any], now: str, opened: int = 0) -> Hook:
    old = (row[5],) if row[5] and row[6] and row[6] > now else ()
    return Hook(row[0], row[1], row[2], tuple(row[3].split(",")), (row[4], *old),
                (row[7], row[8]), row[9], row[10], opened)  # fmt: skip


def sign(secrets: Sequence[str], message_id: str, timestamp: int, body: bytes) -> str:
    """``webhook-signature``: ``v1,<base64 HMAC-SHA256 of id.timestamp.body>`` per secret."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(
            hmac.digest(base64.b64decode(s.removeprefix("whsec_")), signed, hashlib.sha256)
        ).decode("ascii")
        for s in secrets
    )  # fmt: skip


def message(record: bytes) -> bytes:
    """The body: the event's type and timestamp, and the /events record as ``data``."""
    event = json.loads(record)
    head = {"type": f"campaign_event.{event['type']}", "timestamp": event["timestamp"]}
    return json.dumps(head, separators=(",", ":"))[:-1].encode() + b',"data":' + record + b"}"


# An event to send: its /events record, seq, id, and the feed mark of its seq.
Event = tuple[bytes, int, int, str]


def message_id_of(seq: int, event_id: int, mark: str) -> str:
    """``webhook-id``: the change's place in the feed and its feed mark. A restore rewinds
    the sequence, so a later load may write another change at the same place: its new
    mark gives it a new id. The empty mark (written before marks began) adds nothing, so
    the messages of an upgraded database keep their ids."""
    return f"msg_{seq}_{event_id}_{mark}" if mark else f"msg_{seq}_{event_id}"


class Store(Protocol):
    async def hooks(self) -> list[Hook]: ...
    async def current(self, hook: Hook) -> Hook | None: ...
    async def events(self, hook: Hook) -> list[Event]: ...
    async def log(
        self, hook: Hook, attempt: Attempt, moved: tuple[int, int] | None, kept: int
    ) -> None: ...
    async def set_status(self, hook: Hook, status: str) -> bool: ...
    async def close(self) -> None: ...


def _listing(hook: Hook) -> Any:
    return feed_listing(hook.company_id, FeedFilters.of(hook.types), hook.position)


def _log_params(hook: Hook, attempt: Attempt, now: str) -> tuple[Any, ...]:
    status = "succeeded" if attempt.ok else "failed"
    return (hook.id, attempt.message_id, attempt.event_id, attempt.attempt, now, status,
            attempt.status, attempt.error, *hook.same)  # fmt: skip


class SqliteStore:
    """The sender's reads and writes on a SQLite file, under a file lock beside it (by
    path: it stays when another file is swapped in).

    A file swapped in while it runs (reporting-swap, a restore) is noticed before every
    read and write, and opened in place of the old one. A subscription read from the old
    file is then gone (its follower ends; the next poll follows it on the new file, from
    its row and position there), and the attempt of a message read from the old file is
    not logged into the new one.
    """

    def __init__(self, path: str) -> None:
        self.path = existing(path)
        # Beside the file a symbolic link names: one lock whichever path a sender is given.
        lock = f"{os.path.realpath(path)}.webhooks.lock"
        self._lock = open(lock, "w")  # noqa: SIM115 (held while running)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise ToolError("another webhook sender is running on this database") from None
        self.opened = 0
        self._connect()

    def _connect(self) -> None:
        identity = file_identity(self.path)
        self.conn = connect_writer(self.path, follows_swaps=True)  # makes the -wal and -shm
        self._identity = identity
        self._companions = opened_companions(self.path)
        self.opened += 1

    def _file(self) -> sqlite3.Connection:
        """The connection to the file now at the path. The old file's -wal and -shm, if
        still there, are removed before the new file is opened (ReadPool.reopen says why)."""
        try:
            replaced = file_identity(self.path) != self._identity
        except OSError:  # a missing file is not a new one
            replaced = False
        if replaced:
            self.conn.close()
            remove_companions(self._companions)
            self._connect()
        return self.conn

    def _file_of(self, hook: Hook) -> sqlite3.Connection | None:
        """The connection to the file the subscription was read from; None once another
        file was swapped in (its follower then ends, and one starts on the new file)."""
        conn = self._file()
        return conn if hook.opened == self.opened else None

    async def hooks(self) -> list[Hook]:
        now, conn = utc_text(dt.datetime.now(dt.UTC)), self._file()
        return [hook_of(row, now, self.opened) for row in conn.execute(SUBSCRIPTIONS)]

    async def current(self, hook: Hook) -> Hook | None:
        conn = self._file_of(hook)
        row = None if conn is None else conn.execute(CURRENT, hook.same).fetchone()
        return None if row is None else hook_of(row, utc_text(dt.datetime.now(dt.UTC)), self.opened)

    async def events(self, hook: Hook) -> list[Event]:
        if (conn := self._file_of(hook)) is None:
            return []
        listing = _listing(hook)
        rows = conn.execute(listing.select_keyed(), (*listing.select_params, BATCH)).fetchall()
        return [(bytes(r[0]), r[1], r[2], feed_mark(conn, r[1]) or "") for r in rows]

    async def log(
        self, hook: Hook, attempt: Attempt, moved: tuple[int, int] | None, kept: int
    ) -> None:
        """The attempt, in the transaction that moves the position (or counts the failure)
        and drops what it pushed out of the subscription's newest ``kept``."""
        if (conn := self._file_of(hook)) is None:
            return
        now = utc_text(dt.datetime.now(dt.UTC))
        with write_transaction(conn):
            conn.execute(LOGGED, _log_params(hook, attempt, now))
            conn.execute(PRUNED, (hook.id, hook.id, kept))
            if moved:
                conn.execute(MOVED, (*moved, now, *hook.same))
            else:
                conn.execute(FAILED, (now, *hook.same))
            conn.execute(CHANGED)

    async def set_status(self, hook: Hook, status: str) -> bool:
        """Whether it was set (not over the operator's own change)."""
        if (conn := self._file_of(hook)) is None:
            return False
        with write_transaction(conn):
            conn.execute(STATUS, (status, *hook.same))
            changed = changed_rows(conn)
            conn.execute(CHANGED)
        return changed > 0

    async def close(self) -> None:
        self.conn.close()
        self._lock.close()


class PgStore:
    """The same on PostgreSQL, under a session advisory lock. Every subscription's
    follower shares the one connection, which runs one statement at a time: each call
    takes it in turn (SQLite's calls never yield, so they need no turn)."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.turn = asyncio.Lock()

    @classmethod
    async def open(cls, url: str) -> PgStore:
        conn = await connect(url)
        try:
            await upgrade_if_older(conn)  # as the SQLite store's writer does
            await check_schema(conn)
            if not await conn.fetchval(
                "SELECT pg_try_advisory_lock(hashtext('reporting webhooks'))"
            ):
                raise ToolError("another webhook sender is running on this database")
        except BaseException:
            await conn.close()
            raise
        return cls(conn)

    async def hooks(self) -> list[Hook]:
        now = utc_text(dt.datetime.now(dt.UTC))
        async with self.turn:
            rows = await self.conn.fetch(SUBSCRIPTIONS)
        return [hook_of(tuple(row), now) for row in rows]

    async def current(self, hook: Hook) -> Hook | None:
        async with self.turn:
            row = await self.conn.fetchrow(pg_sql.numbered(CURRENT), *hook.same)
        return None if row is None else hook_of(tuple(row), utc_text(dt.datetime.now(dt.UTC)))

    async def events(self, hook: Hook) -> list[Event]:
        listing = _listing(hook)
        async with self.turn:
            query = pg_sql.select_keyed(listing)
            rows = await self.conn.fetch(query, *listing.select_params, BATCH)
            marks = [
                await self.conn.fetchval(pg_sql.numbered(FEED_MARK), feed_mark_key(r[1]))
                for r in rows
            ]
        return [(bytes(r[0]), r[1], r[2], mark or "") for r, mark in zip(rows, marks, strict=True)]

    async def log(
        self, hook: Hook, attempt: Attempt, moved: tuple[int, int] | None, kept: int
    ) -> None:
        now = utc_text(dt.datetime.now(dt.UTC))
        async with self.turn, self.conn.transaction():
            await self.conn.execute(pg_sql.numbered(LOGGED), *_log_params(hook, attempt, now))
            await self.conn.execute(pg_sql.numbered(PRUNED), hook.id, hook.id, kept)
            if moved:
                await self.conn.execute(pg_sql.numbered(MOVED), *moved, now, *hook.same)
            else:
                await self.conn.execute(pg_sql.numbered(FAILED), now, *hook.same)
            await self.conn.execute(CHANGED)

    async def set_status(self, hook: Hook, status: str) -> bool:
        async with self.turn, self.conn.transaction():
            done: str = await self.conn.execute(pg_sql.numbered(STATUS), status, *hook.same)
            await self.conn.execute(CHANGED)
        return done != "UPDATE 0"

    async def close(self) -> None:
        await self.conn.close()


class GuardedResolver(AbstractResolver):
    """Resolves as usual, then drops loopback, private, link-local and other non-public
    addresses unless the operator allowed them: the connection only uses what is left,
    so a name cannot be re-resolved to an inner address between check and connect."""

    def __init__(self, allowed: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> None:
        self._inner = DefaultResolver()
        self._allowed = allowed

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._inner.resolve(host, port, family)
        kept = [r for r in found if self.permitted(ipaddress.ip_address(r["host"]))]
        if not kept:  # (None, why): aiohttp's error shows the strerror, not the message
            raise OSError(None, f"{host} resolves only to addresses webhooks may not reach")
        return kept

    def refuses(self, url: str) -> bool:
        """Whether a URL names an address it may not reach (aiohttp connects to an
        address given in the URL without resolving it). Digits and dots that are no
        address (``2130706433``, ``127.1``) are refused: older aiohttp releases connect to
        them unresolved, and the socket reads them as 127.0.0.1."""
        host = yarl.URL(url).host or ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host.replace(".", "").isdigit()  # else a name: resolve() decides
        return not self.permitted(address)

    def permitted(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        if any(address in network for network in self._allowed):
            return True
        inner = carried_ipv4(address)  # allowing 127.0.0.1 allows no IPv6 way to it
        return public(address) and (inner is None or public(inner))

    async def close(self) -> None:
        await self._inner.close()


def public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A global unicast address (not loopback, private, link-local, site-local, ...)."""
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    return address.is_global and not address.is_multicast and not site_local


# IPv6 prefixes whose last 32 bits are an IPv4 address the packets go to: NAT64's
# well-known prefix (a NAT64 gateway reaches the internal network too) and the
# deprecated IPv4-compatible addresses. 6to4 and IPv4-mapped have ipaddress properties.
CARRIERS = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("::/96"))


def carried_ipv4(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to, if any: it must be public too
    (``64:ff9b::a9fe:a9fe`` is the metadata service through a NAT64 gateway)."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if any(address in network for network in CARRIERS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.ipv4_mapped or address.sixtofour


@dataclass(frozen=True)
class Settings:
    schedule: tuple[float, ...] = SCHEDULE
    allowed: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    ca_file: str | None = None
    poll: float = 1.0
    once: bool = False  # stop once every subscription has caught up
    timeout: float = TIMEOUT  # each attempt's
    kept: int = KEPT  # delivery attempts kept per subscription


class Sender:
    """Delivers each enabled subscription's events in order until stopped."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.stopping = asyncio.Event()
        self.resolver = GuardedResolver(settings.allowed)

    async def run(self) -> None:
        try:
            context = ssl.create_default_context(cafile=self.settings.ca_file)
        except OSError as exc:  # ssl.SSLError too: neither names the file
            raise ToolError(f"--ca-file {self.settings.ca_file}: {exc.strerror or exc}") from None
        # No limit on connections (aiohttp's is 100 in all): a hundred receivers that never
        # answer would hold them all, and every other subscription's attempt would wait
        # (its time running) for one. Each subscription has one attempt in flight at most.
        connector = aiohttp.TCPConnector(resolver=self.resolver, ssl=context, limit=0)
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
            if self.settings.once:
                await asyncio.gather(*(self.follow(http, h) for h in await self.store.hooks()))
                return
            # By subscription, not by id: one made under a deleted one's id is followed
            # at once, beside the old follower that ends at its next read.
            following: dict[tuple[int, int, str], asyncio.Task[None]] = {}
            try:
                while not self.stopping.is_set():
                    for hook in await self.store.hooks():
                        if hook.same not in following:
                            following[hook.same] = asyncio.create_task(self.follow(http, hook))
                    for same, task in list(following.items()):
                        if task.done():
                            del following[same]
                            task.result()  # a store that fails stops the sender
                    await self.pause(self.settings.poll)
            finally:
                self.stopping.set()  # the others end with their message in flight
                await asyncio.gather(*following.values(), return_exceptions=True)

    async def pause(self, seconds: float) -> None:
        """Wait, or less when asked to stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    async def follow(self, http: aiohttp.ClientSession, hook: Hook) -> None:
        """Send the subscription's events in order until it is no longer enabled (or its
        message failed every attempt), the sender stops, or, with ``once``, it has
        caught up; between batches it waits for new events. Enabled again while its
        message waited, it sends again from its position at once."""
        while not self.stopping.is_set():
            batch = await self.store.events(hook)
            if not batch and self.settings.once:
                return
            for event in batch:
                if self.stopping.is_set():
                    return
                if not await self.deliver(http, hook, event):
                    break  # read below: gone, or enabled again (then from its position)
                hook = replace(hook, position=(event[1], event[2]))
            if not batch:
                await self.pause(self.settings.poll)
            found = await self.store.current(hook)
            if found is None:
                return
            hook = found

    async def deliver(self, http: aiohttp.ClientSession, hook: Hook, event: Event) -> bool:
        """One message, retried on the schedule; True once a 2xx moved the position."""
        record, seq, event_id, mark = event
        message_id, body = message_id_of(seq, event_id, mark), message(record)
        wait = 0.0  # what a Retry-After asks on top of the schedule
        for number, delay in enumerate(self.settings.schedule, start=1):
            found = await self.waited(hook, wait + delay, retrying=number > 1)
            if found is None or (self.stopping.is_set() and number > 1):
                return False
            hook = found  # its secrets, its status: as they are now
            status, error, wait = await self.post(http, hook, message_id, body)
            ok = status is not None and 200 <= status < 300
            attempt = Attempt(message_id, event_id, number, ok, status, error)
            await self.store.log(hook, attempt, (seq, event_id) if ok else None, self.settings.kept)
            if ok:
                return True
            if status == 410:
                await self.store.set_status(hook, "disabled")
                LOG.warning("webhook %s: the receiver answered 410 Gone; disabled", hook.id)
                return False
        if not await self.store.set_status(hook, "failing"):
            return False  # disabled or deleted meanwhile: it stays as the operator left it
        LOG.error(
            "webhook %s: message %s failed %d times; marked failing (reporting-webhooks"
            " enable %s sends again from it)", hook.id, message_id,
            len(self.settings.schedule), hook.id,
        )  # fmt: skip
        return False

    async def waited(self, hook: Hook, seconds: float, retrying: bool) -> Hook | None:
        """The subscription as it is after ``seconds``; None as soon as it is no longer
        enabled or, while its message is retried, was enabled again (``enable`` sets the
        failures this message counted back to 0): the follower then starts again from
        its position instead of sleeping out the old wait. Read every poll."""
        end = time.monotonic() + seconds
        while True:
            await self.pause(min(self.settings.poll, max(0.0, end - time.monotonic())))
            found = await self.store.current(hook)
            if found is None or (retrying and found.failures == 0):
                return None
            if self.stopping.is_set() or time.monotonic() >= end:
                return found

    async def post(
        self, http: aiohttp.ClientSession, hook: Hook, message_id: str, body: bytes
    ) -> tuple[int | None, str | None, float]:
        """One attempt: the status (None when none came), an error, a Retry-After wait."""
        if self.resolver.refuses(hook.url):
            return None, "the URL's address is one webhooks may not reach", 0.0
        timestamp = int(time.time())
        headers = {
            "content-type": "application/json",
            "webhook-id": message_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(hook.secrets, message_id, timestamp, body),
        }
        try:
            # The status line is the answer: the body is never read (a slow one would
            # time a 2xx out, a huge one fill the memory); leaving it unread closes the
            # connection.
            async with http.post(hook.url, data=body, headers=headers, allow_redirects=False) as r:
                wait = retry_after(r.headers.get("Retry-After")) if r.status in RETRIED else 0.0
                return r.status, None, wait
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return None, failure(exc), 0.0


def failure(exc: BaseException) -> str:
    """Why no answer came, on one line, for the delivery log the API shows. A malformed
    answer's error names the full URL, whose path or query may hold a token: the answers
    show the receiver's host only, so its own description is kept instead."""
    text = exc.message if isinstance(exc, aiohttp.ClientResponseError) else str(exc)
    if isinstance(exc, aiohttp.ServerDisconnectedError):  # its message: the answer cut short
        text = "Server disconnected"
    return " ".join(text.split())[:200] or type(exc).__name__


RETRIED = {429, *range(500, 600)}


# The longest wait a receiver's Retry-After may ask for: the schedule's longest delay
# (a receiver asking for a year would hold its subscription that long).
LONGEST_RETRY_AFTER = max(SCHEDULE)


def retry_after(value: str | None) -> float:
    """Retry-After in seconds (a number of seconds, at most a day; a date, or no number,
    is read as 0: the schedule)."""
    try:
        seconds = float(value) if value else 0.0
    except ValueError:
        return 0.0
    return 0.0 if math.isnan(seconds) else min(max(0.0, seconds), LONGEST_RETRY_AFTER)


async def run_sender(db: str | None, url: str | None, settings: Settings) -> None:
    """Open the store (under its lock) and send until SIGTERM or SIGINT (or caught up).

    SIGHUP (a closed terminal, a reload by a service manager) is logged and sending goes
    on, as the server's one process does: Python's default ended the sender mid-send."""
    store: Store = await PgStore.open(url) if url else SqliteStore(str(db))
    sender = Sender(store, settings)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, sender.stopping.set)
    loop.add_signal_handler(signal.SIGHUP, LOG.info, HUP_IGNORED)
    try:
        await sender.run()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        await store.close()


def schedule_of(text: str) -> tuple[float, ...]:
    """``0,5,300,...``: the delays before each attempt, in seconds, written as plain
    decimals (float() alone also takes ``1_000``, fullwidth digits, ``1e3`` and ``nan``)."""
    parts = [x.strip() for x in text.split(",")]
    delays = tuple(float(x) for x in parts if SECONDS.fullmatch(x))
    if len(delays) != len(parts) or not all(d < math.inf for d in delays):  # 9 * 400 digits
        raise ValueError(f"{text!r} is not a comma list of plain decimal seconds (0,5,0.05)")
    return delays


def networks_of(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Addresses and networks the operator allows ("" allows none); ``a,,b`` is a slip."""
    parts = text.split(",") if text else []
    if any(not x.strip() for x in parts):
        raise ValueError(f"{text!r} has an empty element")
    return tuple(ipaddress.ip_network(x.strip(), strict=False) for x in parts)
