"""The interface in marshmallow: query parameters, response records, the problem body.

These schemas validate requests, generate the OpenAPI document and, in the tests, are
the reference the SQL-built JSON must equal (contract.md sections 3 and 5).
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate, validates_schema
from multidict import MultiDictProxy

from ..data.fields import CommaList, DecimalId, StrictBool, StrictDate, UtcTimestamp
from ..data.schema import EVENT_TYPES, INSCRIPTION_STATUSES, SECTION_STATUSES, SECTION_TYPES
from .errors import BadRequest

MAX_PER_PAGE = 500
DEFAULT_PER_PAGE = 100


# ---- query parameters -------------------------------------------------------------


class PagingQuery(Schema):
    page = DecimalId(
        metadata={"description": "Page number, from 1. Default 1.", "example": 1},
    )
    per_page = DecimalId(
        maximum=MAX_PER_PAGE,
        metadata={"description": f"Records per page, 1 to {MAX_PER_PAGE}. Default 100."},
    )


class CampaignEventsQuery(PagingQuery):
    with_captcha = StrictBool(
        data_key="filter[with_captcha]",
        metadata={"description": "false excludes events with captcha verification."},
    )
    type = CommaList(
        choices=EVENT_TYPES,
        data_key="filter[type]",
        metadata={"description": "Comma list of event types: open, click, report, fail."},
    )


class EmployeeEventsQuery(PagingQuery):
    pass


def _list_filter(name: str, what: str) -> CommaList:
    return CommaList(
        data_key=f"filter[{name}]",
        metadata={
            "description": f"Comma list of {what}; whole values, any letter case; double "
            "quotes around a value holding a comma; at most 100 values."
        },
    )


def _date_filter(name: str, what: str) -> StrictDate:
    return StrictDate(
        data_key=f"filter[{name}]", metadata={"description": f"{what} (YYYY-MM-DD, inclusive)."}
    )


class InscriptionsQuery(PagingQuery):
    name = _list_filter("name", "employee first names")
    last_name = _list_filter("last_name", "employee last names")
    email = _list_filter("email", "employee email addresses")
    department = _list_filter("department", "departments")
    country = _list_filter("country", "countries")
    teams = _list_filter("teams", "team names (the employee is in any of them)")
    courses = _list_filter("courses", "course titles")
    from_inscription_date = _date_filter("from_inscription_date", "Inscriptions on or after")
    to_inscription_date = _date_filter("to_inscription_date", "Inscriptions on or before")
    from_due_date = _date_filter("from_due_date", "Due on or after")
    to_due_date = _date_filter("to_due_date", "Due on or before")

    @validates_schema
    def ranges_in_order(self, data: dict[str, Any], **kwargs: Any) -> None:
        for low, high in (
            ("from_inscription_date", "to_inscription_date"),
            ("from_due_date", "to_due_date"),
        ):
            if low in data and high in data and data[low] > data[high]:
                raise ValidationError(
                    f"filter[{low}] is later than filter[{high}].", f"filter[{low}]"
                )


class PathId(Schema):
    id = DecimalId(required=True)


_PATH_ID = PathId().fields["id"]


def parse_query(schema: Schema, query: MultiDictProxy[str]) -> dict[str, Any]:
    """Validate a query string: unknown names, repeated scalars, then every value.

    All problems are reported at once, keyed by parameter name (contract.md 3).
    """
    list_names = {f.data_key or n for n, f in schema.fields.items() if isinstance(f, CommaList)}
    allowed = sorted(f.data_key or n for n, f in schema.fields.items())
    errors: dict[str, list[str]] = {}
    raw: dict[str, Any] = {}
    for name in dict.fromkeys(query.keys()):
        values = query.getall(name)
        if name not in allowed:
            errors[name] = [f"Unknown parameter. Allowed: {', '.join(allowed)}."]
        elif name in list_names:
            raw[name] = values
        elif len(values) > 1:
            errors[name] = ["Given more than once."]
        else:
            raw[name] = values[0]
    try:
        data = schema.load(raw)
    except ValidationError as exc:
        data = {}
        for name, messages in _flat(exc.messages).items():
            errors.setdefault(name, []).extend(messages)
    if errors:
        raise BadRequest(_summary(errors), errors=errors)
    return data


class QueryParser:
    """parse_query for one schema, remembering recent valid query strings.

    Clients repeat the same query strings (pages, revalidations); validating one costs
    more than the rest of a 304. Only short, valid strings are kept, at most 1024.
    """

    MAX_ENTRIES = 1024
    MAX_LENGTH = 512

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self._known: dict[str, dict[str, Any]] = {}

    def __call__(self, raw_query: str, query: MultiDictProxy[str]) -> dict[str, Any]:
        """The validated parameters of a raw (still percent-encoded) query string.

        The key must be the raw string: decoded, ``a%26b`` and ``a&b`` would look alike.
        The result is shared between requests: treat it as read-only.
        """
        known = self._known.get(raw_query)
        if known is not None:
            return known
        data = parse_query(self.schema, query)
        if len(raw_query) <= self.MAX_LENGTH:
            if len(self._known) >= self.MAX_ENTRIES:
                self._known.pop(next(iter(self._known)))
            self._known[raw_query] = data
        return data


def parse_path_id(text: str) -> int:
    """Validate a path id: a decimal integer from 1 to 2^63-1 (contract.md 2).

    The field of PathId is used on its own: building a schema per request cost as much
    as the rest of a small request.
    """
    try:
        return int(_PATH_ID.deserialize(text))
    except ValidationError as exc:
        errors = {"id": [str(message) for message in exc.messages]}
        raise BadRequest(_summary(errors), errors=errors) from None


def _flat(messages: Any) -> dict[str, list[str]]:
    if isinstance(messages, dict):
        return {str(k): v if isinstance(v, list) else [str(v)] for k, v in messages.items()}
    return {"_query": [str(messages)]}


def _summary(errors: dict[str, list[str]]) -> str:
    return "Invalid parameter(s): " + ", ".join(errors) + "."


# ---- responses ---------------------------------------------------------------------


class VictimSchema(Schema):
    id = fields.Integer(required=True)
    first_name = fields.String(required=True)
    last_name = fields.String(required=True)
    email = fields.String(required=True)
    department = fields.String(required=True)


class CampaignEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    victim = fields.Nested(VictimSchema, required=True)


class CampaignSchema(Schema):
    id = fields.Integer(required=True)
    title = fields.String(required=True)
    launch_date = UtcTimestamp(required=True, metadata={"example": "2026-03-01T08:00:00Z"})


class EmployeeEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    campaign = fields.Nested(CampaignSchema, required=True)


class GroupSchema(Schema):
    name = fields.String(required=True)


class SectionSchema(Schema):
    title = fields.String(required=True)
    section_type = fields.String(required=True, validate=validate.OneOf(SECTION_TYPES))
    completed_at = StrictDate(required=True, allow_none=True)
    result = fields.Float(required=True, allow_none=True, validate=validate.Range(0, 100))
    status = fields.String(
        required=True, allow_none=True, validate=validate.OneOf(SECTION_STATUSES)
    )


class InscriptionSchema(Schema):
    victim_name = fields.String(required=True, metadata={"description": "first last"})
    victim_department = fields.String(required=True)
    course_title = fields.String(required=True)
    start_date = StrictDate(required=True)
    due_date = StrictDate(required=True, allow_none=True)
    status = fields.String(required=True, validate=validate.OneOf(INSCRIPTION_STATUSES))
    victim_email = fields.String(required=True)
    groups = fields.List(fields.Nested(GroupSchema), required=True)
    victim_country = fields.String(required=True)
    events = fields.List(fields.Nested(SectionSchema), required=True)


class ProblemSchema(Schema):
    type = fields.String(required=True, metadata={"example": "about:blank"})
    title = fields.String(required=True, metadata={"example": "Bad Request"})
    status = fields.Integer(required=True, metadata={"example": 400})
    detail = fields.String(required=True)
    request_id = fields.String(required=True)
    errors = fields.Dict(
        keys=fields.String(),
        values=fields.List(fields.String()),
        metadata={"description": "On a 400: the messages for each offending parameter."},
    )
