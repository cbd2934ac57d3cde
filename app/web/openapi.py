"""OpenAPI document and Swagger UI, generated from the marshmallow schemas (contract.md 8).

The views stay free of documentation: each documented route gets a carrier function
that delegates to its view and holds aiohttp-apigami's metadata, so building a second
app never documents a view twice. What each operation says (description, example) is in
operations.py; swagger.py serves the document and Swagger UI.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp_apigami import AiohttpApiSpec, OpenApiVersion, docs, match_info_schema
from aiohttp_apigami import querystring_schema as query_schema
from apispec.ext.marshmallow import MarshmallowPlugin
from marshmallow import Schema

from ..config import Config
from ..data.fields import (
    LIST_VALUE_PATTERN,
    MAX_ID,
    MAX_LIST_VALUES,
    CommaList,
    DecimalId,
    UtcTimestamp,
)
from ..keys import CONFIG
from .auth import CHALLENGE
from .csv_layout import layout_of
from .errors import PROBLEM_TYPE
from .formats import CSV, JSON, NDJSON
from .operations import OPERATIONS, Operation
from .params import Choice
from .schemas import ProblemSchema
from .swagger import setup_swagger

TITLE = "Security-awareness reporting API"

DESCRIPTION = """Read-only reports on phishing campaigns and training courses.

**Tenancy.** Every request to `/api/companies/` sends an `X-API-KEY` header. A key belongs \
to one company and every answer holds only that company's data; an id of another company \
is answered exactly like an unknown id (404).

**Order.** Events: `timestamp`, then `id`, ascending. Inscriptions: `start_date`, then \
inscription id; sections in course order; `groups` by name.

**Pagination.** `page` from 1 (default 1), `per_page` 1 to 500 (default 100). Course \
inscriptions always paginate; the events endpoints return the whole array unless `page` \
or `per_page` is given. Paginated answers carry `X-Total-Count`, `X-Page`, `X-Per-Page`, \
`X-Total-Pages` and a `Link` header (first, last, prev, next) keeping every filter; a page \
past the last is `[]` with the same headers.

**Filters.** List filters are comma lists (double quotes around a value holding a comma, \
at most 100 values, repeated parameters merge), matched whole and case-insensitively; \
values of one filter are OR-ed, different filters AND-ed. A value holding a control \
character (U+0000 to U+001F, U+007F) is 400. Dates are `YYYY-MM-DD`, bounds \
inclusive. Unknown or repeated scalar parameters are 400.

**Rate limit.** A token bucket per key: burst {burst}, refilled at {rate} per second on \
this server (defaults {default_burst} and {default_rate}). Authenticated answers carry \
`RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`, `RateLimit-Policy` and \
`RateLimit`; a 429 adds `Retry-After`. Failed authentications are limited to {failures} a \
minute per client address.

**Authentication.** A 401 carries `WWW-Authenticate: {challenge}`: the scheme is named \
APIKey and the key travels in the `X-API-KEY` header.

**Errors.** RFC 9457 `application/problem+json` bodies with `type`, `title`, `status`, \
`detail` and `request_id`; a 400 adds `errors`, the messages for each offending parameter. \
Checks run in order: path and method (404, 405), key (401; 400 when `X-API-KEY` is sent \
more than once), rate limit (429), parameters (400), resource (404).

**Caching.** Every 200 carries a weak `ETag` (one per format); `If-None-Match` gives 304. \
Bodies over 1 KiB are gzipped for clients that accept it; `Vary: Accept, Accept-Encoding`.

**Formats.** Every listing answers in JSON (`application/json`, the default), CSV \
(`text/csv`) or NDJSON (`application/x-ndjson`), chosen by `format=json|csv|ndjson` or, \
without it, by `Accept` (q-values honoured; `*/*` or no header: JSON); an `Accept` that \
allows none of them is 406, and the single-object answers are JSON only. NDJSON: one \
record a line. CSV: RFC 4180, UTF-8, a header row, CRLF; nested objects become dotted \
columns (`victim.email`), `groups` one cell of names joined by `; `, an inscription one \
row per section (`events.title`, ...; one row with those empty when it has none), null \
an empty cell, and a cell starting with `=`, `+`, `-`, `@`, tab or carriage return gets \
a leading `'`. CSV comes as an attachment (`Content-Disposition`).

