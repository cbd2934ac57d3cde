"""Handlers: validate, build the listing, respond. SQL lives in app.data, errors in errors."""

from __future__ import annotations

import asyncio
import logging
import sqlite3

from aiohttp import web

from ..data import events, feed, inscriptions
from ..data.schema import DatabaseError, check_readable
from ..keys import CALLER, CONFIG, PARSERS, POOL
from .cursor import CursorPage, CursorSigner
from .params import (
    DEFAULT_LIMIT,
    CampaignEventsQuery,
    EmployeeEventsQuery,
    FeedQuery,
    InscriptionsQuery,
    parse_path_id,
    requested_paging,
)
from .responder import refresh_version, respond_listing

log = logging.getLogger("app.views")

CAMPAIGN_EVENTS_QUERY = CampaignEventsQuery()
EMPLOYEE_EVENTS_QUERY = EmployeeEventsQuery()
INSCRIPTIONS_QUERY = InscriptionsQuery()
FEED_QUERY = FeedQuery()
PERSON_FILTERS = ("name", "last_name", "email", "department", "country", "teams", "courses")


async def campaign_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns/{id}/events (reporting-api.md 4.1)."""
    campaign_id = parse_path_id(request.match_info["id"])
    query = request.app[PARSERS].parse(CAMPAIGN_EVENTS_QUERY, request)
    listing = events.campaign_listing(
        request[CALLER].company_id,
        campaign_id,
        types=tuple(dict.fromkeys(query.get("type", ()))),
        without_captcha=query.get("with_captcha") is False,
    )
    return await respond_listing(request, listing, requested_paging(query, always=False))


async def employee_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}/events (reporting-api.md 4.2)."""
    employee_id = parse_path_id(request.match_info["id"])
    query = request.app[PARSERS].parse(EMPLOYEE_EVENTS_QUERY, request)
    listing = events.employee_listing(request[CALLER].company_id, employee_id)
    return await respond_listing(request, listing, requested_paging(query, always=False))


async def course_inscriptions(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/course-inscriptions (reporting-api.md 4.3)."""
    query = request.app[PARSERS].parse(INSCRIPTIONS_QUERY, request)
    filters = inscriptions.InscriptionFilters(
        lists={
            name: [value.casefold() for value in query[name]]
            for name in PERSON_FILTERS
            if name in query
        },
        from_inscription_date=query.get("from_inscription_date"),
        to_inscription_date=query.get("to_inscription_date"),
        from_due_date=query.get("from_due_date"),
        to_due_date=query.get("to_due_date"),
    )
    listing = inscriptions.inscriptions_listing(request[CALLER].company_id, filters)
    return await respond_listing(request, listing, requested_paging(query, always=True))


async def event_feed(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/events: the change feed, by cursor (contract.md 13)."""
    query = request.app[PARSERS].parse(FEED_QUERY, request)
    company_id = request[CALLER].company_id
    filters = feed.FeedFilters.of(
        types=query.get("type", ()),
        without_captcha=query.get("with_captcha") is False,
        from_date=query.get("from_date"),
        to_date=query.get("to_date"),
    )
    # The secret is the database's own: read each time, so a replaced file signs anew.
    signer = CursorSigner(request.app[POOL].run_inline(feed.cursor_secret))
    scope = filters.scope()
    given = query.get("cursor")
    after = feed.START if given is None else signer.open(company_id, scope, given)
    page = CursorPage(after, query.get("limit", DEFAULT_LIMIT), company_id, scope, signer)
    return await respond_listing(request, feed.feed_listing(company_id, filters, after), page)


async def healthz(request: web.Request) -> web.Response:
    """GET /healthz: the process is up (contract.md 8)."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """GET /readyz: the database file is there and answers, read afresh (contract.md 8)."""
    try:
        await refresh_version(request.app)
        await request.app[POOL].token()
        await asyncio.to_thread(check_readable, request.app[CONFIG].db)
    except (DatabaseError, sqlite3.Error) as exc:
        log.warning("not ready: %s", exc)
        return web.json_response(
            {"status": "unavailable", "detail": "The database does not answer."}, status=503
        )
    return web.json_response({"status": "ready"})
