"""The interface's records in marshmallow: response bodies and the problem body.

These schemas generate the OpenAPI document and, in the tests, are the reference the
SQL-built JSON must equal (contract.md section 5).
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from ..data.automation import REASONS, VERDICTS
from ..data.fields import StrictDate, UtcTimestamp
from ..data.vocabulary import (
    DELIVERY_STATUSES,
    EVENT_TYPES,
    INSCRIPTION_STATUSES,
    SECTION_STATUSES,
    SECTION_TYPES,
)


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


class AutomationSchema(Schema):
    verdict = fields.String(
        required=True, validate=validate.OneOf(VERDICTS), metadata={"example": "automated"}
    )
    reasons = fields.List(
        fields.String(validate=validate.OneOf(REASONS)),
        required=True,
        metadata={"example": ["fast_after_sent"]},
    )


class FeedEventSchema(Schema):
    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True, metadata={"example": "2026-03-02T09:15:00Z"})
    with_captcha = fields.Boolean(required=True)
    ip = fields.String(required=True, allow_none=True, metadata={"example": "203.0.113.7"})
    user_agent = fields.String(required=True, allow_none=True)
    campaign = fields.Nested(CampaignSchema, required=True)
    victim = fields.Nested(VictimSchema, required=True)
    automation = fields.Nested(AutomationSchema, required=True)


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


class InscriptionChangeSchema(InscriptionSchema):
    """An inscription of the change feed: the record, its ids and its completion."""

    id = fields.Integer(required=True, metadata={"example": 12})
    employee_id = fields.Integer(required=True, metadata={"example": 7})
    course_id = fields.Integer(required=True, metadata={"example": 1})
    completed_at = StrictDate(
        required=True,
        allow_none=True,
        metadata={"description": "The latest completed_at of its sections once the "
                  "inscription is completed; null before (or when no section has one)."},
    )  # fmt: skip

    class Meta:
        fields = (*InscriptionSchema().fields, "id", "employee_id", "course_id", "completed_at")


class EventRowSchema(Schema):
    """An event of either events listing as an exported (CSV) row: its campaign and its
    employee both, so that exports of several campaigns or employees can be merged."""

    id = fields.Integer(required=True)
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True)
    campaign = fields.Nested(CampaignSchema, required=True)
    victim = fields.Nested(VictimSchema, required=True)


class InscriptionRowSchema(InscriptionSchema):
    """An inscription as exported (CSV) rows: the ids of the inscription, its employee and
    its course first, so that exports can be merged and deduplicated."""

    id = fields.Integer(required=True)
    victim_id = fields.Integer(required=True)
    course_id = fields.Integer(required=True)

    class Meta:
        fields = ("id", "victim_id", "course_id", *InscriptionSchema().fields)


# The listings whose exported rows carry more than their JSON records: the ids that tell
# rows of merged exports apart (a campaign's events: the campaign; an inscription: its ids).
EXPORTED_ROWS: dict[type[Schema], type[Schema]] = {
    CampaignEventSchema: EventRowSchema,
    EmployeeEventSchema: EventRowSchema,
    InscriptionSchema: InscriptionRowSchema,
}


def exported_rows(records: type[Schema]) -> type[Schema]:
    """The schema of a listing's CSV rows: its records', or the one with their ids."""
    return EXPORTED_ROWS.get(records, records)


def _count(description: str, example: int) -> fields.Integer:
    return fields.Integer(
        required=True,
        validate=validate.Range(min=0),
        metadata={"description": description, "example": example},
    )


def _rate(of: str, over: str, example: float) -> fields.Float:
    return fields.Float(
        required=True,
        allow_none=True,
        validate=validate.Range(0, 1),
        metadata={
            "description": f"{of} / {over}, rounded half up to 4 decimals; null when {over} is 0.",
            "example": example,
        },
    )


class FunnelSchema(Schema):
    """Targets, the four counts of people and their rates (contract.md 11)."""

    targets = _count("Employees the campaign was sent to.", 40)
    opened = _count("Targets with at least one open event.", 30)
    clicked = _count("Targets with at least one click event.", 12)
    reported = _count("Targets with at least one report event.", 8)
    failed = _count("Targets with at least one fail event.", 3)
    open_rate = _rate("opened", "targets", 0.75)
    click_rate = _rate("clicked", "targets", 0.3)
    report_rate = _rate("reported", "targets", 0.2)
    fail_rate = _rate("failed", "targets", 0.075)


# The funnel's fields in their order (Meta.fields below puts them between others).
FUNNEL: tuple[str, ...] = ("targets", "opened", "clicked", "reported", "failed")
FUNNEL += ("open_rate", "click_rate", "report_rate", "fail_rate")


def _median(kind: str, example: int) -> fields.Integer:
    return fields.Integer(
        required=True,
        allow_none=True,
        validate=validate.Range(min=0),
        metadata={
            "description": f"Median over the targets who {kind} of the seconds from "
            f"launch_date to their first {kind} event (the lower middle value of an even "
            "count; an event before the launch counts 0); null when nobody did.",
            "example": example,
        },
    )


class CampaignSummarySchema(FunnelSchema):
    """A campaign of the list (contract.md 11); the funnel's fields follow ``launch_date``."""

    id = fields.Integer(required=True, metadata={"example": 1})
    title = fields.String(required=True, metadata={"example": "Overdue Invoice Reminder"})
    launch_date = UtcTimestamp(required=True, metadata={"example": "2025-02-11T09:00:00Z"})
    median_seconds_to_first_click = _median("click", 5400)
    median_seconds_to_first_report = _median("report", 900)
    automated_events = _count(
        "The campaign's events whose verdict is automated (a mail-security gateway's or a "
        "script's), counted before any exclusion: events, not people.",
        4,
    )
    suspected_events = _count(
        "The campaign's events whose verdict is suspected (a burst or a shared address), "
        "counted before any exclusion: events, not people.",
        2,
    )

    class Meta:
        fields = (
            "id", "title", "launch_date", *FUNNEL,
            "median_seconds_to_first_click", "median_seconds_to_first_report",
            "automated_events", "suspected_events",
        )  # fmt: skip


