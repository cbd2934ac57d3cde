"""Query parameters: their schemas, and validation in the contract's order (contract.md 3).

The schemas also generate the OpenAPI document's parameters. Each one turns what it
validated into its endpoint's frozen dataclass (``parsed``), which the view reads; the
dataclasses are remembered per app (:class:`QueryParsers`): clients repeat the same
query strings.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from aiohttp import web
from marshmallow import Schema, ValidationError, fields, validates_schema
from multidict import MultiMapping

from ..data.campaigns import CampaignFilters
from ..data.changes import ChangeFilters
from ..data.employees import EmployeeFilters
from ..data.feed import FeedFilters
from ..data.fields import CommaList, DecimalId, StrictBool, StrictDate
from ..data.inscriptions import InscriptionFilters
from ..data.listings import Paging
from ..data.stats import (
    GROUPS,
    INTERVALS,
    MAX_BUCKETS,
    StatsFilters,
    buckets,
    default_window,
)
from ..data.vocabulary import AUTOMATION_FILTERS, DELIVERY_STATUSES, EVENT_TYPES
from .errors import BadRequest
from .formats import FORMAT_NAMES

MAX_PER_PAGE = 500
DEFAULT_PER_PAGE = 100
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100

Parsed = TypeVar("Parsed")


class Query(Schema, Generic[Parsed]):
    """A query string's schema; ``RANGES`` names the (from, to) date pairs it checks."""

    RANGES: ClassVar[tuple[tuple[str, str], ...]] = ()

    def parsed(self, data: dict[str, Any]) -> Parsed:
        """The endpoint's dataclass of the validated ``data`` (absent names not in it)."""
        raise NotImplementedError

    @validates_schema
    def ranges_in_order(self, data: dict[str, Any], **kwargs: Any) -> None:
        for low, high in self.RANGES:
            if low in data and high in data and data[low] > data[high]:
                raise ValidationError(
                    f"filter[{low}] is later than filter[{high}].", f"filter[{low}]"
                )


class Choice(fields.String):
    """One of a few names, in any letter case (given as the lower-case name)."""

    def __init__(self, choices: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.choices = choices

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, str) and value.lower() in self.choices:
            return value.lower()
        raise ValidationError(f"Must be one of: {', '.join(self.choices)}.")


class FormatQuery(Query[Parsed]):
    """What every listing accepts: the format of its answer (contract.md 14)."""

    format = Choice(
        FORMAT_NAMES,
        # No example: Swagger UI's Try it out would send it.
        metadata={"description": "json (default), csv or ndjson; wins over the Accept header."},
    )


class PagingQuery(FormatQuery[Parsed]):
    # No example or default in the document: Swagger UI's Try it out would send it, and
    # the events endpoints would always paginate.
    page = DecimalId(
        metadata={
            "description": "Page number, from 1. Default 1. The events endpoints answer "
            "with pages only when page or per_page is given, else with the whole array."
        }
    )
    per_page = DecimalId(
        maximum=MAX_PER_PAGE,
        metadata={"description": f"Records per page, 1 to {MAX_PER_PAGE}. Default 100."},
    )


def _captcha_filter(description: str) -> StrictBool:
    return StrictBool(data_key="filter[with_captcha]", metadata={"description": description})


EXCLUDES_CAPTCHA = "false excludes events with captcha verification."
REPORTS_WITHOUT_CAPTCHA = (
    "false leaves events with captcha verification out of every count and median "
    "(targets stay); true or absent counts them."
)


def _automation_filter(description: str) -> Choice:
    # The example is in words: one in the schema would be sent by Swagger UI's Try it out.
    return Choice(
        AUTOMATION_FILTERS,
        data_key="filter[automation]",
        metadata={"description": f"{description} Example: filter[automation]=exclude_suspected."},
    )


EXCLUDES_AUTOMATED = (
    "Leaves out events by the verdict decided when they were loaded: include (default) "
    "keeps every event; exclude_automated leaves out the automated ones; "
    "exclude_suspected the suspected and the automated ones (only human events stay)."
)
REPORTS_WITHOUT_AUTOMATED = (
    f"{EXCLUDES_AUTOMATED} An event left out leaves every count, rate, median and "
    "last_event_at; targets and campaigns stay, and automated_events and "
    "suspected_events count before any exclusion."
)


