"""The one listing responder: freshness, ETag/304, count cache, read, headers, body.

Every listing endpoint answers through :func:`respond_listing`, top to bottom, once
each: is the data token fresh; does the client already hold this answer (304, no
query); what total is already known; read (a page, a short array, or a stream from
one snapshot); headers from the snapshot the records came from; the body.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import hdrs, web

from ..data.listings import Listing, Page, Paging, Records, check_guard
from ..data.pool import Stream
from ..keys import CALLER, CONFIG, COUNTS, DATA_VERSION, POOL, STREAMS
from .errors import TooManyRequests
from .headers import accepts_gzip, etag_matches, make_etag
from .pagination import PAGING_NAMES, page_headers

JSON_TYPE = "application/json"
GZIP_MIN_BYTES = 1024

CountKey = tuple[int, bytes]


class CountCache:
    """Totals of filtered listings, per data token: data only changes with a load."""

    def __init__(self, max_entries: int = 2048) -> None:
        self._totals: OrderedDict[CountKey, tuple[str, int]] = OrderedDict()
        self._max_entries = max_entries

    def get(self, key: CountKey, token: str) -> tuple[str, int] | None:
        """The total counted for ``key`` at data token ``token``, if there is one."""
        found = self._totals.get(key)
        return found if found is not None and found[0] == token else None

    def put(self, key: CountKey, token: str, total: int) -> None:
        self._totals[key] = (token, total)
        self._totals.move_to_end(key)
        if len(self._totals) > self._max_entries:
            self._totals.popitem(last=False)


class StreamSlots:
    """Long answers each company is being sent at once, bounded.

    A client that never reads holds a pooled connection and its snapshot until the
    write timeout cuts it off; bounding them per company keeps one tenant from taking
    every connection from the others.
    """

    def __init__(self, per_company: int) -> None:
        self._per_company = per_company
        self._active: dict[int, int] = {}

    @asynccontextmanager
    async def hold(self, company_id: int) -> AsyncIterator[None]:
        """Take one of the company's slots for the block, or refuse with 429."""
        active = self._active.get(company_id, 0)
        if active >= self._per_company:
            raise TooManyRequests(
                "Too many long answers are being sent to this company at once; "
                "retry when one has finished.",
                headers={hdrs.RETRY_AFTER: "1"},
            )
        self._active[company_id] = active + 1
        try:
            yield
        finally:
            left = self._active[company_id] - 1
            if left:
                self._active[company_id] = left
            else:
                del self._active[company_id]


def encode_json_chunk(texts: list[bytes], first: bool) -> bytes:
    """Records joined as part of a JSON array (the opening bracket comes separately)."""
    if not texts:
        return b""
    joined = b",".join(texts)
    return joined if first else b"," + joined


async def respond_listing(
    request: web.Request, listing: Listing, paging: Paging | None, variant: str = ""
) -> web.StreamResponse:
    """Answer a listing: a page with its headers, or the whole array (streamed when long).

    ``variant`` goes into the ETag: what the answer depends on besides the data and
    the URL (today's date, for the reports that count overdue inscriptions).
    """
    not_modified = await revalidate(request, listing, variant)
    if not_modified is not None:
        return not_modified
    app = request.app
    pool = app[POOL]
    if paging is not None:
        key = count_key(request, request[CALLER].company_id)
        page = await pool.page(listing, paging, app[COUNTS].get(key, app[DATA_VERSION].token))
        app[COUNTS].put(key, page.token, page.total)
        headers = snapshot_headers(request, page.token, variant)
        path, query = request.rel_url.raw_path, request.rel_url.raw_query_string
        headers.update(page_headers(path, query, paging, page.total))
        return json_array(request, page, headers)

    slot = app[STREAMS].hold(request[CALLER].company_id)
    async with pool.whole(listing, encode_json_chunk, slot) as result:
        headers = snapshot_headers(request, result.token, variant)
        if isinstance(result, Records):
            return json_array(request, result, headers)
        return await json_stream(request, result, headers)


