"""Handlers: validate, build the listing, respond. SQL lives in app.data, errors in errors."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from aiohttp import web
from marshmallow import Schema

from ..data import (
    campaigns,
    changes,
    courses,
    employees,
    events,
    feed,
    inscriptions,
    partners,
    stats,
    webhooks,
)
from ..data.api_keys import unix_seconds
from ..data.listings import Listing
from ..data.schema import DatabaseError
from ..keys import API_KEY, CALLER, LIMITS, PARSERS, POOL, TODAY
from .access import require_partner
from .cursor import CursorSigner, cursor_page
from .errors import PreconditionFailed, report_unavailable
from .formats import JSON, Offer, listing_offer, negotiate
from .openapi import documented, documented_object
from .params import (
    CampaignEventsQuery,
    CampaignQuery,
    CampaignsQuery,
    ChangesQuery,
    CoursesQuery,
    DeliveriesQuery,
    EmployeeEventsQuery,
    EmployeeQuery,
    EmployeesQuery,
    FeedQuery,
    InscriptionsQuery,
    KeyQuery,
    PartnerCompaniesQuery,
    PhishingStatsQuery,
    StatsQuery,
    WebhooksQuery,
    stats_filters,
)
from .responder import (
    IF_MATCH_DETAIL,
    if_match_fails,
    refresh_version,
    respond_all,
    respond_page,
    respond_record,
    respond_window,
)
from .schemas import (
    CampaignEventSchema,
    CampaignReportSchema,
    CampaignSummarySchema,
    CourseSchema,
    DeliverySchema,
    EmployeeChangeSchema,
    EmployeeEventSchema,
    EmployeeSchema,
    FeedEventSchema,
    InscriptionChangeSchema,
    InscriptionSchema,
    KeySchema,
    PartnerCompanySchema,
    PhishingStatsSchema,
    TrainingStatsSchema,
    WebhookSchema,
    stats_rows,
)

CAMPAIGN_EVENTS_QUERY = CampaignEventsQuery()
EMPLOYEE_EVENTS_QUERY = EmployeeEventsQuery()
INSCRIPTIONS_QUERY = InscriptionsQuery()
FEED_QUERY = FeedQuery()
CAMPAIGNS_QUERY = CampaignsQuery()
CAMPAIGN_QUERY = CampaignQuery()
EMPLOYEES_QUERY = EmployeesQuery()
EMPLOYEE_QUERY = EmployeeQuery()
COURSES_QUERY = CoursesQuery()
PARTNER_COMPANIES_QUERY = PartnerCompaniesQuery()
CHANGES_QUERY = ChangesQuery()
WEBHOOKS_QUERY = WebhooksQuery()
DELIVERIES_QUERY = DeliveriesQuery()
PHISHING_STATS_QUERY = PhishingStatsQuery()
TRAINING_STATS_QUERY = StatsQuery()
KEY_QUERY = KeyQuery()

# Each listing's formats, the CSV columns from the schema of its records.
CAMPAIGN_EVENTS = listing_offer(CampaignEventSchema)
EMPLOYEE_EVENTS = listing_offer(EmployeeEventSchema)
INSCRIPTIONS = listing_offer(InscriptionSchema)
FEED_EVENTS = listing_offer(FeedEventSchema)
CAMPAIGNS = listing_offer(CampaignSummarySchema)
EMPLOYEES = listing_offer(EmployeeSchema)
COURSES = listing_offer(CourseSchema)
PARTNER_COMPANIES = listing_offer(PartnerCompanySchema)
INSCRIPTION_CHANGES = listing_offer(InscriptionChangeSchema)
EMPLOYEE_CHANGES = listing_offer(EmployeeChangeSchema)
WEBHOOKS = listing_offer(WebhookSchema)
DELIVERIES = listing_offer(DeliverySchema)
# The stats' rows carry the group's key only when grouped: an offer (CSV columns) each.
STATS_OFFERS: dict[tuple[type[Schema], str | None], Offer] = {
    (schema, group): listing_offer(stats_rows(schema, group))
    for schema in (PhishingStatsSchema, TrainingStatsSchema)
    for group in (None, *stats.GROUPS)
}


@documented(CampaignEventsQuery, CampaignEventSchema, path_id="campaign")
async def campaign_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns/{id}/events (reporting-api.md 4.1)."""
    campaign_id, query = request.app[PARSERS].parse_with_id(CAMPAIGN_EVENTS_QUERY, request)
    company_id = request[CALLER].company_id
    listing = events.campaign_listing(
        company_id, campaign_id, query.types, query.without_captcha, query.automation
    )
    if query.paging is None:
        return await respond_all(request, listing, CAMPAIGN_EVENTS)
    return await respond_page(request, listing, query.paging, CAMPAIGN_EVENTS)