def _type_filter() -> CommaList:
    return CommaList(
        choices=EVENT_TYPES,
        data_key="filter[type]",
        metadata={"description": "Comma list of event types: open, click, report, fail."},
    )


@dataclass(frozen=True, slots=True)
class CampaignEvents:
    types: tuple[str, ...]  # each once, in the order given; empty: every type
    without_captcha: bool
    paging: Paging | None  # None: the whole array
    automation: str = "include"  # filter[automation]


class CampaignEventsQuery(PagingQuery[CampaignEvents]):
    with_captcha = _captcha_filter(EXCLUDES_CAPTCHA)
    automation = _automation_filter(EXCLUDES_AUTOMATED)
    type = _type_filter()

    def parsed(self, data: dict[str, Any]) -> CampaignEvents:
        types = tuple(dict.fromkeys(data.get("type", ())))
        without_captcha = data.get("with_captcha") is False
        return CampaignEvents(types, without_captcha, _paging(data), _automation(data))


@dataclass(frozen=True, slots=True)
class EmployeeEvents:
    paging: Paging | None  # None: the whole array
    automation: str = "include"


class EmployeeEventsQuery(PagingQuery[EmployeeEvents]):
    automation = _automation_filter(EXCLUDES_AUTOMATED)

    def parsed(self, data: dict[str, Any]) -> EmployeeEvents:
        return EmployeeEvents(_paging(data), _automation(data))


def _list_filter(name: str, what: str) -> CommaList:
    return CommaList(
        data_key=f"filter[{name}]",
        metadata={
            "description": f"Comma list of {what}; whole values, any letter case; double "
            "quotes around a value holding a comma or spaces at its ends (taken exactly: "
            '"" is the empty value); at most 100 values; any character but NUL (U+0000).'
        },
    )


def _date_filter(name: str, what: str, rules: str = "") -> StrictDate:
    """A date filter; ``rules``: the 400s its schema cannot state, in words."""
    description = f"{what} (YYYY-MM-DD, inclusive).{rules}"
    return StrictDate(data_key=f"filter[{name}]", metadata={"description": description})


class PersonFields(Schema):
    """The six person filters, shared by the inscriptions, the employee directory and
    their change feeds."""

    name = _list_filter("name", "employee first names")
    last_name = _list_filter("last_name", "employee last names")
    email = _list_filter("email", "employee email addresses")
    department = _list_filter("department", "departments")
    country = _list_filter("country", "countries")
    teams = _list_filter("teams", "team names (the employee is in any of them)")


PERSON_FILTERS = ("name", "last_name", "email", "department", "country", "teams")


class PersonQuery(PersonFields, PagingQuery[Parsed]):
    """A page of a listing that takes the person filters."""


@dataclass(frozen=True, slots=True)
class Inscriptions:
    filters: InscriptionFilters
    paging: Paging


class InscriptionsQuery(PersonQuery[Inscriptions]):
    RANGES = (
        ("from_inscription_date", "to_inscription_date"),
        ("from_due_date", "to_due_date"),
    )

    courses = _list_filter("courses", "course titles")
    from_inscription_date = _date_filter("from_inscription_date", "Inscriptions on or after")
    to_inscription_date = _date_filter("to_inscription_date", "Inscriptions on or before")
    from_due_date = _date_filter("from_due_date", "Due on or after")
    to_due_date = _date_filter("to_due_date", "Due on or before")

    def parsed(self, data: dict[str, Any]) -> Inscriptions:
        filters = InscriptionFilters(
            lists=_folded(data, (*PERSON_FILTERS, "courses")),
            from_inscription_date=data.get("from_inscription_date"),
            to_inscription_date=data.get("to_inscription_date"),
            from_due_date=data.get("from_due_date"),
            to_due_date=data.get("to_due_date"),
        )
        return Inscriptions(filters, _page(data))


def _minimum_filter(name: str, what: str) -> DecimalId:
    return DecimalId(
        minimum=0,
        data_key=f"filter[{name}]",
        metadata={
            "description": f"Only employees who {what} in at least this many distinct "
            "campaigns (0 to 2^63-1; 0 keeps everybody)."
        },
    )


@dataclass(frozen=True, slots=True)
class Employees:
    filters: EmployeeFilters
    paging: Paging