**Event feed.** `/events` gives every event of the company in the order loads wrote \
them, `limit` at a time. Each answer's `X-Next-Cursor` (also in `Link: rel="next"`) is \
where the next request starts, even when the answer is empty: a collector stores it and \
asks again later. Following it from the start and then polling gives every event that \
exists exactly once in its latest state, and an event changed after it was read once \
more; nothing is skipped, whatever the ids of new events. A cursor is bound to the key's \
company and to the filters; any other cursor is 400."""


def _header(description: str, kind: str = "string", **limits: int) -> dict[str, Any]:
    return {"description": description, "schema": {"type": kind, **limits}}


HEADERS = {
    "X-Request-ID": _header("The client's sane X-Request-ID echoed, or a generated one."),
    "ETag": _header("Weak validator of this company's view of this URL at this data version."),
    "X-Total-Count": _header("Records matching the filters (paginated answers).", "integer"),
    "X-Page": _header("The page returned (paginated answers).", "integer", minimum=1),
    "X-Per-Page": _header("Page size (paginated answers).", "integer", minimum=1, maximum=500),
    "X-Total-Pages": _header("Number of pages (paginated answers).", "integer", minimum=0),
    "Link": _header(
        "RFC 8288 links: first, last, prev, next (paginated answers); next (the event feed)."
    ),
    "X-Next-Cursor": _header("The event feed: the `cursor` of the next request (opaque)."),
    "Content-Disposition": _header('CSV only: `attachment; filename="<resource>.csv"`.'),
    "Vary": _header("`Accept, Accept-Encoding`: the format and the coding follow them."),
    "RateLimit-Limit": _header("Burst: the bucket's capacity.", "integer", minimum=1),
    "RateLimit-Remaining": _header("Whole tokens left.", "integer", minimum=0),
    "RateLimit-Reset": _header("Whole seconds until the bucket is full.", "integer", minimum=0),
    "RateLimit-Policy": _header('IETF draft policy, e.g. `"default";q=20;w=2`.'),
    "RateLimit": _header('IETF draft state, e.g. `"default";r=19;t=1`.'),
    "Retry-After": _header("Whole seconds until a request may succeed.", "integer", minimum=1),
    "WWW-Authenticate": _header(
        f"Always `{CHALLENGE}`: the key goes in the X-API-KEY header (RFC 9110 11.6.1)."
    )
    | {"required": True},
}
RATE_HEADERS: tuple[str, ...] = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
RATE_HEADERS += ("RateLimit-Policy", "RateLimit")
PAGE_HEADERS = ("X-Total-Count", "X-Page", "X-Per-Page", "X-Total-Pages", "Link")
FEED_HEADERS = ("X-Next-Cursor", "Link")
PROBLEMS = {
    "400": (
        "BadRequest",
        "A path id or query parameter is invalid, or X-API-KEY was sent more than once.",
        RATE_HEADERS,
    ),
    "401": (
        "Unauthorized",
        "X-API-KEY is missing, empty, unknown or revoked.",
        ("WWW-Authenticate",),
    ),
    "404": ("NotFound", "No such resource for this company.", RATE_HEADERS),
    "406": (
        "NotAcceptable",
        "Neither `format` nor `Accept` allows a format this resource answers in.",
        RATE_HEADERS,
    ),
    "429": (
        "TooManyRequests",
        "Too many requests (RateLimit-* when the key is valid).",
        (*RATE_HEADERS, "Retry-After"),
    ),
    "414": ("UriTooLong", "The request line (path and query) is over 16 KiB.", ()),
    "431": ("HeadersTooLarge", "A header is over 8,190 bytes, or there are over 128.", ()),
    "500": ("InternalServerError", "Unexpected error; no internal detail is shown.", ()),
    "503": (
        "ServiceUnavailable",
        "Too many open connections from this address or in total; sent before the request "
        "is read, then the connection is closed.",
        ("Retry-After",),
    ),
}
ANY_REQUEST = ("414", "431", "500", "503")  # whatever the operation


def _refs(*names: str) -> dict[str, str]:
    """Header references by component name (apispec turns names into $ref)."""
    return {name: name for name in ("X-Request-ID", *names)}


def _decorators(op: Operation) -> tuple[Callable[[Any], Any], ...]:
    """apigami's decorators for one operation: key, If-None-Match, 200, 304, problems."""
    if_none_match = {"in": "header", "name": "If-None-Match", "required": False}
    if_none_match |= {"description": "An earlier ETag: 304 while the data is unchanged."}
    if_none_match |= {"schema": {"type": "string"}}
    paging = (FEED_HEADERS if op.cursor else PAGE_HEADERS) if op.many else ()
    csv = ("Content-Disposition",) if op.many else ()
    headers = _refs("ETag", "Vary", *csv, *RATE_HEADERS, *paging)
    sample = {
        "summary": f"GET {op.example.request} with company 1's sample key",
        "value": op.example.body,
    }
    ok = {"schema": op.response(many=op.many), "examples": {"sample": sample}}
    content = {JSON.media_type: ok} | (_other_formats(op.response) if op.many else {})
    responses: dict[str, Any] = {
        "200": {
            "description": "The records, in order." if op.many else "The record.",
            "content": content,
            "headers": headers,
        },
        "304": {
            "description": "If-None-Match matched the ETag.",
            "headers": _refs("ETag", "Vary"),
        },
    }
    codes = ("400", "401", *(("404",) if op.path_id else ()), "406", "429", *ANY_REQUEST)
    responses |= {code: PROBLEMS[code][0] for code in codes}
    # apigami types the status codes as ints; OpenAPI's keys are strings, which it keeps.
    decorators = [
        docs(
            tags=[op.tag],
            summary=op.summary,
            description=op.description,
            operation_id=op.operation_id,
            security=[{"ApiKey": []}],
            parameters=[if_none_match],
            responses=cast(Any, responses),
        ),
        query_schema(op.query),
    ]
    if op.path_id:
        path_id = DecimalId(required=True, metadata={"description": op.path_id})
        decorators.append(match_info_schema(Schema.from_dict({"id": path_id})))
    return tuple(decorators)