class DepartmentSchema(FunnelSchema):
    """One department of a campaign's targets: the funnel without medians."""

    department = fields.String(required=True, metadata={"example": "Finance"})

    class Meta:
        fields = ("department", *FUNNEL)


class CampaignReportSchema(CampaignSummarySchema):
    """One campaign: the list's fields and ``by_department``, ordered by department."""

    by_department = fields.List(fields.Nested(DepartmentSchema), required=True)

    class Meta:
        fields = (*CampaignSummarySchema.Meta.fields, "by_department")


class PhishingSchema(Schema):
    campaigns = _count("Campaigns the employee was a target of.", 5)
    opened = _count("Distinct campaigns with an open event of the employee.", 4)
    clicked = _count("Distinct campaigns with a click event of the employee.", 2)
    reported = _count("Distinct campaigns with a report event of the employee.", 1)
    failed = _count("Distinct campaigns with a fail event of the employee.", 1)
    last_event_at = UtcTimestamp(
        required=True,
        allow_none=True,
        metadata={"description": "The employee's latest event, or null.",
                  "example": "2025-06-02T10:11:12Z"},
    )  # fmt: skip


class TrainingSchema(Schema):
    inscriptions = _count("The employee's course inscriptions.", 3)
    not_started = _count("Inscriptions not started.", 1)
    in_progress = _count("Inscriptions in progress.", 1)
    completed = _count("Inscriptions completed.", 1)
    overdue = _count("Inscriptions not completed whose due date is before today (UTC).", 1)


class EmployeeChangeSchema(Schema):
    """An employee of the change feed: who they are and their teams (no figures)."""

    id = fields.Integer(required=True, metadata={"example": 7})
    first_name = fields.String(required=True, metadata={"example": "José"})
    last_name = fields.String(required=True, metadata={"example": "Núñez"})
    email = fields.String(required=True, metadata={"example": "jose.nunez@northwind.example"})
    department = fields.String(required=True, metadata={"example": "Finance"})
    country = fields.String(required=True, metadata={"example": "Spain"})
    groups = fields.List(
        fields.Nested(GroupSchema), required=True, metadata={"description": "Teams, by name."}
    )


