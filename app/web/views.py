"""Handlers: validate, query, respond. SQL lives in ``queries``, errors in ``errors``."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiohttp import hdrs, web

from ..data import events, inscriptions
from ..data.listings import (
    Paging,
    RecordNotFound,
    Rows,
    TooLargeForInline,
    close_rows,
    data_token,
    next_chunk,
)
from ..data.pool import run_on
from ..data.schema import DatabaseError, check_readable
from ..data.version import DataVersion
from ..keys import CALLER, CONFIG, COUNTS, DATA_VERSION, POOL
from .errors import NotFound
from .headers import etag_matches, make_etag
from .pagination import PAGING_NAMES, page_headers
from .schemas import (
    DEFAULT_PER_PAGE,
    CampaignEventsQuery,
    EmployeeEventsQuery,
    InscriptionsQuery,
    QueryParser,
    parse_path_id,
)

log = logging.getLogger("app.views")
JSON_TYPE = "application/json"
GZIP_MIN_BYTES = 1024
INLINE_ROWS = 200  # unpaginated results shorter than this are read on the event loop
parse_campaign_events_query = QueryParser(CampaignEventsQuery())
parse_employee_events_query = QueryParser(EmployeeEventsQuery())
parse_inscriptions_query = QueryParser(InscriptionsQuery())


class CountCache:
    """Totals of filtered listings, per data token: data only changes with a load."""

    def __init__(self, max_entries: int = 2048) -> None:
        self._totals: OrderedDict[tuple[Any, ...], tuple[str, int]] = OrderedDict()
        self._max_entries = max_entries

    def get(self, key: tuple[Any, ...]) -> tuple[str, int] | tuple[None, None]:
        found = self._totals.get(key)
        return found if found is not None else (None, None)

    def put(self, key: tuple[Any, ...], token: str, total: int) -> None:
        self._totals[key] = (token, total)
        self._totals.move_to_end(key)
        if len(self._totals) > self._max_entries:
            self._totals.popitem(last=False)


async def campaign_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns/{id}/events (reporting-api.md 4.1)."""
    campaign_id = parse_path_id(request.match_info["id"])
    query = parse_campaign_events_query(request.rel_url.raw_query_string, request.query)
    return await respond_rows(
        request,
        events.campaign_events,
        campaign_id,
        types=tuple(dict.fromkeys(query.get("type", ()))),
        without_captcha=query.get("with_captcha") is False,
        paging=requested_paging(query, always=False),
    )


async def employee_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}/events (reporting-api.md 4.2)."""
    employee_id = parse_path_id(request.match_info["id"])
    query = parse_employee_events_query(request.rel_url.raw_query_string, request.query)
    return await respond_rows(
        request, events.employee_events, employee_id, paging=requested_paging(query, always=False)
    )


async def course_inscriptions(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/course-inscriptions (reporting-api.md 4.3)."""
    query = parse_inscriptions_query(request.rel_url.raw_query_string, request.query)
    filters = inscriptions.InscriptionFilters(
        lists={
            name: [value.casefold() for value in query[name]]
            for name in ("name", "last_name", "email", "department", "country", "teams", "courses")
            if name in query
        },
        from_inscription_date=query.get("from_inscription_date"),
        to_inscription_date=query.get("to_inscription_date"),
        from_due_date=query.get("from_due_date"),
        to_due_date=query.get("to_due_date"),
    )
    return await respond_rows(
        request,
        inscriptions.course_inscriptions,
        filters,
        paging=requested_paging(query, always=True),
    )


def requested_paging(query: dict[str, Any], *, always: bool) -> Paging | None:
    """The page asked for; events paginate only when page or per_page is given."""
    if not always and "page" not in query and "per_page" not in query:
        return None
    return Paging(query.get("page", 1), query.get("per_page", DEFAULT_PER_PAGE))


