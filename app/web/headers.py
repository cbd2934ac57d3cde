"""HTTP hygiene: request ids, standard headers and CORS.

contract.md section 7. Headers are added in ``on_response_prepare`` so that every
response gets them: successes, errors and streamed bodies alike. ETags and 304 are the
responder's (:mod:`app.web.responder`), gzip the bodies' (:mod:`app.web.bodies`).
"""

from __future__ import annotations

import random
import re

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler
from multidict import istr

from ..keys import CONFIG, REQUEST_ID

SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
SERVER_NAME = "reporting-api"
EXPOSED_HEADERS = (
    "X-Request-ID, X-Total-Count, X-Page, X-Per-Page, X-Total-Pages, Link, ETag, "
    "X-Next-Cursor, Content-Disposition, "
    "RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy, RateLimit, "
    "Retry-After, WWW-Authenticate"
)

# Every request header the API reads (Content-Type: a client may send it on a GET).
PREFLIGHT_HEADERS = "X-API-KEY, X-Company-ID, Content-Type, If-None-Match, If-Match, X-Request-ID"
# Header names as istr: the case-insensitive headers take them without folding them again.
X_REQUEST_ID = istr("X-Request-ID")
X_CONTENT_TYPE_OPTIONS = istr("X-Content-Type-Options")


def assign_request_id(request: web.BaseRequest) -> str:
    """Echo the client's X-Request-ID when it is sane, otherwise make one.

    Two header lines are not one sane id, even when they agree: HTTP reads them as one
    list, "a, b", which is not sane either (echoing the first would lose a proxy's).
    A made id is 128 random bits: an id only tells log lines apart (it guards nothing),
    so the process's own generator (seeded again in each forked worker) makes it, not
    the system's, whose call cost about 5 µs a request in a busy server.
    """
    values = request.headers.getall(X_REQUEST_ID, [])
    given = values[0] if len(values) == 1 else ""
    request_id = given if SANE_REQUEST_ID.fullmatch(given) else f"{random.getrandbits(128):032x}"
    request[REQUEST_ID] = request_id
    return request_id


def set_standard_headers(response: web.StreamResponse, request_id: str | None) -> None:
    """Server without a version, nosniff, no shared caching, and the request id."""
    headers = response.headers
    headers[hdrs.SERVER] = SERVER_NAME
    headers[X_CONTENT_TYPE_OPTIONS] = "nosniff"
    headers.setdefault(hdrs.CACHE_CONTROL, "private, no-cache")
    if request_id:
        headers[X_REQUEST_ID] = request_id


def add_standard_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Headers every response carries (from the on_response_prepare signal)."""
    set_standard_headers(response, request.get(REQUEST_ID))
    origins = request.app[CONFIG].origins()
    if not origins:
        return
    # With CORS on, every answer depends on Origin, one refused included: a cache must not
    # give an allowed origin the answer a stranger got (without Access-Control-*).
    headers = response.headers
    headers.add(hdrs.VARY, "Origin")
    origin = request.headers.get(hdrs.ORIGIN)
    if origin and origin in origins:
        headers["Access-Control-Allow-Origin"] = origin
        headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS


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
