"""HTTP hygiene: request ids, ETags and the data version, standard headers, access log.

contract.md section 7. Headers are added in ``on_response_prepare`` so that every
response gets them: successes, errors and streamed bodies alike.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.typedefs import Handler

from .keys import CALLER, CONFIG, REQUEST_ID

SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
SERVER_NAME = "reporting-api"
EXPOSED_HEADERS = (
    "X-Request-ID, X-Total-Count, X-Page, X-Per-Page, X-Total-Pages, Link, ETag, "
    "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, RateLimit, "
    "Retry-After"
)

PREFLIGHT_HEADERS = "X-API-KEY, Content-Type, If-None-Match, X-Request-ID"


def assign_request_id(request: web.Request) -> str:
    """Echo the client's X-Request-ID when it is sane, otherwise make one."""
    given = request.headers.get("X-Request-ID", "")
    request_id = given if SANE_REQUEST_ID.fullmatch(given) else secrets.token_hex(16)
    request[REQUEST_ID] = request_id
    return request_id


def set_standard_headers(response: web.StreamResponse, request_id: str | None) -> None:
    """Server without a version, nosniff, no shared caching, and the request id."""
    headers = response.headers
    headers["Server"] = SERVER_NAME
    headers["X-Content-Type-Options"] = "nosniff"
    headers.setdefault("Cache-Control", "private, no-cache")
    if request_id:
        headers["X-Request-ID"] = request_id


async def add_standard_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Headers every response carries (the on_response_prepare signal)."""
    set_standard_headers(response, request.get(REQUEST_ID))
    headers = response.headers
    origin = request.headers.get("Origin")
    if origin and origin in request.app[CONFIG].origins():
        headers["Access-Control-Allow-Origin"] = origin
        headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        headers.add("Vary", "Origin")


class DataVersion:
    """The data token the loader bumps, cached without a query per request.

    The files are looked at no more than every ``STAT_SECONDS``; when the database or
    its WAL file changed on disk, or a second passed, the token is read again. Every
    query also returns the token of its own snapshot.
    """

    STAT_SECONDS = 0.1

    def __init__(
        self, db_path: str | Path, token: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._files = (Path(db_path), Path(f"{db_path}-wal"))
        self._clock = clock
        self.token = token
        self._signature = self._stat()
        self._checked = self._statted = clock()

    def _stat(self) -> tuple[int, ...]:
        signature: list[int] = []
        for file in self._files:
            try:
                st = os.stat(file)
                signature += [st.st_mtime_ns, st.st_size, st.st_ino]
            except OSError:
                signature += [0, 0, 0]
        return tuple(signature)

    def is_stale(self) -> bool:
        """Whether the cached token may be out of date (the files or the clock moved)."""
        now = self._clock()
        if now - self._statted < self.STAT_SECONDS:
            return False
        self._statted = now
        return self._signature != self._stat() or now - self._checked > 1.0

    def update(self, token: str) -> None:
        """Record a token just read from the database."""
        self.token = token
        self._signature = self._stat()
        self._checked = self._statted = self._clock()


def make_etag(token: str, company_id: int, request: web.Request) -> str:
    """A weak validator for this company's view of this URL at this data version."""
    digest = hashlib.blake2b(
        f"{token}|{company_id}|{request.rel_url.raw_path_qs}".encode(), digest_size=12
    ).hexdigest()
    return f'W/"{digest}"'


def etag_matches(request: web.Request, etag: str) -> bool:
    """Weak comparison against If-None-Match (RFC 9110 13.1.2)."""
    header = request.headers.get("If-None-Match")
    if not header:
        return False
    if header.strip() == "*":
        return True
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return etag.removeprefix("W/") in tags


class AccessLogger(AbstractAccessLogger):
    """One line per request: method, path, status, duration, company, request id."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        caller = request.get(CALLER)
        fields = {
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "duration_ms": round(time * 1000, 2),
            "company": caller.company_id if caller else None,
            "request_id": request.get(REQUEST_ID, ""),
            "remote": request.remote,
        }
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        self.logger.info(text, extra={"access": fields})

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


@web.middleware
async def cors_preflight_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer CORS preflights from configured origins (CORS is off when none are set)."""
    origin = request.headers.get("Origin")
    if (
        request.method == "OPTIONS"
        and origin
        and "Access-Control-Request-Method" in request.headers
        and origin in request.app[CONFIG].origins()
        and request.path.startswith("/api/")
    ):
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": "GET, HEAD",
                "Access-Control-Allow-Headers": PREFLIGHT_HEADERS,
                "Access-Control-Max-Age": "600",
            },
        )
    return await handler(request)