class EmployeeSchema(EmployeeChangeSchema):
    """An employee of the directory with their people risk (contract.md 12)."""

    phishing = fields.Nested(PhishingSchema, required=True)
    training = fields.Nested(TrainingSchema, required=True)


class WebhookSchema(Schema):
    """A webhook subscription as the API shows it: never its secret nor its full URL."""

    id = fields.Integer(required=True, metadata={"example": 1})
    label = fields.String(required=True, metadata={"example": "SOC"})
    url_host = fields.String(
        required=True,
        metadata={"description": "The receiver's host name only.", "example": "soc.example.com"},
    )
    event_types = fields.List(
        fields.String(validate=validate.OneOf(EVENT_TYPES)),
        required=True,
        metadata={"example": ["fail", "report"]},
    )
    status = fields.String(
        required=True,
        validate=validate.OneOf(("enabled", "disabled", "failing")),
        metadata={"description": "failing: the retry schedule was spent (the operator "
                  "enables it again); disabled: by the operator, or the receiver said 410."},
    )  # fmt: skip
    last_success_at = UtcTimestamp(required=True, allow_none=True)
    last_failure_at = UtcTimestamp(required=True, allow_none=True)
    consecutive_failures = _count("Failed attempts since the last success.", 0)


class DeliverySchema(Schema):
    """One attempt to deliver a message, as the sender logged it."""

    id = fields.Integer(required=True, metadata={"example": 10})
    message_id = fields.String(
        required=True,
        metadata={"description": "webhook-id: the same for every attempt of a message.",
                  "example": "msg_671_1001"},
    )  # fmt: skip
    event_id = fields.Integer(required=True, metadata={"example": 1001})
    attempt = fields.Integer(required=True, metadata={"example": 1})
    attempted_at = UtcTimestamp(required=True)
    status = fields.String(required=True, validate=validate.OneOf(DELIVERY_STATUSES))
    response_status = fields.Integer(
        required=True, allow_none=True, metadata={"description": "null: no answer came."}
    )
    error = fields.String(
        required=True, allow_none=True, metadata={"description": "Why no answer came."}
    )


class CourseSchema(Schema):
    """A course with its training coverage (contract.md 12)."""

    id = fields.Integer(required=True, metadata={"example": 1})
    title = fields.String(required=True, metadata={"example": "Phishing Fundamentals"})
    sections = _count("Sections of the course.", 4)
    inscriptions = _count("Inscriptions in the course.", 60)
    not_started = _count("Inscriptions not started.", 10)
    in_progress = _count("Inscriptions in progress.", 20)
    completed = _count("Inscriptions completed.", 30)
    overdue = _count("Inscriptions not completed whose due date is before today (UTC).", 5)
    completion_rate = _rate("completed", "inscriptions", 0.5)
    average_result = fields.Float(
        required=True,
        allow_none=True,
        validate=validate.Range(0, 100),
        metadata={
            "description": "Mean of every non-null section result of the course's "
            "inscriptions, rounded half up to 1 decimal; null when there is none.",
            "example": 81.3,
        },
    )


class PartnerCompanySchema(Schema):
    """One of the partner's companies, its figures side by side with the others'."""

    id = fields.Integer(required=True, metadata={"example": 1})
    name = fields.String(required=True, metadata={"example": "Northwind Logistics"})
    employees = _count("Employees of the company.", 87)
    campaigns = _count("Campaigns of the company, of any date.", 4)
    last_launch_date = UtcTimestamp(
        required=True,
        allow_none=True,
        metadata={"description": "The latest campaign's launch; null: no campaign."},
    )
    sends = _count(
        "Targets of the campaigns launched in the last 12 months (see the description).", 120
    )
    click_rate = _rate("people who clicked, summed over those campaigns,", "sends", 0.2)
    fail_rate = _rate("people who failed, summed over those campaigns,", "sends", 0.1)
    report_rate = _rate("people who reported, summed over those campaigns,", "sends", 0.3)
    inscriptions = _count("Course inscriptions of the company.", 60)
    completion_rate = _rate("completed inscriptions", "inscriptions", 0.5)
    overdue = _count("Inscriptions not completed whose due date is before today (UTC).", 5)


