"""GoPhish's campaign JSON as its REST API returns it, and a people CSV, read and checked.

Only the fields the import reads are checked (marshmallow); the rest of GoPhish's objects
(template, page, smtp, groups, ...) are ignored. Reading is bounded: a size cap, entries
checked one at a time, and at most MAX_PROBLEMS problems reported, so 50 MB of junk
gives a short refusal rather than millions of lines.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from ..data.fields import MAX_ID
from .fixture_format import MAX_IP, MAX_USER_AGENT, flatten_errors
from .staging import LoadError

# Parsed whole, an export takes about ten times its size in memory: 64 MiB of export
# stays under a gigabyte.
MAX_EXPORT_BYTES = 64 * 2**20
MAX_PEOPLE_BYTES = 64 * 2**20
MAX_PROBLEMS = 20
STOPPED = f"(stopped after {MAX_PROBLEMS} problems)"  # the last line of a refusal cut short

# The messages GoPhish writes to a campaign's timeline, and what each becomes here.
EVENT_OF_MESSAGE = {
    "Email Opened": "open",
    "Clicked Link": "click",
    "Submitted Data": "fail",
    "Email Reported": "report",
}
SENT_MESSAGE = "Email Sent"
SKIPPED_MESSAGES = ("Campaign Created", "Error Sending Email", "Proxied request")
KNOWN_MESSAGES = (*EVENT_OF_MESSAGE, SENT_MESSAGE, *SKIPPED_MESSAGES)

# RFC 3339 as Go's time.Time writes it: up to nine digits of fraction, Z or an offset;
# ASCII digits only (a bare \d also takes fullwidth and other scripts' digits).
_INSTANT = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_EARLIEST = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Instant:
    """A GoPhish instant in UTC: whole seconds (truncated) and the nanoseconds dropped."""

    utc: dt.datetime
    nanos: int

    @property
    def exact(self) -> str:
        """The full-precision UTC instant, the same whatever offset GoPhish wrote."""
        return f"{self.utc:%Y-%m-%dT%H:%M:%S}.{self.nanos:09d}Z"


class GoInstant(fields.Field):
    """An RFC 3339 instant; ``0001-01-01T00:00:00Z`` (Go's zero time, "unset") is None."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        match = _INSTANT.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise ValidationError("Not an RFC 3339 instant (YYYY-MM-DDTHH:MM:SS[.fraction]Z).")
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            offset = dt.timedelta() if zone == "Z" else _offset(zone)
            clock = (int(hour), int(minute), int(second))
            local = dt.datetime(int(year), int(month), int(day), *clock, tzinfo=dt.timezone(offset))
            utc = local.astimezone(dt.UTC)
        except (ValueError, OverflowError):
            raise ValidationError(f"{value} is not a real date and time.") from None
        nanos = int((fraction or "").ljust(9, "0"))
        if utc == dt.datetime.min.replace(tzinfo=dt.UTC) and nanos == 0:
            return None
        if utc < _EARLIEST:
            raise ValidationError(f"{value} is before 1970 (only the zero date means unset).")
        return Instant(utc, nanos)


def _offset(zone: str) -> dt.timedelta:
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = int(zone[1:3]), int(zone[4:6])
    if hours > 23 or minutes > 59:
        raise ValueError(zone)
    return sign * dt.timedelta(hours=hours, minutes=minutes)


class Entries(fields.Field):
    """A JSON array kept as it is: its entries are checked one by one, with a bound."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, list):
            raise ValidationError("Not a valid list.")
        return value


class _GoObject(Schema):
    class Meta:
        unknown = EXCLUDE


def _lone_surrogate(value: str) -> re.Match[str] | None:
    """Half of a character (JSON allows ``\\ud800`` alone): not text, and no store takes it."""
    return _SURROGATE.search(value)


def _text(value: str) -> None:
    if found := _lone_surrogate(value):
        raise ValidationError(f"Not text: a lone surrogate (U+{ord(found[0]):04X}).")
    if "\x00" in value:  # no text of the stores holds it: named here, where it was given
        raise ValidationError("Not text: a NUL character (U+0000).")


def _length(high: int, low: int = 0) -> list[Any]:
    return [_text, validate.Length(min=low or None, max=high)]


def mailbox(email: str) -> str:
    """The key that matches an email: its domain in any case, its local part in any ASCII
    letter case (``Straße@`` is not ``strasse@``, nor the Kelvin sign a ``k``)."""
    local, _, domain = email.rpartition("@")
    return f"{local.translate(_ASCII_LOWER)}@{domain.lower()}"


class CampaignHead(_GoObject):
    """A campaign without its entries (those are checked one by one)."""

    id = fields.Integer(required=True, strict=True, validate=validate.Range(1, MAX_ID))
    name = fields.String(required=True, validate=_length(500, 1))
    created_date = GoInstant(required=True)
    launch_date = GoInstant(required=True)
    results = Entries(load_default=list)
    timeline = Entries(load_default=list)


class ResultEntry(_GoObject):
    """One target of a campaign (GoPhish's Result)."""

    email = fields.Email(required=True, validate=_length(320))
    first_name = fields.String(load_default="", validate=_length(500))
    last_name = fields.String(load_default="", validate=_length(500))


class TimelineEntry(_GoObject):
    """One entry of a campaign's timeline (GoPhish's Event)."""

    email = fields.String(load_default="", validate=_length(320))
    time = GoInstant(required=True)
    message = fields.String(required=True, validate=validate.OneOf(KNOWN_MESSAGES))
    details = fields.String(load_default="", allow_none=True)


_HEAD, _RESULT, _ENTRY = CampaignHead(), ResultEntry(), TimelineEntry()


def browser_of(details: str | None) -> tuple[str | None, str | None]:
    """``(ip, user_agent)`` from an entry's details JSON; nulls when it has none.

    GoPhish writes ``{"payload": ..., "browser": {"address": ..., "user-agent": ...}}``,
    but an empty or unparsable string is not an error: it just carries no browser.
    """
    try:
        parsed = json.loads(details) if details else None
    except (ValueError, RecursionError):
        return None, None
    browser = parsed.get("browser") if isinstance(parsed, dict) else None
    if not isinstance(browser, dict):
        return None, None
    address = _browser_text(browser.get("address"))
    agent = _browser_text(browser.get("user-agent"))
    # Longer than any textual IP address is not one; a user agent is cut to what we keep.
    ip = address if address is not None and len(address) <= MAX_IP else None
    return ip, None if agent is None else agent[:MAX_USER_AGENT]


def _browser_text(value: Any) -> str | None:
    """A non-empty string that is text, else None."""
    if not isinstance(value, str) or not value or _lone_surrogate(value) or "\x00" in value:
        return None
    return value


class Problems(list[str]):
    """Problems found in one input, each ``source: path: cause``; stops at MAX_PROBLEMS."""

    def __init__(self, source: str | Path) -> None:
        super().__init__()
        self.source = str(source)

    def add(self, line: str) -> None:
        """Record one ``path: cause`` line."""
        self.append(f"{self.source}: {line}")
        if len(self) >= MAX_PROBLEMS:
            raise LoadError([*self, STOPPED])

    def check(self, schema: Schema, data: Any, path: str) -> Any:
        """Load ``data`` with ``schema``; on failure record one line per problem, return None."""
        try:
            return schema.load(data)
        except ValidationError as exc:
            for line in flatten_errors(exc.messages, path):
                self.add(line)
            return None

    def raise_any(self) -> None:
        """Refuse the whole input if anything was found."""
        if self:
            raise LoadError(list(self))


def refusal(*inputs: list[str]) -> LoadError:
    """One refusal of the problems of several inputs (the export, the people file, the
    command line), at most MAX_PROBLEMS of them listed in all."""
    found = [line for lines in inputs for line in lines if line != STOPPED]
    if len(found) > MAX_PROBLEMS or any(STOPPED in lines for lines in inputs):
        return LoadError([*found[:MAX_PROBLEMS], STOPPED])
    return LoadError(found)


def child(path: str, name: str) -> str:
    """The path of a member: ``[0]`` + ``results[2]`` is ``[0].results[2]``."""
    return f"{path}.{name}" if path else name


@dataclass
class Campaign:
    """One checked GoPhish campaign; ``path`` is where it is in the export (``[0]`` or "").

    ``refused`` holds the mailboxes of results refused for their format, so that their
    timeline entries are not reported a second time as strangers.
    """

    path: str
    head: dict[str, Any]
    results: list[dict[str, Any]]
    timeline: list[tuple[int, dict[str, Any]]]
    refused: set[str]


def _read_bytes(path: Path, limit: int) -> bytes:
    try:
        if path.stat().st_size > limit:
            raise LoadError([f"{path}: larger than {limit // 2**20} MiB"])
        return path.read_bytes()
    except OSError as exc:
        raise LoadError([f"{path}: cannot read: {exc.strerror}"]) from None


def read_export(path: Path, problems: Problems | None = None) -> list[Campaign]:
    """Parse and check an export: one campaign object or a list of them.

    The problems go to ``problems`` when given, for the caller to add the mapping's and
    refuse once; alone, the export is refused here if anything is wrong.
    """
    try:
        document = json.loads(_read_bytes(path, MAX_EXPORT_BYTES))
    except (ValueError, RecursionError) as exc:
        raise LoadError([f"{path}: not valid JSON: {str(exc)[:200]}"]) from None
    if isinstance(document, dict):
        items = [("", document)]
    elif isinstance(document, list):
        items = [(f"[{i}]", item) for i, item in enumerate(document)]
    else:
        raise LoadError([f"{path}: not a GoPhish campaign object or a list of them"])
    found = Problems(path) if problems is None else problems
    campaigns: list[Campaign] = []
    first_at: dict[int, str] = {}
    for where, item in items:
        campaign = _read_campaign(found, where, item)
        if campaign is None:
            continue
        gophish_id = campaign.head["id"]
        if gophish_id in first_at:
            first = first_at[gophish_id]
            found.add(f"{child(where, 'id')}: campaign {gophish_id} is also at {first}")
        first_at.setdefault(gophish_id, where)
        campaigns.append(campaign)
    if problems is None:
        found.raise_any()
    return campaigns


def _read_campaign(problems: Problems, where: str, item: Any) -> Campaign | None:
    head = problems.check(_HEAD, item, where)
    if head is None:
        return None
    results, refused = [], set()
    for i, raw in enumerate(head["results"]):
        result = problems.check(_RESULT, raw, child(where, f"results[{i}]"))
        if result is not None:
            results.append(result)
        elif isinstance(raw, dict) and isinstance(raw.get("email"), str):
            refused.add(mailbox(raw["email"]))
    timeline = [
        (i, problems.check(_ENTRY, raw, child(where, f"timeline[{i}]")))
        for i, raw in enumerate(head["timeline"])
    ]
    return Campaign(where, head, results, [(i, e) for i, e in timeline if e is not None], refused)


class PersonRow(Schema):
    """One row of the people CSV; an empty department or country cell means "not given"."""

    email = fields.Email(required=True, validate=_length(320))
    department = fields.String(load_default="", validate=_length(500))
    country = fields.String(load_default="", validate=_length(500))


def read_people(path: Path) -> dict[str, tuple[str | None, str | None]]:
    """``email,department,country`` rows (an HR export; other columns ignored), by email."""
    try:
        text = _read_bytes(path, MAX_PEOPLE_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LoadError([f"{path}: not UTF-8 text"]) from None
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip().lower() for name in reader.fieldnames or []]
        missing = [c for c in ("email", "department", "country") if c not in header]
        if missing:
            raise LoadError([f"{path}: line 1: the header lacks {', '.join(missing)}"])
        reader.fieldnames = header
        problems, people = Problems(path), {}
        first_line: dict[str, int] = {}
        for row in reader:
            line = reader.line_num
            wanted = {k: (row[k] or "").strip() for k in ("email", "department", "country")}
            person = problems.check(PersonRow(), wanted, f"line {line}")
            if person is None:
                continue
            key = mailbox(person["email"])
            if key in first_line:
                problems.add(f"line {line}.email: repeats line {first_line[key]}")
            first_line.setdefault(key, line)
            people[key] = (person["department"] or None, person["country"] or None)
    except csv.Error as exc:
        raise LoadError([f"{path}: line {reader.reader.line_num}: not CSV: {exc}"]) from None
    problems.raise_any()
    return people
