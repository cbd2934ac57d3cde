"""What an authenticated key may read: the scope of each operation, and the company.

Every route under the API's prefixes is in :data:`ROUTE_SCOPES`; a route missing from it
is refused to every key (and fails a test), never open. The company a request reads is
the key's own, or, for a partner key, the one its ``X-Company-ID`` header names among
the partner's companies; any other id is answered exactly as a record of another
company is (contract.md 1): the same 404, and no database read to time.
"""

from __future__ import annotations

from aiohttp import web
from marshmallow import ValidationError

from ..data.api_keys import ActiveKey
from ..data.fields import MAX_SAFE_ID, DecimalId
from ..data.listings import RecordNotFound
from .errors import BadRequest, Forbidden

COMPANIES_API = "/api/companies/v1"
PARTNERS_API = "/api/partners/v1"
COMPANY_HEADER = "X-Company-ID"
HTTP_WHITESPACE = " \t"  # the only whitespace a header value may carry (RFC 9110 5.5)
# RFC 9110 11.6.1: a 401 names how to authenticate. No registered scheme sends a key in
# a header of its own, so the challenge names one (APIKey) and says which header; a 403
# for a scope adds RFC 6750's error and scope to it.
CHALLENGE = 'APIKey header="X-API-KEY"'
# The route's path -> the scope a key needs for it (None: any key may ask).
ROUTE_SCOPES: dict[str, str | None] = {
    f"{COMPANIES_API}/key": None,
    f"{COMPANIES_API}/campaigns": "reports:read",
    f"{COMPANIES_API}/campaigns/{{id}}": "reports:read",
    f"{COMPANIES_API}/courses": "reports:read",
    f"{COMPANIES_API}/stats/phishing": "reports:read",
    f"{COMPANIES_API}/stats/training": "reports:read",
    f"{COMPANIES_API}/campaigns/{{id}}/events": "events:read",
    f"{COMPANIES_API}/victimsapi/{{id}}/events": "events:read",
    f"{COMPANIES_API}/events": "events:read",
    f"{COMPANIES_API}/victimsapi": "people:read",
    f"{COMPANIES_API}/victimsapi/{{id}}": "people:read",
    f"{COMPANIES_API}/victimsapi/changes": "people:read",
    f"{COMPANIES_API}/course-inscriptions": "training:read",
    f"{COMPANIES_API}/course-inscriptions/changes": "training:read",
    f"{COMPANIES_API}/webhooks": "webhooks:read",
    f"{COMPANIES_API}/webhooks/{{id}}/deliveries": "webhooks:read",
    f"{PARTNERS_API}/companies": "reports:read",
}
# The stats answer under reports:read, in groups. A filter that names people (as the
# directory does) also needs people:read there: a key that may not read the directory
# would otherwise find out who is in it, and how one person did, an email at a time.
NAMING_PEOPLE = ("filter[name]", "filter[last_name]", "filter[email]")
STATS_ROUTES = frozenset({f"{COMPANIES_API}/stats/phishing", f"{COMPANIES_API}/stats/training"})
# Routes where a partner key need not name a company (it reads none): the key itself.
COMPANY_OPTIONAL = frozenset({f"{COMPANIES_API}/key"})
_COMPANY_ID = DecimalId(maximum=MAX_SAFE_ID)


def route_path(request: web.Request) -> str:
    """The matched route's path template, as ROUTE_SCOPES names it."""
    return request.match_info.route.resource.canonical if request.match_info.route.resource else ""


def require_scope(request: web.Request, key: ActiveKey) -> None:
    """403 with the RFC 6750 challenge unless the key holds the route's scope (and, for
    a stats filter naming people, people:read), whatever the parameters' values."""
    path = route_path(request)
    if path not in ROUTE_SCOPES:
        raise Forbidden("No API key may read this resource.")
    scope = ROUTE_SCOPES[path]
    if scope is not None and scope not in key.scopes:
        raise insufficient(scope)
    if path in STATS_ROUTES and "people:read" not in key.scopes:
        named = [name for name in NAMING_PEOPLE if name in request.query]
        if named:
            raise insufficient("people:read", f", which {named[0]} needs: it names people")


def insufficient(scope: str, why: str = "") -> Forbidden:
    """The 403 of a key without ``scope``, with RFC 6750's challenge naming it."""
    return Forbidden(
        f"This API key lacks the scope {scope}{why}.",
        headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope", scope="{scope}"'},
    )


def require_partner(key: ActiveKey) -> int:
    """The key's partner; 403 for a company key (the partners' API is not its): RFC 6750's
    insufficient_scope without a scope, since no scope opens that API to a company key."""
    if key.partner_id is None:
        raise Forbidden(
            "Only a partner's API key reads the partners' API.",
            headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope"'},
        )
    return key.partner_id


def company_of(request: web.Request, key: ActiveKey) -> int | None:
    """The company this request reads (None: the key's own route, which reads none).

    ``X-Company-ID`` is one decimal id; a partner key must send it (except on the key's
    own route), a company key may send its own id. An id the key may not read, known or
    not, is the 404 of a record of another company.
    """
    values = request.headers.getall(COMPANY_HEADER, ())
    if len(values) > 1:
        raise BadRequest(
            f"Send at most one {COMPANY_HEADER} header.",
            errors={COMPANY_HEADER: [f"Given {len(values)} times; send it once."]},
        )
    if not values:
        if key.company_id is not None or route_path(request) in COMPANY_OPTIONAL:
            return key.company_id
        raise BadRequest(
            f"A partner's API key names the company it reads in {COMPANY_HEADER}.",
            errors={COMPANY_HEADER: ["Missing: send the id of one of the partner's companies."]},
        )
    try:
        company_id = int(_COMPANY_ID.deserialize(values[0].strip(HTTP_WHITESPACE)))
    except ValidationError as exc:
        errors = {COMPANY_HEADER: [str(message) for message in exc.messages]}
        raise BadRequest(f"Invalid {COMPANY_HEADER} header.", errors=errors) from None
    if company_id not in key.companies:
        raise RecordNotFound
    return company_id