async def respond_rows(
    request: web.Request, query: Callable[..., Rows], *args: Any, **kwargs: Any
) -> web.StreamResponse:
    """Run a listing query and answer with ETag, pagination headers and a streamed body."""
    caller = request[CALLER]
    pool = request.app[POOL]
    version = request.app[DATA_VERSION]
    if version.is_stale():
        version.update(pool.run_inline(data_token))
    etag = make_etag(version.token, caller.company_id, request)
    if etag_matches(request, etag):
        return web.Response(status=304, headers={hdrs.ETAG: etag, hdrs.VARY: "Accept-Encoding"})

    paging: Paging | None = kwargs.pop("paging")
    if paging is not None:
        token, total = request.app[COUNTS].get(count_key(request))
        paging = Paging(paging.page, paging.per_page, token, total)
    try:
        if paging is None or paging.known_token == version.token:
            # Small by construction (a page whose count is known, or a short result):
            # read it on the event loop's connection, no thread hop.
            try:
                rows = pool.run_inline(
                    query, caller.company_id, *args, paging=paging, probe=INLINE_ROWS, **kwargs
                )
            except TooLargeForInline:
                pass
            else:
                return await answer(request, None, rows, version, paging)
        async with pool.acquire() as conn:
            rows = await run_on(conn, query, caller.company_id, *args, paging=paging, **kwargs)
            return await answer(request, conn, rows, version, paging)
    except RecordNotFound:
        raise NotFound("No such resource for this company.") from None


async def answer(
    request: web.Request,
    conn: Any,
    rows: Rows,
    version: DataVersion,
    paging: Paging | None,
) -> web.StreamResponse:
    """Headers from the snapshot the rows came from, then the body."""
    caller = request[CALLER]
    if rows.token != version.token:
        version.update(rows.token)
    headers = {hdrs.ETAG: make_etag(rows.token, caller.company_id, request)}
    headers[hdrs.VARY] = "Accept-Encoding"
    if paging is not None and rows.total is not None:
        if paging.known_total != rows.total or paging.known_token != rows.token:
            request.app[COUNTS].put(count_key(request), rows.token, rows.total)
        headers.update(
            page_headers(
                request.rel_url.raw_path, request.rel_url.raw_query_string, paging, rows.total
            )
        )
    try:
        return await send_array(request, conn, rows, headers)
    finally:
        if rows.cursor is not None:
            await run_on(conn, close_rows, rows)


def count_key(request: web.Request) -> tuple[int, bytes]:
    """The company and a digest of the path and every parameter but the paging ones.

    A digest keeps each cache entry small whatever the length of the query string.
    """
    items = sorted((k, v) for k, v in request.query.items() if k not in PAGING_NAMES)
    digest = hashlib.blake2b(repr((request.path, items)).encode(), digest_size=16).digest()
    return request[CALLER].company_id, digest


async def send_array(
    request: web.Request, conn: Any, rows: Rows, headers: dict[str, str]
) -> web.StreamResponse:
    """Send the JSON array: whole when it fits in one chunk, streamed otherwise."""
    accepts_gzip = "gzip" in request.headers.get(hdrs.ACCEPT_ENCODING, "").lower()
    if rows.cursor is None:
        body = b"[" + b",".join(rows.texts) + b"]"
        response = web.Response(body=body, headers=headers)
        response.content_type = JSON_TYPE
        response.charset = "utf-8"
        if accepts_gzip and len(body) > GZIP_MIN_BYTES:
            response.enable_compression(web.ContentCoding.gzip)
        return response
    response = web.StreamResponse(headers=headers)
    response.content_type = JSON_TYPE
    response.charset = "utf-8"
    if accepts_gzip:
        response.enable_compression(web.ContentCoding.gzip)
    await response.prepare(request)
    await response.write(b"[" + b",".join(rows.texts))
    # The pool thread reads chunk n+1 while the event loop sends chunk n.
    pending = asyncio.ensure_future(run_on(conn, next_chunk, rows))
    try:
        while pending is not None:
            chunk = await pending
            pending = None
            if rows.cursor is not None:
                pending = asyncio.ensure_future(run_on(conn, next_chunk, rows))
            if chunk:
                await response.write(chunk)
    finally:
        if pending is not None:  # the client went away mid-stream
            with contextlib.suppress(Exception):
                await pending
    await response.write(b"]")
    await response.write_eof()
    return response


async def healthz(request: web.Request) -> web.Response:
    """GET /healthz: the process is up (contract.md 8)."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """GET /readyz: the database file is there and answers, read afresh (contract.md 8)."""
    try:
        await request.app[POOL].run(data_token)
        await asyncio.to_thread(check_readable, request.app[CONFIG].db)
    except (DatabaseError, sqlite3.Error) as exc:
        log.warning("not ready: %s", exc)
        return web.json_response(
            {"status": "unavailable", "detail": "The database does not answer."}, status=503
        )
    return web.json_response({"status": "ready"})