class EmployeesQuery(PersonQuery[Employees]):
    min_clicked = _minimum_filter("min_clicked", "clicked")
    min_failed = _minimum_filter("min_failed", "failed")
    automation = _automation_filter(REPORTS_WITHOUT_AUTOMATED)

    def parsed(self, data: dict[str, Any]) -> Employees:
        filters = EmployeeFilters(
            lists=_folded(data, PERSON_FILTERS),
            min_clicked=data.get("min_clicked", 0),
            min_failed=data.get("min_failed", 0),
            automation=_automation(data),
        )
        return Employees(filters, _page(data))


@dataclass(frozen=True, slots=True)
class Employee:
    automation: str = "include"


class OneObjectQuery(Query[Parsed]):
    """A single-object report: ``format`` is read so that csv or ndjson get a 406 that
    points to the list, not a 400 for an unknown parameter."""

    format = Choice(
        FORMAT_NAMES,
        metadata={"description": "json, the default and only format of one object (csv or "
                  "ndjson: 406, pointing to the list, which answers in them).", "enum": ["json"]},
    )  # fmt: skip


class EmployeeQuery(OneObjectQuery[Employee]):
    automation = _automation_filter(REPORTS_WITHOUT_AUTOMATED)

    def parsed(self, data: dict[str, Any]) -> Employee:
        return Employee(_automation(data))


@dataclass(frozen=True, slots=True)
class Campaigns:
    filters: CampaignFilters
    paging: Paging


class CampaignsQuery(PagingQuery[Campaigns]):
    RANGES = (("from_launch_date", "to_launch_date"),)

    title = _list_filter("title", "campaign titles")
    from_launch_date = _date_filter("from_launch_date", "Launched on or after this UTC date")
    to_launch_date = _date_filter("to_launch_date", "Launched on or before this UTC date")
    with_captcha = _captcha_filter(REPORTS_WITHOUT_CAPTCHA)
    automation = _automation_filter(REPORTS_WITHOUT_AUTOMATED)

    def parsed(self, data: dict[str, Any]) -> Campaigns:
        filters = CampaignFilters(
            titles=_folded(data, ("title",)).get("title", ()),
            from_launch_date=data.get("from_launch_date"),
            to_launch_date=data.get("to_launch_date"),
            without_captcha=data.get("with_captcha") is False,
            automation=_automation(data),
        )
        return Campaigns(filters, _page(data))


@dataclass(frozen=True, slots=True)
class Campaign:
    without_captcha: bool
    automation: str = "include"


class CampaignQuery(OneObjectQuery[Campaign]):
    with_captcha = _captcha_filter(REPORTS_WITHOUT_CAPTCHA)
    automation = _automation_filter(REPORTS_WITHOUT_AUTOMATED)

    def parsed(self, data: dict[str, Any]) -> Campaign:
        return Campaign(data.get("with_captcha") is False, _automation(data))


@dataclass(frozen=True, slots=True)
class Courses:
    titles: Sequence[str]  # case-folded; empty: every course
    paging: Paging


class CoursesQuery(PagingQuery[Courses]):
    title = _list_filter("title", "course titles")

    def parsed(self, data: dict[str, Any]) -> Courses:
        return Courses(_folded(data, ("title",)).get("title", ()), _page(data))


@dataclass(frozen=True, slots=True)
class PartnerCompanies:
    names: Sequence[str]  # case-folded; empty: every company of the partner
    paging: Paging


class PartnerCompaniesQuery(PagingQuery[PartnerCompanies]):
    name = _list_filter("name", "company names")

    def parsed(self, data: dict[str, Any]) -> PartnerCompanies:
        return PartnerCompanies(_folded(data, ("name",)).get("name", ()), _page(data))


@dataclass(frozen=True, slots=True)
class Feed:
    filters: FeedFilters
    scope: str  # the filters' text a cursor is bound to
    limit: int
    cursor: str | None  # None: from the start


def _limit(what: str) -> DecimalId:
    return DecimalId(
        maximum=MAX_LIMIT,
        metadata={"description": f"{what} per answer, 1 to {MAX_LIMIT}. Default 100."},
    )


def _cursor() -> fields.String:
    return fields.String(
        metadata={
            "description": "X-Next-Cursor of the previous answer (opaque); absent: from the"
            " start. Bound to the key's company and to the filters it was given with."
        },
    )


