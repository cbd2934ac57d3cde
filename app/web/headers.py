"""HTTP hygiene: request ids, ETags, standard headers, content negotiation and CORS.

contract.md section 7. Headers are added in ``on_response_prepare`` so that every
response gets them: successes, errors and streamed bodies alike.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from ..keys import CONFIG, REQUEST_ID

SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
SERVER_NAME = "reporting-api"
EXPOSED_HEADERS = (
    "X-Request-ID, X-Total-Count, X-Page, X-Per-Page, X-Total-Pages, Link, ETag, "
    "X-Next-Cursor, Content-Disposition, "
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


def make_etag(token: str, company_id: int, request: web.Request, variant: str = "") -> str:
    """A weak validator for this company's view of this URL at this data version.

    ``variant`` is whatever else the answer depends on: the format an Accept header
    chose, today's date for a report that counts overdue inscriptions.
    """
    digest = hashlib.blake2b(
        f"{token}|{company_id}|{request.rel_url.raw_path_qs}|{variant}".encode(), digest_size=12
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


_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")  # RFC 9110 12.4.2


def coding_weights(accept_encoding: str) -> dict[str, float]:
    """Each content coding of an Accept-Encoding value and its weight, lower-cased.

    A malformed weight counts as 0 (not acceptable): answering without a coding is
    always safe, guessing one the client refused is not.
    """
    weights: dict[str, float] = {}
    for element in accept_encoding.split(","):
        coding, *params = (part.strip() for part in element.split(";"))
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if _QVALUE.fullmatch(value) else 0.0
        weights[coding.lower()] = weight
    return weights


def accepts_gzip(request: web.BaseRequest) -> bool:
    """Whether gzip is acceptable: named (or x-gzip, or covered by ``*``) with q > 0.

    Every Accept-Encoding line counts, as if joined by commas (RFC 9110 5.3).
    """
    return _gzip_acceptable(",".join(request.headers.getall(hdrs.ACCEPT_ENCODING, ())))


@functools.lru_cache(maxsize=256)  # clients send a handful of distinct values
def _gzip_acceptable(header: str) -> bool:
    if not header:
        return False
    weights = coding_weights(header)
    for name in ("gzip", "x-gzip"):
        if name in weights:
            return weights[name] > 0
    return weights.get("*", 0.0) > 0


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
