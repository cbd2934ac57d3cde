"""HTTP hygiene: request ids, standard headers and CORS.

contract.md section 7. Headers are added in ``on_response_prepare`` so that every
response gets them: successes, errors and streamed bodies alike. ETags and 304 are the
responder's (:mod:`app.web.responder`), gzip the bodies' (:mod:`app.web.bodies`).
"""

from __future__ import annotations

import re
import secrets

from aiohttp import web
from aiohttp.typedefs import Handler

from ..keys import CONFIG, REQUEST_ID

SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
SERVER_NAME = "reporting-api"
EXPOSED_HEADERS = (
    "X-Request-ID, X-Total-Count, X-Page, X-Per-Page, X-Total-Pages, Link, ETag, "
    "X-Next-Cursor, Content-Disposition, "
    "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, RateLimit, "
    "Retry-After, WWW-Authenticate"
)

PREFLIGHT_HEADERS = "X-API-KEY, X-Company-ID, Content-Type, If-None-Match, X-Request-ID"


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