class KeySchema(Schema):
    """The calling key, by RFC 7662's names (``client_id`` is its public prefix)."""

    active = fields.Boolean(
        required=True, metadata={"description": "Always true: an inactive key is answered 401."}
    )
    scope = fields.String(required=True, metadata={"example": "events:read reports:read"})
    client_id = fields.String(required=True, metadata={"example": "rk_sample_no"})
    label = fields.String(required=True)
    iat = fields.Integer(required=True, metadata={"description": "Made at (unix seconds)."})
    exp = fields.Integer(
        required=True,
        allow_none=True,
        metadata={"description": "Expires at (unix seconds); null: when revoked."},
    )
    company_id = fields.Integer(metadata={"description": "A company's key: its company."})
    partner_id = fields.Integer(metadata={"description": "A partner's key: its partner."})
    companies = fields.List(
        fields.Integer(),
        required=True,
        metadata={"description": "The companies the key reads, ascending."},
    )


def _group_field(name: str, example: str) -> fields.String:
    return fields.String(
        metadata={"description": f"The {name} of the row (only with group_by={name}).",
                  "example": example}
    )  # fmt: skip


def _period(which: str, example: str) -> StrictDate:
    return StrictDate(
        required=True,
        metadata={"description": f"The {which} day of the bucket (UTC, inclusive).",
                  "example": example},
    )  # fmt: skip


STATS_GROUPS = ("department", "country", "team")


class StatsRowSchema(Schema):
    """What every stats row starts with: its bucket, and its group when grouped."""

    period_start = _period("first", "2025-03-01")
    period_end = _period("last", "2025-03-31")
    department = _group_field("department", "Finance")
    country = _group_field("country", "Spain")
    team = _group_field("team", "Payments")


class PhishingStatsSchema(StatsRowSchema):
    """One bucket of the window (and one group, when grouped): its sends' funnel."""

    campaigns = _count("Campaigns launched in the bucket with a send in the row's group.", 3)
    sends = _count("Sends (campaign targets) of those campaigns in the row's group.", 40)
    people = _count("Distinct employees of those sends.", 25)
    opened = _count("Sends with at least one open event.", 30)
    clicked = _count("Sends with at least one click event.", 12)
    reported = _count("Sends with at least one report event.", 8)
    failed = _count("Sends with at least one fail event.", 3)
    open_rate = _rate("opened", "sends", 0.75)
    click_rate = _rate("clicked", "sends", 0.3)
    report_rate = _rate("reported", "sends", 0.2)
    fail_rate = _rate("failed", "sends", 0.075)
    median_seconds_to_first_click = _median("click", 5400)
    median_seconds_to_first_report = _median("report", 900)


class TrainingStatsSchema(StatsRowSchema):
    """One bucket of the window (and one group, when grouped): inscriptions due in it."""

    due = _count("Inscriptions whose due date is in the bucket.", 20)
    completed_on_time = _count(
        "Of those, completed on or before the due date (or completed without a known date).",
        14,
    )
    completed_late = _count("Of those, completed after the due date.", 2)
    not_completed = _count("Of those, not completed (whatever today's date).", 4)
    on_time_rate = _rate("completed_on_time", "due", 0.7)
    no_due_date = _count("Inscriptions without a due date whose start date is in the bucket.", 1)
    started = _count("Inscriptions whose start date is in the bucket.", 18)
    average_result = fields.Float(
        required=True,
        allow_none=True,
        validate=validate.Range(0, 100),
        metadata={
            "description": "Mean of every non-null section result of the inscriptions due "
            "in the bucket, rounded half up to 1 decimal; null when there is none.",
            "example": 78.5,
        },
    )


def stats_rows(schema: type[Schema], group_by: str | None) -> type[Schema]:
    """The schema of the rows actually sent: the group's key only when grouped by it."""
    names = tuple(n for n in schema().fields if n not in STATS_GROUPS or n == group_by)
    meta = type("Meta", (), {"fields": names})
    suffix = f"By{group_by.title()}" if group_by else "Rows"
    return type(
        f"{schema.__name__.removesuffix('Schema')}{suffix}Schema", (schema,), {"Meta": meta}
    )


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
