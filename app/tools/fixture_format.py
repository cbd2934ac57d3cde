"""marshmallow schemas of the fixture file format (docs/data.md, "Fixture format").

Every record of a load goes through these schemas, so their fields are lean: each checks
its value in one ``_deserialize`` (no separate validator objects) and returns the text the
database stores, which keeps validation to a few microseconds a record.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any, ClassVar

from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    missing,
    validate,
    validates_schema,
)

from ..data.api_keys import SCOPES
from ..data.fields import MAX_SAFE_ID, one_line_label
from ..data.vocabulary import EVENT_TYPES, INSCRIPTION_STATUSES, SECTION_STATUSES, SECTION_TYPES
from .marshmallow_shim import value_loader

# ASCII digits only: a bare \d also takes fullwidth and other scripts' digits.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_INSTANT = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})Z", re.ASCII)
MAX_TEXT = 500
MAX_IP = 45  # the longest textual IPv6 address (IPv4-mapped, full form)
MAX_USER_AGENT = 1000
MIN_RESULT = 0.0001  # the smallest result above 0 both stores print alike


class Id(fields.Field):
    """A JSON integer from 1 to 2^53-1, exact in every JSON reader (``true`` and ``1.0`` are
    not integers)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if type(value) is not int:
            raise ValidationError("Not a valid integer.")
        if not 1 <= value <= MAX_SAFE_ID:
            raise ValidationError(f"Must be from 1 to {MAX_SAFE_ID}.")
        return value