def _other_formats(records: type[Schema]) -> dict[str, Any]:
    """A listing's CSV (its columns named) and NDJSON bodies (contract.md 14)."""
    name = records.__name__.removesuffix("Schema")
    columns = layout_of(records).columns
    listed = ", ".join(f"`{column}`" for column in columns)
    csv = {"type": "string", "description": f"A header row, then a row per {name}: {listed}."}
    ndjson = {"type": "string", "description": f"One {name} JSON object a line."}
    return {
        CSV.media_type: {"schema": csv, "example": ",".join(columns) + "\r\n"},
        NDJSON.media_type: {"schema": ndjson},
    }


def _field_schema(self: Any, field: Any, **kwargs: Any) -> dict[str, Any]:
    """apispec attribute function: the limits our strict fields check by hand."""
    if isinstance(field, DecimalId):
        number = {"type": "integer", "minimum": field.minimum, "maximum": field.maximum}
        return number | {"format": "int64"} if field.maximum == MAX_ID else number
    if isinstance(field, CommaList):
        items: dict[str, Any] = {"type": "string", "minLength": 1}
        if field.choices:
            items["enum"] = list(field.choices)
        else:
            items["pattern"] = LIST_VALUE_PATTERN
        return {"type": "array", "items": items, "minItems": 1, "maxItems": MAX_LIST_VALUES}
    if isinstance(field, UtcTimestamp):
        return {"format": "date-time", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"}
    if isinstance(field, Choice):
        return {"enum": list(field.choices)}
    return {}


def _comma_style(self: Any, field: Any, **kwargs: Any) -> dict[str, Any]:
    """apispec parameter function: a comma list is OpenAPI's form style, not exploded."""
    return {"style": "form", "explode": False} if isinstance(field, CommaList) else {}


def build_document(app: web.Application) -> dict[str, Any]:
    """The OpenAPI 3 document of the app's documented GET routes."""
    config, defaults = app[CONFIG], Config()
    description = DESCRIPTION.format(
        burst=config.rate_burst,
        rate=f"{config.rate_per_second:g}",
        default_burst=defaults.rate_burst,
        default_rate=f"{defaults.rate_per_second:g}",
        failures=config.auth_failures_per_minute,
        challenge=CHALLENGE,
    )
    api = AiohttpApiSpec(
        url="",
        openapi_version=OpenApiVersion.V303,
        title=TITLE,
        version="1.0.0",
        info={"description": description},
    )
    spec = api.spec
    plugin = spec.plugins[0]
    assert isinstance(plugin, MarshmallowPlugin) and plugin.converter is not None
    converter = plugin.converter
    converter.add_attribute_function(_field_schema)
    converter.add_parameter_attribute_function(_comma_style)
    spec.components.security_scheme(
        "ApiKey", {"type": "apiKey", "in": "header", "name": "X-API-KEY"}
    )
    for name, header in HEADERS.items():
        spec.components.header(name, header)
    for name, description, headers in PROBLEMS.values():
        content = {PROBLEM_TYPE: {"schema": ProblemSchema}}
        spec.components.response(
            name, {"description": description, "content": content, "headers": _refs(*headers)}
        )
    for route in app.router.routes():
        op = OPERATIONS.get(route.handler)
        if route.method == "GET" and op and route.resource is not None:
            spec.path(
                path=route.resource.canonical,
                method="get",
                handler=_carrier(route.handler, _decorators(op)),
            )
    document = api.swagger_dict()
    for path_item in document["paths"].values():
        for operation in path_item.values():
            operation.pop("produces", None)  # apigami's docs() adds this OpenAPI 2 field
    return document


def _carrier(view: Handler, decorators: tuple[Callable[[Any], Any], ...]) -> Handler:
    """A fresh function standing for `view` that holds the apigami metadata."""

    async def documented(request: web.Request) -> web.StreamResponse:
        return await view(request)

    for decorate in decorators:
        documented = decorate(documented)
    return documented


def setup_openapi(app: web.Application) -> None:
    """Serve /api/docs (Swagger UI) and /api/docs/openapi.json; call after setup_routes."""
    setup_swagger(app, TITLE, json.dumps(build_document(app), indent=1).encode())
