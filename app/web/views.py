"""Handlers: validate, build the listing, respond. SQL lives in app.data, errors in errors."""

from __future__ import annotations

import logging
import sqlite3

from aiohttp import web

from ..data import campaigns, courses, employees, events, feed, inscriptions
from ..data.schema import DatabaseError
from ..keys import CALLER, LIMITS, PARSERS, POOL, TODAY
from . import openapi, schemas
from .cursor import CursorPage, CursorSigner
from .params import (
    DEFAULT_LIMIT,
    PERSON_FILTERS,
    CampaignEventsQuery,
    CampaignQuery,
    CampaignsQuery,
    CoursesQuery,
    EmployeeEventsQuery,
    EmployeeQuery,
    EmployeesQuery,
    FeedQuery,
    InscriptionsQuery,
    folded_lists,
    parse_path_id,
    requested_paging,
)
from .responder import refresh_version, respond_listing, respond_record

log = logging.getLogger("app.views")

CAMPAIGN_EVENTS_QUERY = CampaignEventsQuery()
EMPLOYEE_EVENTS_QUERY = EmployeeEventsQuery()
INSCRIPTIONS_QUERY = InscriptionsQuery()
FEED_QUERY = FeedQuery()
CAMPAIGNS_QUERY = CampaignsQuery()
CAMPAIGN_QUERY = CampaignQuery()
EMPLOYEES_QUERY = EmployeesQuery()
EMPLOYEE_QUERY = EmployeeQuery()
COURSES_QUERY = CoursesQuery()


@openapi.documented(CampaignEventsQuery, schemas.CampaignEventSchema, path_id="campaign")
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


@openapi.documented(EmployeeEventsQuery, schemas.EmployeeEventSchema, path_id="employee")
async def employee_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}/events (reporting-api.md 4.2)."""
    employee_id = parse_path_id(request.match_info["id"])
    query = request.app[PARSERS].parse(EMPLOYEE_EVENTS_QUERY, request)
    listing = events.employee_listing(request[CALLER].company_id, employee_id)
    return await respond_listing(request, listing, requested_paging(query, always=False))


@openapi.documented(InscriptionsQuery, schemas.InscriptionSchema)
async def course_inscriptions(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/course-inscriptions (reporting-api.md 4.3)."""
    query = request.app[PARSERS].parse(INSCRIPTIONS_QUERY, request)
    filters = inscriptions.InscriptionFilters(
        lists=folded_lists(query, (*PERSON_FILTERS, "courses")),
        from_inscription_date=query.get("from_inscription_date"),
        to_inscription_date=query.get("to_inscription_date"),
        from_due_date=query.get("from_due_date"),
        to_due_date=query.get("to_due_date"),
    )
    listing = inscriptions.inscriptions_listing(request[CALLER].company_id, filters)
    return await respond_listing(request, listing, requested_paging(query, always=True))


@openapi.documented(FeedQuery, schemas.FeedEventSchema, cursor=True)
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
    signer = CursorSigner(await request.app[POOL].cursor_secret())
    scope = filters.scope()
    given = query.get("cursor")
    after = feed.START if given is None else signer.open(company_id, scope, given)
    page = CursorPage(after, query.get("limit", DEFAULT_LIMIT), company_id, scope, signer)
    return await respond_listing(request, feed.feed_listing(company_id, filters, after), page)


@openapi.documented(CampaignsQuery, schemas.CampaignSummarySchema)
async def campaign_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns: the campaigns with their funnel (contract.md 11)."""
    query = request.app[PARSERS].parse(CAMPAIGNS_QUERY, request)
    filters = campaigns.CampaignFilters(
        titles=folded_lists(query, ("title",)).get("title", ()),
        from_launch_date=query.get("from_launch_date"),
        to_launch_date=query.get("to_launch_date"),
        without_captcha=query.get("with_captcha") is False,
    )
    listing = campaigns.campaigns_listing(request[CALLER].company_id, filters)
    return await respond_listing(request, listing, requested_paging(query, always=True))


@openapi.documented(CampaignQuery, schemas.CampaignReportSchema, path_id="campaign", many=False)
async def campaign_report(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns/{id}: one campaign with by_department (contract.md 11)."""
    campaign_id = parse_path_id(request.match_info["id"])
    query = request.app[PARSERS].parse(CAMPAIGN_QUERY, request)
    without_captcha = query.get("with_captcha") is False
    listing = campaigns.campaign_report(request[CALLER].company_id, campaign_id, without_captcha)
    return await respond_record(request, listing)


@openapi.documented(EmployeesQuery, schemas.EmployeeSchema)
async def employee_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi: the employee directory (contract.md 12)."""
    query = request.app[PARSERS].parse(EMPLOYEES_QUERY, request)
    filters = employees.EmployeeFilters(
        lists=folded_lists(query, PERSON_FILTERS),
        min_clicked=query.get("min_clicked", 0),
        min_failed=query.get("min_failed", 0),
    )
    today = request.app[TODAY]()
    listing = employees.employees_listing(request[CALLER].company_id, filters, today)
    paging = requested_paging(query, always=True)
    return await respond_listing(request, listing, paging, variant=today.isoformat())


@openapi.documented(EmployeeQuery, schemas.EmployeeSchema, path_id="employee", many=False)
async def employee_report(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}: one employee (contract.md 12)."""
    employee_id = parse_path_id(request.match_info["id"])
    request.app[PARSERS].parse(EMPLOYEE_QUERY, request)
    today = request.app[TODAY]()
    listing = employees.employee_report(request[CALLER].company_id, employee_id, today)
    return await respond_record(request, listing, variant=today.isoformat())


@openapi.documented(CoursesQuery, schemas.CourseSchema)
async def course_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/courses: the courses with their coverage (contract.md 12)."""
    query = request.app[PARSERS].parse(COURSES_QUERY, request)
    titles = folded_lists(query, ("title",)).get("title", ())
    today = request.app[TODAY]()
    listing = courses.courses_listing(request[CALLER].company_id, titles, today)
    paging = requested_paging(query, always=True)
    return await respond_listing(request, listing, paging, variant=today.isoformat())


async def healthz(request: web.Request) -> web.Response:
    """GET /healthz: the process is up (contract.md 8)."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """GET /readyz: the database answers, read afresh (contract.md 8); and the rate limits.

    The database alone decides the status code; ``rate_limit`` is ``"ok"``, or
    ``"degraded"`` while a shared store does not answer and requests are served
    unlimited (contract.md 15).
    """
    rate_limit = await request.app[LIMITS].state()
    try:
        await refresh_version(request.app)
        await request.app[POOL].ready()
    except (DatabaseError, sqlite3.Error, OSError) as exc:
        log.warning("not ready: %s", exc)
        body = {"status": "unavailable", "detail": "The database does not answer."}
        return web.json_response(body | {"rate_limit": rate_limit}, status=503)
    return web.json_response({"status": "ready", "rate_limit": rate_limit})