class Text(fields.Field):
    """A JSON string of ``low`` to ``high`` characters."""

    def __init__(self, low: int = 1, high: int = MAX_TEXT, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.low, self.high = low, high

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if type(value) is not str:
            raise ValidationError("Not a valid string.")
        if not self.low <= len(value) <= self.high:
            raise ValidationError(f"Length must be between {self.low} and {self.high}.")
        if "\x00" in value:  # PostgreSQL's text cannot hold it: refused on both stores
            raise ValidationError("Contains a NUL character (\\u0000).")
        return value


class Label(Text):
    """A company's or a partner's name, or a key's label: one line of printable characters,
    not blank, as the importer's ``--company-name`` and the key tool's ``--label`` (the
    dashboard and the tools show each on one line)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if not (text.strip() and one_line_label(text)):
            raise ValidationError("Must be one line of printable characters, not blank.")
        return text


class Choice(fields.Field):
    """One of a fixed set of strings."""

    def __init__(self, choices: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.choices = frozenset(choices)
        self.message = f"Must be one of: {', '.join(choices)}."

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if type(value) is not str or value not in self.choices:
            raise ValidationError(self.message)
        return value


class Flag(fields.Field):
    """JSON ``true`` or ``false`` and nothing else."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if type(value) is not bool:
            raise ValidationError("Not a valid boolean.")
        return value


class Position(fields.Field):
    """A section's place in its course: an integer from 0 to 10,000."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if type(value) is not int or not 0 <= value <= 10_000:
            raise ValidationError("Must be an integer from 0 to 10000.")
        return value


class Score(fields.Field):
    """A result, 0 or from 0.0001 to 100 (a JSON number, not a boolean): below 0.0001 the
    stores print it apart (SQLite ``1.0e-05``, PostgreSQL ``0.00001``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise ValidationError("Not a valid number.")
        if not (value == 0 or MIN_RESULT <= value <= 100):
            raise ValidationError("Must be 0 or from 0.0001 to 100.")
        return float(value)


class Day(fields.Field):
    """A real calendar date written exactly ``YYYY-MM-DD``; stored as that text."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if type(value) is not str or not _DATE.fullmatch(value):
            raise ValidationError("Not a date in the form YYYY-MM-DD.")
        try:
            dt.date.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{value} is not a real calendar date.") from None
        return value


class Instant(fields.Field):
    """A UTC instant written exactly ``YYYY-MM-DDTHH:MM:SSZ``; stored as that text."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        found = _INSTANT.fullmatch(value) if type(value) is str else None
        if found is None:
            raise ValidationError("Not a UTC timestamp in the form YYYY-MM-DDTHH:MM:SSZ.")
        day, hours, minutes, seconds = found.groups()
        try:
            dt.date.fromisoformat(day)
        except ValueError:
            raise ValidationError(f"{value} is not a real date and time.") from None
        if hours > "23" or minutes > "59" or seconds > "59":
            raise ValidationError(f"{value} is not a real date and time.")
        return found.string


class Record(Schema):
    """A fixture record: unknown fields refused; ``quick_load`` for the plainly valid ones."""

    class Meta:
        unknown = RAISE

    # The @validates_schema methods, which quick_load calls too.
    record_checks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._names = frozenset(self.load_fields)
        self._plan = [
            (name, value_loader(f), f.required, f.allow_none, f.load_default)
            for name, f in self.load_fields.items()
        ]

    def handle_error(self, error: ValidationError, data: Any, *, many: bool, **kwargs: Any) -> None:
        """Name a record's unknown fields in its own order: marshmallow finds them through a
        set, whose order changes with each process's PYTHONHASHSEED."""
        messages = error.messages
        if many or not isinstance(messages, dict) or not isinstance(data, dict):
            return
        unknown = [name for name in data if name in messages and name not in self._names]
        ordered = {k: v for k, v in messages.items() if k not in unknown}
        ordered.update((name, messages[name]) for name in unknown)
        raise ValidationError(ordered, data=error.data, valid_data=error.valid_data)

    def quick_load(self, data: Any) -> dict[str, Any] | None:
        """What ``load`` returns for a plainly valid record, or None: then call ``load``.

        The same field code checks every value; only marshmallow's per-record machinery
        (error collection, hooks) is skipped, which is most of its cost. Anything unusual
        (a missing, unknown or invalid field) returns None, and ``load`` says what is wrong.
        tests/test_fixture_format.py proves the two agree.
        """
        if type(data) is not dict or not data.keys() <= self._names:
            return None
        out: dict[str, Any] = {}
        try:
            for name, load, required, nullable, default in self._plan:
                value = data.get(name, missing)
                if value is missing:
                    if required or callable(default):
                        return None
                    if default is not missing:  # else left out, as load leaves it
                        out[name] = default
                elif value is None:
                    if not nullable:
                        return None
                    out[name] = None
                else:
                    out[name] = load(value, name, data)
            for check in self.record_checks:
                getattr(self, check)(out)
        except ValidationError:
            return None
        return out


class CompanyRecord(Record):
    id = Id(required=True)
    name = Label(required=True)


class PartnerRecord(Record):
    id = Id(required=True)
    name = Label(required=True)


class PartnerCompanyRecord(Record):
    partner_id = Id(required=True)
    company_id = Id(required=True)


class Scopes(Text):
    """Scope names, space-separated, each one of the API's (docs/interface.md)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        unknown = sorted(set(text.split()) - set(SCOPES))
        if unknown or not text.split():
            raise ValidationError(f"Scopes are among {', '.join(SCOPES)}.")
        return text


class ApiKeyRecord(Record):
    """A company's key or a partner's; ``scope`` absent: every scope."""

    company_id = Id(load_default=None)
    partner_id = Id(load_default=None)
    label = Label(required=True)
    key = Text(16, 200, required=True)
    scope = Scopes(load_default=None)
    record_checks = ("one_owner",)

    @validates_schema
    def one_owner(self, data: dict[str, Any], **kwargs: Any) -> None:
        if (data.get("company_id") is None) == (data.get("partner_id") is None):
            raise ValidationError("A key has a company_id or a partner_id (one of them).")


class EmployeeRecord(Record):
    # Names, department and country may be empty: imported people can lack them (GoPhish).
    id = Id(required=True)
    company_id = Id(required=True)
    first_name = Text(0, required=True)
    last_name = Text(0, required=True)
    # At most 500 characters, as every text: unbounded, a long address overflowed
    # PostgreSQL's index of e-mails (a btree entry holds at most 2704 bytes), so SQLite
    # loaded what PostgreSQL refused with a raw database error.
    email = fields.Email(required=True, validate=validate.Length(1, MAX_TEXT))
    department = Text(0, required=True)
    country = Text(0, required=True)


class TeamRecord(Record):
    id = Id(required=True)
    company_id = Id(required=True)
    name = Text(required=True)


class TeamMemberRecord(Record):
    team_id = Id(required=True)
    employee_id = Id(required=True)


class CampaignRecord(Record):
    id = Id(required=True)
    company_id = Id(required=True)
    title = Text(required=True)
    launch_date = Instant(required=True)


class CampaignTargetRecord(Record):
    """Who a campaign was sent to (contract.md 10); ``sent_at`` may be null or left out."""

    campaign_id = Id(required=True)
    employee_id = Id(required=True)
    sent_at = Instant(allow_none=True, load_default=None)


class CampaignEventRecord(Record):
    id = Id(required=True)
    campaign_id = Id(required=True)
    employee_id = Id(required=True)
    type = Choice(EVENT_TYPES, required=True)
    timestamp = Instant(required=True)
    with_captcha = Flag(required=True)
    ip = Text(1, MAX_IP, allow_none=True, load_default=None)
    user_agent = Text(1, MAX_USER_AGENT, allow_none=True, load_default=None)


class CourseRecord(Record):
    id = Id(required=True)
    company_id = Id(required=True)
    title = Text(required=True)


class CourseSectionRecord(Record):
    id = Id(required=True)
    course_id = Id(required=True)
    title = Text(required=True)
    section_type = Choice(SECTION_TYPES, required=True)
    position = Position(required=True)


class InscriptionRecord(Record):
    id = Id(required=True)
    employee_id = Id(required=True)
    course_id = Id(required=True)
    start_date = Day(required=True)
    due_date = Day(required=True, allow_none=True)
    status = Choice(INSCRIPTION_STATUSES, required=True)
    # Left out: the latest section completion of a completed inscription (docs/data.md).
    completed_at = Day(allow_none=True)
    record_checks = ("due_after_start", "completion_dated")

    @validates_schema
    def due_after_start(self, data: dict[str, Any], **kwargs: Any) -> None:
        due = data.get("due_date")
        if due is not None and "start_date" in data and due < data["start_date"]:
            raise ValidationError("The due date is before the start date.", "due_date")

    @validates_schema
    def completion_dated(self, data: dict[str, Any], **kwargs: Any) -> None:
        done = data.get("completed_at", missing)
        if done is missing or done is None:
            return
        if data.get("status", "completed") != "completed":
            raise ValidationError("Only a completed inscription has a completion date.",
                                  "completed_at")  # fmt: skip
        if "start_date" in data and done < data["start_date"]:
            raise ValidationError("The completion date is before the start date.",
                                  "completed_at")  # fmt: skip


class SectionResultRecord(Record):
    inscription_id = Id(required=True)
    section_id = Id(required=True)
    completed_at = Day(required=True, allow_none=True)
    result = Score(required=True, allow_none=True)
    status = Choice(SECTION_STATUSES, required=True, allow_none=True)
    record_checks = ("status_with_result",)

    @validates_schema
    def status_with_result(self, data: dict[str, Any], **kwargs: Any) -> None:
        both = "result" in data and "status" in data
        if both and (data["result"] is None) != (data["status"] is None):
            raise ValidationError("status is null exactly when result is null.", "status")


# Every table of the format, in the order a load writes them (parents first).
TABLES: dict[str, type[Record]] = {
    "companies": CompanyRecord,
    "partners": PartnerRecord,
    "partner_companies": PartnerCompanyRecord,
    "api_keys": ApiKeyRecord,
    "employees": EmployeeRecord,
    "teams": TeamRecord,
    "team_members": TeamMemberRecord,
    "campaigns": CampaignRecord,
    "campaign_targets": CampaignTargetRecord,
    "campaign_events": CampaignEventRecord,
    "courses": CourseRecord,
    "course_sections": CourseSectionRecord,
    "inscriptions": InscriptionRecord,
    "section_results": SectionResultRecord,
}


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