async def respond_record(
    request: web.Request, listing: Listing, variant: str = ""
) -> web.StreamResponse:
    """Answer one JSON object: the listing's single record (404 when its guard fails).

    ``variant`` as for :func:`respond_listing`.
    """
    not_modified = await revalidate(request, listing, variant)
    if not_modified is not None:
        return not_modified
    records = await request.app[POOL].one(listing)
    headers = snapshot_headers(request, records.token, variant)
    response = web.Response(body=records.texts[0], headers=headers)
    response.content_type = JSON_TYPE
    response.charset = "utf-8"
    if len(records.texts[0]) > GZIP_MIN_BYTES and accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
    return response


async def revalidate(
    request: web.Request, listing: Listing, variant: str = ""
) -> web.Response | None:
    """A 304 when the client's If-None-Match holds the current ETag (no listing query runs).

    The data token is refreshed first (and the pool reopened if the file was replaced).
    A record that does not exist for this company is 404 before any 304, even for
    ``If-None-Match: *``.
    """
    pool = request.app[POOL]
    await refresh_version(request.app)
    company_id = request[CALLER].company_id
    etag = make_etag(request.app[DATA_VERSION].token, company_id, request, variant)
    if not etag_matches(request, etag):
        return None
    if listing.guard is not None:
        pool.run_inline(lambda conn: check_guard(conn, listing.guard))
    return web.Response(status=304, headers={hdrs.ETAG: etag, hdrs.VARY: "Accept-Encoding"})


async def refresh_version(app: web.Application) -> None:
    """Read the data token again when the files moved (at most every 0.1 s)."""
    pool, version = app[POOL], app[DATA_VERSION]
    if version.is_stale():
        if pool.replaced():
            await pool.reopen()
        version.update(pool.token_now())


def snapshot_headers(request: web.Request, token: str, variant: str = "") -> dict[str, str]:
    """The ETag of the snapshot the records came from (and remember a newer token)."""
    version = request.app[DATA_VERSION]
    if token != version.token:
        version.update(token)
    etag = make_etag(token, request[CALLER].company_id, request, variant)
    return {hdrs.ETAG: etag, hdrs.VARY: "Accept-Encoding"}


def count_key(request: web.Request, company_id: int) -> CountKey:
    """The company and a digest of the path and every parameter but the paging ones.

    A digest keeps each cache entry small whatever the length of the query string.
    """
    items = sorted((k, v) for k, v in request.query.items() if k not in PAGING_NAMES)
    digest = hashlib.blake2b(repr((request.path, items)).encode(), digest_size=16).digest()
    return company_id, digest


def json_array(
    request: web.Request, records: Records | Page, headers: dict[str, str]
) -> web.Response:
    """A JSON array read whole, gzipped when accepted and worth it."""
    body = b"[" + b",".join(records.texts) + b"]"
    response = web.Response(body=body, headers=headers)
    response.content_type = JSON_TYPE
    response.charset = "utf-8"
    if len(body) > GZIP_MIN_BYTES and accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
    return response


async def json_stream(
    request: web.Request, stream: Stream, headers: dict[str, str]
) -> web.StreamResponse:
    """A long JSON array sent chunk by chunk while the next one is read."""
    response = web.StreamResponse(headers=headers)
    response.content_type = JSON_TYPE
    response.charset = "utf-8"
    if request.method == hdrs.METH_HEAD:  # the headers only, never a body
        await response.prepare(request)
        await response.write_eof()
        return response
    if accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
    await response.prepare(request)
    timeout = request.app[CONFIG].write_timeout
    await send(request, response, b"[" + stream.first, timeout)
    async for chunk in stream.rest():
        await send(request, response, chunk, timeout)
    await send(request, response, b"]", timeout)
    await response.write_eof()
    return response


async def send(
    request: web.Request, response: web.StreamResponse, chunk: bytes, timeout: float
) -> None:
    """Write a chunk; a client that has not taken it after ``timeout`` seconds is cut off.

    Without this, a client that stops reading would hold its snapshot (pinning the
    WAL) and a pooled connection for as long as it keeps the socket open.
    """
    try:
        await asyncio.wait_for(response.write(chunk), timeout)
    except TimeoutError:
        if request.transport is not None:
            request.transport.abort()
        raise ConnectionResetError("the client stopped reading") from None