@documented(EmployeeEventsQuery, EmployeeEventSchema, path_id="employee")
async def employee_events(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}/events (reporting-api.md 4.2)."""
    employee_id, query = request.app[PARSERS].parse_with_id(EMPLOYEE_EVENTS_QUERY, request)
    listing = events.employee_listing(request[CALLER].company_id, employee_id, query.automation)
    if query.paging is None:
        return await respond_all(request, listing, EMPLOYEE_EVENTS)
    return await respond_page(request, listing, query.paging, EMPLOYEE_EVENTS)


@documented(InscriptionsQuery, InscriptionSchema)
async def course_inscriptions(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/course-inscriptions (reporting-api.md 4.3)."""
    query = request.app[PARSERS].parse(INSCRIPTIONS_QUERY, request)
    listing = inscriptions.inscriptions_listing(request[CALLER].company_id, query.filters)
    return await respond_page(request, listing, query.paging, INSCRIPTIONS)


@documented(FeedQuery, FeedEventSchema, cursor=True)
async def event_feed(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/events: the change feed, by cursor (contract.md 13)."""
    query = request.app[PARSERS].parse(FEED_QUERY, request)
    company_id = request[CALLER].company_id
    # The secret is the database's own: read each time, so a replaced file signs anew.
    pool = request.app[POOL]
    signer = CursorSigner(await pool.cursor_secret(), pool.feed_mark)
    cursor = await cursor_page(signer, company_id, query.scope, query.cursor, query.limit)
    listing = feed.feed_listing(company_id, query.filters, cursor.after)
    return await respond_window(request, listing, cursor, FEED_EVENTS)


@documented(ChangesQuery, InscriptionChangeSchema, cursor=True)
async def inscription_changes(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/course-inscriptions/changes: the inscriptions' change feed."""
    return await _change_feed(request, "inscriptions", INSCRIPTION_CHANGES)


@documented(ChangesQuery, EmployeeChangeSchema, cursor=True)
async def employee_changes(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/changes: the employees' change feed."""
    return await _change_feed(request, "employees", EMPLOYEE_CHANGES)


CHANGE_LISTINGS = {
    "inscriptions": changes.inscription_changes,
    "employees": changes.employee_changes,
}


async def _change_feed(request: web.Request, name: str, offer: Offer) -> web.StreamResponse:
    """A change feed read as the event feed is: by cursor, bound to company and filters."""
    query = request.app[PARSERS].parse(CHANGES_QUERY, request)
    company_id = request[CALLER].company_id
    pool = request.app[POOL]
    signer = CursorSigner(await pool.cursor_secret(), pool.feed_mark)
    scope = query.filters.scope(name)
    cursor = await cursor_page(signer, company_id, scope, query.cursor, query.limit)
    listing = CHANGE_LISTINGS[name](company_id, query.filters, cursor.after)
    return await respond_window(request, listing, cursor, offer)


@documented(CampaignsQuery, CampaignSummarySchema)
async def campaign_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns: the campaigns with their funnel (contract.md 11)."""
    query = request.app[PARSERS].parse(CAMPAIGNS_QUERY, request)
    listing = campaigns.campaigns_listing(request[CALLER].company_id, query.filters)
    return await respond_page(request, listing, query.paging, CAMPAIGNS)


@documented(CampaignQuery, CampaignReportSchema, path_id="campaign", many=False)
async def campaign_report(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/campaigns/{id}: one campaign with by_department (contract.md 11)."""
    campaign_id, query = request.app[PARSERS].parse_with_id(CAMPAIGN_QUERY, request)
    company_id = request[CALLER].company_id
    listing = campaigns.campaign_report(
        company_id, campaign_id, query.without_captcha, query.automation
    )
    return await respond_record(request, listing)


@documented(EmployeesQuery, EmployeeSchema)
async def employee_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi: the employee directory (contract.md 12)."""
    query = request.app[PARSERS].parse(EMPLOYEES_QUERY, request)
    today = request.app[TODAY]()
    listing = employees.employees_listing(request[CALLER].company_id, query.filters, today)
    return await respond_page(request, listing, query.paging, EMPLOYEES, today.isoformat())


@documented(EmployeeQuery, EmployeeSchema, path_id="employee", many=False)
async def employee_report(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/victimsapi/{id}: one employee (contract.md 12)."""
    employee_id, query = request.app[PARSERS].parse_with_id(EMPLOYEE_QUERY, request)
    today = request.app[TODAY]()
    company_id = request[CALLER].company_id
    listing = employees.employee_report(company_id, employee_id, today, query.automation)
    return await respond_record(request, listing, variant=today.isoformat())


@documented(CoursesQuery, CourseSchema)
async def course_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/courses: the courses with their coverage (contract.md 12)."""
    query = request.app[PARSERS].parse(COURSES_QUERY, request)
    today = request.app[TODAY]()
    listing = courses.courses_listing(request[CALLER].company_id, query.titles, today)
    return await respond_page(request, listing, query.paging, COURSES, today.isoformat())


@documented(PartnerCompaniesQuery, PartnerCompanySchema)
async def partner_companies(request: web.Request) -> web.StreamResponse:
    """GET /api/partners/v1/companies: the partner's companies side by side."""
    query = request.app[PARSERS].parse(PARTNER_COMPANIES_QUERY, request)
    today = request.app[TODAY]()
    partner_id = require_partner(request[API_KEY])
    listing = partners.partner_companies_listing(partner_id, query.names, today)
    return await respond_page(request, listing, query.paging, PARTNER_COMPANIES, today.isoformat())


@documented_object(KeySchema)
async def key_introspection(request: web.Request) -> web.Response:
    """GET /api/companies/v1/key: the calling key's facts, RFC 7662's names; never the key."""
    request.app[PARSERS].parse(KEY_QUERY, request)
    negotiate(request, (JSON,))
    if if_match_fails(request):
        raise PreconditionFailed(IF_MATCH_DETAIL)
    key = request[API_KEY]
    owner = (
        {"company_id": key.company_id} if key.partner_id is None else {"partner_id": key.partner_id}
    )
    facts = {
        "active": True,
        "scope": " ".join(sorted(key.scopes)),
        "client_id": key.prefix,
        "label": key.label,
        "iat": unix_seconds(key.created_at),
        "exp": unix_seconds(key.expires_at),
        **owner,
        "companies": sorted(key.companies),
    }
    return web.json_response(facts, headers={"Cache-Control": "no-store"})


@documented(WebhooksQuery, WebhookSchema)
async def webhook_list(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/webhooks: the company's webhook subscriptions."""
    query = request.app[PARSERS].parse(WEBHOOKS_QUERY, request)
    listing = webhooks.webhooks_listing(request[CALLER].company_id)
    variant = await webhooks_variant(request)
    return await respond_page(request, listing, query.paging, WEBHOOKS, variant)


@documented(DeliveriesQuery, DeliverySchema, path_id="webhook")
async def webhook_deliveries(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/webhooks/{id}/deliveries: its attempts, newest first."""
    webhook_id, query = request.app[PARSERS].parse_with_id(DELIVERIES_QUERY, request)
    company_id = request[CALLER].company_id
    listing = webhooks.deliveries_listing(company_id, webhook_id, query.statuses)
    variant = await webhooks_variant(request)
    return await respond_page(request, listing, query.paging, DELIVERIES, variant)


async def webhooks_variant(request: web.Request) -> str:
    """The webhooks' version, for the ETag and the total: the tool and the sender write
    without moving the data token."""
    return f"webhooks {await request.app[POOL].webhooks_version()}"


@documented(PhishingStatsQuery, PhishingStatsSchema)
async def phishing_stats(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/stats/phishing: the sends' funnel by period (and group)."""
    return await _stats(request, PHISHING_STATS_QUERY, stats.phishing_listing, PhishingStatsSchema)


@documented(StatsQuery, TrainingStatsSchema)
async def training_stats(request: web.Request) -> web.StreamResponse:
    """GET /api/companies/v1/stats/training: inscriptions due by period (and group)."""
    return await _stats(request, TRAINING_STATS_QUERY, stats.training_listing, TrainingStatsSchema)


async def _stats(
    request: web.Request,
    schema: StatsQuery,
    make: Callable[[int, stats.StatsFilters], Listing],
    rows: type[Schema],
) -> web.StreamResponse:
    """A page of stats rows; the window's bounds go into the ETag (the default one moves
    with today's month)."""
    query = request.app[PARSERS].parse(schema, request)
    filters = stats_filters(query, request.app[TODAY]())
    listing = make(request[CALLER].company_id, filters)
    window = f"{filters.buckets[0][0]}..{filters.buckets[-1][1]}"
    offer = STATS_OFFERS[rows, query.group_by]
    return await respond_page(request, listing, query.paging, offer, window)


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
        report_unavailable(exc)
        body = {"status": "unavailable", "detail": "The database does not answer."}
        return web.json_response(body | {"rate_limit": rate_limit}, status=503)
    return web.json_response({"status": "ready", "rate_limit": rate_limit})
