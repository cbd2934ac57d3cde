"""marshmallow schemas of the fixture file format (see the README, "Fixture format")."""

from __future__ import annotations

from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from ..data.fields import MAX_ID, StrictDate, UtcTimestamp
from ..data.schema import EVENT_TYPES, INSCRIPTION_STATUSES, SECTION_STATUSES, SECTION_TYPES


def _id(**kwargs: Any) -> fields.Integer:
    return fields.Integer(required=True, strict=True, validate=validate.Range(1, MAX_ID), **kwargs)


def _text() -> fields.String:
    return fields.String(required=True, validate=validate.Length(min=1, max=500))


class Record(Schema):
    class Meta:
        unknown = RAISE


class CompanyRecord(Record):
    id = _id()
    name = _text()


class ApiKeyRecord(Record):
    company_id = _id()
    label = _text()
    key = fields.String(required=True, validate=validate.Length(min=16, max=200))


class EmployeeRecord(Record):
    id = _id()
    company_id = _id()
    first_name = _text()
    last_name = _text()
    email = fields.Email(required=True)
    department = _text()
    country = _text()


class TeamRecord(Record):
    id = _id()
    company_id = _id()
    name = _text()


class TeamMemberRecord(Record):
    team_id = _id()
    employee_id = _id()


class CampaignRecord(Record):
    id = _id()
    company_id = _id()
    title = _text()
    launch_date = UtcTimestamp(required=True)


class CampaignEventRecord(Record):
    id = _id()
    campaign_id = _id()
    employee_id = _id()
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    timestamp = UtcTimestamp(required=True)
    with_captcha = fields.Boolean(required=True, truthy={True}, falsy={False})


class CourseRecord(Record):
    id = _id()
    company_id = _id()
    title = _text()


class CourseSectionRecord(Record):
    id = _id()
    course_id = _id()
    title = _text()
    section_type = fields.String(required=True, validate=validate.OneOf(SECTION_TYPES))
    position = fields.Integer(required=True, strict=True, validate=validate.Range(0, 10_000))


class InscriptionRecord(Record):
    id = _id()
    employee_id = _id()
    course_id = _id()
    start_date = StrictDate(required=True)
    due_date = StrictDate(required=True, allow_none=True)
    status = fields.String(required=True, validate=validate.OneOf(INSCRIPTION_STATUSES))

    @validates_schema
    def due_after_start(self, data: dict[str, Any], **kwargs: Any) -> None:
        due = data.get("due_date")
        if due is not None and "start_date" in data and due < data["start_date"]:
            raise ValidationError("The due date is before the start date.", "due_date")


class SectionResultRecord(Record):
    inscription_id = _id()
    section_id = _id()
    completed_at = StrictDate(required=True, allow_none=True)
    result = fields.Float(
        required=True, allow_none=True, allow_nan=False, validate=validate.Range(0, 100)
    )
    status = fields.String(
        required=True, allow_none=True, validate=validate.OneOf(SECTION_STATUSES)
    )

    @validates_schema
    def status_with_result(self, data: dict[str, Any], **kwargs: Any) -> None:
        both = "result" in data and "status" in data
        if both and (data["result"] is None) != (data["status"] is None):
            raise ValidationError("status is null exactly when result is null.", "status")


def _table(record: type[Schema]) -> fields.List:
    return fields.List(fields.Nested(record), load_default=list)


class FixtureFile(Record):
    """One fixture document: every table optional, records keyed by their ids."""

    companies = _table(CompanyRecord)
    api_keys = _table(ApiKeyRecord)
    employees = _table(EmployeeRecord)
    teams = _table(TeamRecord)
    team_members = _table(TeamMemberRecord)
    campaigns = _table(CampaignRecord)
    campaign_events = _table(CampaignEventRecord)
    courses = _table(CourseRecord)
    course_sections = _table(CourseSectionRecord)
    inscriptions = _table(InscriptionRecord)
    section_results = _table(SectionResultRecord)


def flatten_errors(messages: Any, path: str = "") -> list[str]:
    """Turn marshmallow's nested messages into ``table[17].field: message`` lines."""
    if isinstance(messages, dict):
        lines = []
        for key, value in messages.items():
            if isinstance(key, int):
                child = f"{path}[{key}]"
            elif key == "_schema":
                child = path
            else:
                child = f"{path}.{key}" if path else str(key)
            lines.extend(flatten_errors(value, child))
        return lines
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{path or '(document)'}: {m}" for m in messages]
    if isinstance(messages, list):
        return [line for m in messages for line in flatten_errors(m, path)]
    return [f"{path or '(document)'}: {messages}"]