class FeedQuery(FormatQuery[Feed]):
    RANGES = (("from_date", "to_date"),)

    limit = _limit("Events")
    cursor = _cursor()
    with_captcha = _captcha_filter(EXCLUDES_CAPTCHA)
    automation = _automation_filter(EXCLUDES_AUTOMATED)
    type = _type_filter()
    from_date = _date_filter("from_date", "Events on or after this UTC date")
    to_date = _date_filter("to_date", "Events on or before this UTC date")

    def parsed(self, data: dict[str, Any]) -> Feed:
        filters = FeedFilters.of(
            types=data.get("type", ()),
            without_captcha=data.get("with_captcha") is False,
            from_date=data.get("from_date"),
            to_date=data.get("to_date"),
            automation=_automation(data),
        )
        return Feed(filters, filters.scope(), data.get("limit", DEFAULT_LIMIT), data.get("cursor"))


@dataclass(frozen=True, slots=True)
class Changes:
    filters: ChangeFilters
    limit: int
    cursor: str | None  # None: from the start


class ChangesQuery(PersonFields, FormatQuery[Changes]):
    """A change feed: the event feed's limit and cursor, and the person filters."""

    limit = _limit("Records")
    cursor = _cursor()

    def parsed(self, data: dict[str, Any]) -> Changes:
        filters = ChangeFilters.of(_folded(data, PERSON_FILTERS))
        return Changes(filters, data.get("limit", DEFAULT_LIMIT), data.get("cursor"))


@dataclass(frozen=True, slots=True)
class Webhooks:
    paging: Paging


class WebhooksQuery(PagingQuery[Webhooks]):
    def parsed(self, data: dict[str, Any]) -> Webhooks:
        return Webhooks(_page(data))


@dataclass(frozen=True, slots=True)
class Deliveries:
    statuses: tuple[str, ...]  # sorted, each once; empty: every attempt
    paging: Paging


class DeliveriesQuery(PagingQuery[Deliveries]):
    status = CommaList(
        choices=DELIVERY_STATUSES,
        data_key="filter[status]",
        metadata={"description": "Comma list of attempt outcomes: succeeded, failed."},
    )

    def parsed(self, data: dict[str, Any]) -> Deliveries:
        return Deliveries(tuple(sorted(set(data.get("status", ())))), _page(data))


@dataclass(frozen=True, slots=True)
class Stats:
    """A stats query as given: the window's bounds are settled with today's date."""

    interval: str
    from_date: dt.date | None
    to_date: dt.date | None
    group_by: str | None
    lists: dict[str, list[str]]
    without_captcha: bool
    paging: Paging
    automation: str = "include"  # filter[automation] (phishing)


WIDE_WINDOW = f" A window of more than {MAX_BUCKETS} buckets: 400."


class StatsQuery(PersonQuery[Stats]):
    """The stats' parameters: the window, its buckets, the grouping, the person filters."""

    RANGES = (("from_date", "to_date"),)

    interval = Choice(
        INTERVALS,
        metadata={"description": "week (ISO weeks, from Monday), month (default), quarter or"
                  " year: the buckets of the window."},
    )  # fmt: skip
    from_date = _date_filter(
        "from_date",
        "The window's first UTC day, widened to the start of its bucket; default: the "
        "first day of the 12th month before the current one",
        WIDE_WINDOW,
    )
    # Given alone, it may fall before the default first day: the 400 names from_date.
    to_date = _date_filter(
        "to_date",
        "The window's last UTC day, widened to the end of its bucket; default: the last "
        "day of the current month",
        f"{WIDE_WINDOW} Earlier than filter[from_date], given or default: 400 naming "
        "filter[from_date].",
    )
    group_by = Choice(
        GROUPS,
        metadata={"description": "department, country or team: a row per bucket and group"
                  " value (absent: a row per bucket)."},
    )  # fmt: skip

    def parsed(self, data: dict[str, Any]) -> Stats:
        return Stats(
            interval=data.get("interval", "month"),
            from_date=data.get("from_date"),
            to_date=data.get("to_date"),
            group_by=data.get("group_by"),
            lists=_folded(data, PERSON_FILTERS),
            without_captcha=data.get("with_captcha") is False,
            paging=_page(data),
            automation=_automation(data),
        )


