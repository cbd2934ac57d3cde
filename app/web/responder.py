"""The one listing responder: format, freshness, ETag/304, count cache, read, headers, body.

Every listing endpoint answers through :func:`respond_listing`, top to bottom, once
each: which format the client asked for (406 when none fits); is the data token fresh;
does the client already hold this answer (304, no query); what total is already known;
read (a page, a window after a feed cursor, a short array, or a stream from one
snapshot); headers from the snapshot the records came from; the body in its format
(:mod:`app.web.bodies`).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import hdrs, web

from ..data.listings import Listing, Paging, Records
from ..keys import CALLER, COUNTS, DATA_VERSION, POOL, RECORD_SCHEMAS, STREAMS
from .bodies import finish, stream_response, whole_response
from .cursor import CursorPage
from .errors import TooManyRequests
from .formats import CSV, RECORD_FORMATS, Format, body_of, negotiate
from .headers import etag_matches, make_etag
from .pagination import PAGING_NAMES, cursor_headers, page_headers

VARY = "Accept, Accept-Encoding"
# Parameters that never change a listing's total.
NOT_COUNTED = (*PAGING_NAMES, "format")

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


async def respond_listing(
    request: web.Request,
    listing: Listing,
    paging: Paging | CursorPage | None,
    variant: str = "",
) -> web.StreamResponse:
    """Answer a listing in the format asked for: a page, a feed window or the whole array.

    ``variant`` goes into the ETag: what the answer depends on besides the data, the URL
    and the format (today's date, for the reports that count overdue inscriptions).
    """
    fmt = negotiate(request)
    body = body_of(fmt, request.app.get(RECORD_SCHEMAS, {}).get(request.match_info.handler))
    not_modified = await revalidate(request, listing, fmt, variant)
    if not_modified is not None:
        return not_modified
    app = request.app
    pool = app[POOL]
    path, query = request.rel_url.raw_path, request.rel_url.raw_query_string
    if isinstance(paging, CursorPage):
        window = await pool.window(listing, paging.limit)
        headers = snapshot_headers(request, window.token, fmt)
        headers.update(cursor_headers(path, query, paging.next_cursor(window.last)))
        return whole_response(request, body, window.texts, headers)
    if paging is not None:
        key = count_key(request, request[CALLER].company_id)
        page = await pool.page(listing, paging, app[COUNTS].get(key, app[DATA_VERSION].token))
        app[COUNTS].put(key, page.token, page.total)
        headers = snapshot_headers(request, page.token, fmt, variant)
        headers.update(page_headers(path, query, paging, page.total))
        return whole_response(request, body, page.texts, headers)

    slot = app[STREAMS].hold(request[CALLER].company_id)
    async with pool.whole(listing, body.encode, slot) as result:
        headers = snapshot_headers(request, result.token, fmt, variant)
        if isinstance(result, Records):
            return whole_response(request, body, result.texts, headers)
        return await stream_response(request, body, result, headers)


async def respond_record(
    request: web.Request, listing: Listing, variant: str = ""
) -> web.StreamResponse:
    """Answer one JSON object: the listing's single record (404 when its guard fails)."""
    fmt = negotiate(request, RECORD_FORMATS)
    not_modified = await revalidate(request, listing, fmt, variant)
    if not_modified is not None:
        return not_modified
    records = await request.app[POOL].one(listing)
    headers = snapshot_headers(request, records.token, fmt, variant)
    return finish(request, web.Response(body=records.texts[0], headers=headers), fmt)


async def revalidate(
    request: web.Request, listing: Listing, fmt: Format, variant: str = ""
) -> web.Response | None:
    """A 304 when the client's If-None-Match holds the current ETag (no listing query runs).

    The data token is refreshed first (and the pool reopened if the file was replaced).
    A record that does not exist for this company is 404 before any 304, even for
    ``If-None-Match: *``.
    """
    pool = request.app[POOL]
    await refresh_version(request.app)
    company_id = request[CALLER].company_id
    etag = make_etag(request.app[DATA_VERSION].token, company_id, request, f"{fmt.name}|{variant}")
    if not etag_matches(request, etag):
        return None
    await pool.check_guard(listing.guard)
    return web.Response(status=304, headers={hdrs.ETAG: etag, hdrs.VARY: VARY})


async def refresh_version(app: web.Application) -> None:
    """Read the data token again when it may have moved (the store's version says when)."""
    version = app[DATA_VERSION]
    if version.is_stale():
        version.update(await app[POOL].current_token())


def snapshot_headers(
    request: web.Request, token: str, fmt: Format, variant: str = ""
) -> dict[str, str]:
    """The ETag of the snapshot the records came from (and remember a newer token)."""
    version = request.app[DATA_VERSION]
    if token != version.token:
        version.update(token)
    etag = make_etag(token, request[CALLER].company_id, request, f"{fmt.name}|{variant}")
    headers: dict[str, str] = {hdrs.ETAG: etag, hdrs.VARY: VARY}
    if fmt is CSV:
        headers[hdrs.CONTENT_DISPOSITION] = f'attachment; filename="{csv_name(request)}"'
    return headers


def csv_name(request: web.Request) -> str:
    """``campaigns-1-events.csv`` for /api/companies/v1/campaigns/1/events."""
    resource = request.path.rsplit("/v1/", 1)[-1].strip("/")
    return f"{resource.replace('/', '-')}.csv"


def count_key(request: web.Request, company_id: int) -> CountKey:
    """The company and a digest of the path and every parameter the total depends on.

    A digest keeps each cache entry small whatever the length of the query string.
    """
    items = sorted((k, v) for k, v in request.query.items() if k not in NOT_COUNTED)
    digest = hashlib.blake2b(repr((request.path, items)).encode(), digest_size=16).digest()
    return company_id, digest
