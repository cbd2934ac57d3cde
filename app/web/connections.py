"""Connection admission: bounded connections per client address and in total.

A client that opens connections and never finishes a request (Slowloris) costs a file
descriptor each. Beyond the limits a new connection is answered at once with a 503
problem+json carrying Retry-After and closed, before a byte of it is read, so refusing
costs no more than accepting. What an attack makes recur (refusals, late headers, the
process running out of file descriptors) is logged in one line at most every
``logs.REPORT_SECONDS``, never a traceback per connection.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import resource
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from ..config import Config, Network
from .clients import address_key, is_trusted
from .dashboard import PAGE_HEADERS
from .errors import PROBLEM_TYPE, problem_body
from .headers import SERVER_NAME
from .logs import LogThrottle

log = logging.getLogger("app.connections")

RESERVED_FILES = 64  # file descriptors kept for the database, the listener and logs
ACCEPT_BURST = 256  # sockets asyncio may accept before a refused one is closed (measured)
RETRY_AFTER = 1  # seconds, advertised to a refused connection
HEADERS_TOO_LARGE = "The request headers are too large."
# The dashboard's policy: whichever page a connection was for, it is not known yet.
PAGE_LINES = "".join(f"{name}: {value}\r\n" for name, value in PAGE_HEADERS.items())
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True, slots=True)
class Admission:
    """The guard's decision on one new connection."""

    admitted: bool
    key: str | None = None  # the per-address count it holds; None when exempt or refused
    answer: bytes = b""  # sent before closing a refused connection


class ConnectionGuard:
    """Counts open connections per client address and in total, and refuses beyond.

    An IPv6 client counts per /64; trusted proxies count only towards the total, since
    every client behind them shares their address.
    """

    def __init__(
        self,
        *,
        max_total: int,
        max_per_address: int,
        header_timeout: float,
        exempt: Sequence[Network] = (),
    ) -> None:
        self.max_total = max_total
        self.max_per_address = max_per_address
        self.header_timeout = header_timeout
        self.open = 0
        self._exempt = tuple(exempt)
        self._per_address: dict[str, int] = {}
        self._refusals = {"total": LogThrottle(log), "per address": LogThrottle(log)}
        self._late = LogThrottle(log)
        self._oversized = LogThrottle(log)

    @classmethod
    def from_config(cls, config: Config) -> ConnectionGuard:
        """The guard the settings ask for, within what the open-file limit allows.

        This raises the process's soft open-file limit when the settings need it.
        """
        return cls(
            max_total=fit_open_files(config.max_connections),
            max_per_address=config.max_connections_per_address,
            header_timeout=config.header_timeout,
            exempt=config.networks(),
        )

    def admit(self, peer: str | None) -> Admission:
        """Count a new connection from ``peer``, or refuse it with a 503 to send."""
        key = None if peer is None or is_trusted(peer, self._exempt) else address_key(peer)
        if self.open >= self.max_total:
            return self._refuse("The server has too many open connections.", peer, "total")
        if key is not None and self._per_address.get(key, 0) >= self.max_per_address:
            return self._refuse("Too many open connections from this address.", peer, "per address")
        self.open += 1
        if key is not None:
            self._per_address[key] = self._per_address.get(key, 0) + 1
        return Admission(admitted=True, key=key)

    def release(self, admission: Admission) -> None:
        """Forget an admitted connection that has closed."""
        if not admission.admitted:
            return
        self.open -= 1
        key = admission.key
        if key is not None:
            left = self._per_address.pop(key) - 1
            if left:
                self._per_address[key] = left

    def headers_late(self, peer: str | None) -> None:
        """Report a connection closed because its request headers did not arrive in time."""
        self._late.warning(
            "closed a connection from %s: request headers unfinished after %g s",
            peer,
            self.header_timeout,
        )

    def headers_too_large(self, peer: str | None, limit: int) -> bytes:
        """Report a request refused for its header bytes; the 431 answer to send."""
        self._oversized.warning(
            "refused a request from %s: request line and headers over %d bytes", peer, limit
        )
        return raw_problem(431, "Request Header Fields Too Large", HEADERS_TOO_LARGE)

    def _refuse(self, detail: str, peer: str | None, limit: str) -> Admission:
        limits = {"total": self.max_total, "per address": self.max_per_address}
        self._refusals[limit].warning(
            "refused a connection from %s: limit of %d open connections %s reached",
            peer,
            limits[limit],
            limit,
        )
        return Admission(admitted=False, answer=refusal(detail))


def refusal(detail: str) -> bytes:
    """A complete HTTP/1.1 503 problem+json answer that closes the connection."""
    return raw_problem(503, "Service Unavailable", detail, f"Retry-After: {RETRY_AFTER}\r\n")


def raw_problem(status: int, reason: str, detail: str, extra: str = "") -> bytes:
    """A complete problem+json answer, written before aiohttp has a request to answer.

    ``extra`` is more header lines, each ending in CRLF. The connection is closed after it.
    """
    request_id = secrets.token_hex(16)
    body = json.dumps(problem_body(status, detail, request_id)).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Content-Type: {PROBLEM_TYPE}; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        "Connection: close\r\n"
        f"Server: {SERVER_NAME}\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Cache-Control: private, no-cache\r\n"
        f"{PAGE_LINES}"
        f"X-Request-ID: {request_id}\r\n\r\n"
    )
    return head.encode("ascii") + body


def open_files_plan(connections: int, soft: int, hard: int) -> tuple[int, int]:
    """The total connection limit and the soft open-file limit that can hold it.

    Each connection is a file descriptor, and under a flood asyncio accepts a listen
    backlog (128) of sockets on each turn of the loop, two turns or so before a refused
    one is closed; past the open-file limit accept() itself fails and nobody gets a
    clear answer. So the soft limit is raised (up to the hard limit) to fit, and the
    connection limit lowered when even that is not enough.
    """
    needed = connections + RESERVED_FILES + ACCEPT_BURST
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return connections, soft
    new_soft = needed if hard == resource.RLIM_INFINITY else max(soft, min(hard, needed))
    return max(1, min(connections, new_soft - RESERVED_FILES - ACCEPT_BURST)), new_soft


def fit_open_files(connections: int) -> int:
    """Apply open_files_plan to this process; the connection limit it allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    allowed, new_soft = open_files_plan(connections, soft, hard)
    if new_soft != soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
    if allowed < connections:
        log.warning(
            "max connections lowered from %d to %d: the open-file limit is %d "
            "(raise the hard limit, ulimit -Hn, to allow more)",
            connections,
            allowed,
            new_soft,
        )
    return allowed


def quiet_resource_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Report running out of file descriptors in one line a while, never a traceback storm.

    asyncio reports each failed accept() to the loop's exception handler with a
    traceback, many times a second; other reports keep the handler they had.
    """
    throttle = LogThrottle(log)
    previous = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _OUT_OF_FILES:
            throttle.warning("cannot accept connections: %s; still serving", exc.strerror)
        elif previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