class PhishingStatsQuery(StatsQuery):
    with_captcha = _captcha_filter(REPORTS_WITHOUT_CAPTCHA)
    automation = _automation_filter(REPORTS_WITHOUT_AUTOMATED)


def stats_filters(query: Stats, today: dt.date) -> StatsFilters:
    """The query's buckets, from the window given or today's default; 400 past 120."""
    first, last = default_window(today)
    first, last = query.from_date or first, query.to_date or last
    if first > last:
        late = {"filter[from_date]": ["filter[from_date] is later than filter[to_date]."]}
        raise BadRequest(_summary(late), errors=late)
    found = buckets(first, last, query.interval, MAX_BUCKETS)
    if len(found) > MAX_BUCKETS:
        message = (
            f"The window holds more than {MAX_BUCKETS} buckets of a {query.interval}:"
            " narrow filter[from_date] and filter[to_date] or choose a longer interval."
        )
        names = ("interval", "filter[from_date]", "filter[to_date]")
        errors = {name: [message] for name in names}
        raise BadRequest(_summary(errors), errors=errors)
    return StatsFilters(found, query.group_by, query.lists, query.without_captcha, query.automation)


def _folded(data: dict[str, Any], names: Sequence[str]) -> dict[str, list[str]]:
    """The given list filters, case-folded (the form they match in)."""
    return {name: [value.casefold() for value in data[name]] for name in names if name in data}


def _automation(data: dict[str, Any]) -> str:
    return str(data.get("automation", "include"))


def _paging(data: dict[str, Any]) -> Paging | None:
    """The page asked for: the events endpoints paginate only when page or per_page is given."""
    return _page(data) if "page" in data or "per_page" in data else None


def _page(data: dict[str, Any]) -> Paging:
    return Paging(data.get("page", 1), data.get("per_page", DEFAULT_PER_PAGE))


class KeyQuery(Query[None]):
    """``/key`` takes no parameter: any one is 400, as an unknown parameter is elsewhere."""

    def parsed(self, data: dict[str, Any]) -> None:
        return None


class PathId(Schema):
    id = DecimalId(required=True)


_PATH_ID = PathId().fields["id"]


def parse_query(schema: Schema, query: MultiMapping[str]) -> dict[str, Any]:
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
            errors[name] = [f"Unknown parameter. Allowed: {', '.join(allowed) or 'none'}."]
        elif name in list_names:
            raw[name] = values
        elif len(values) > 1:
            errors[name] = ["Given more than once."]
        else:
            raw[name] = values[0]
    data: dict[str, Any]
    try:
        data = schema.load(raw)
    except ValidationError as exc:
        data = {}
        for name, messages in _flat(exc.messages).items():
            errors.setdefault(name, []).extend(messages)
    if errors:
        raise BadRequest(_summary(errors), errors=errors)
    return data


class QueryParsers:
    """Parsed query strings, remembered per app (the app keeps one under PARSERS).

    Clients repeat the same query strings (pages, revalidations); validating one costs
    more than the rest of a 304. Only short, valid strings are kept, at most 1024.
    """

    MAX_ENTRIES = 1024
    MAX_LENGTH = 512

    def __init__(self) -> None:
        self._known: dict[tuple[type[Schema], str], Any] = {}

    def parse(self, schema: Query[Parsed], request: web.Request) -> Parsed:
        """The request's query string for ``schema``, validated, as its dataclass.

        The key is the raw (still percent-encoded) string: decoded, ``a%26b`` and
        ``a&b`` would look alike. The result is shared between requests (it is frozen).
        """
        raw_query = request.rel_url.raw_query_string
        key = (type(schema), raw_query)
        known: Parsed | None = self._known.get(key)
        if known is not None:
            return known
        parsed = schema.parsed(parse_query(schema, request.query))
        if len(raw_query) <= self.MAX_LENGTH:
            if len(self._known) >= self.MAX_ENTRIES:
                self._known.pop(next(iter(self._known)))
            self._known[key] = parsed
        return parsed

    def parse_with_id(self, schema: Query[Parsed], request: web.Request) -> tuple[int, Parsed]:
        """The path's ``{id}`` and the query string: a bad id is reported first, alone."""
        return parse_path_id(request.match_info["id"]), self.parse(schema, request)


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
