"""Small helpers shared by the test modules: sample facts, databases, requests, error checks."""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from app.tools.loader import SAMPLE_FIXTURE, load_files

KEY_1 = "rk_sample_northwind_7f3c9a1e5b2d4c6f8a0b"  # company 1, Northwind Logistics
KEY_2 = "rk_sample_bluefin_2d8e6a4c0b9f7e5d3c1a"  # company 2, Bluefin Health
KEYS = {1: KEY_1, 2: KEY_2}
KEY_PARTNER = "rk_sample_harbour_5c1e9b7d3a8f6e4d2b0c"  # partner 1, reads companies 1 and 2
API = "/api/companies/v1"
DATA_TABLES = (
    "companies",
    "api_keys",
    "employees",
    "teams",
    "team_members",
    "campaigns",
    "campaign_events",
    "courses",
    "course_sections",
    "inscriptions",
    "section_results",
)
PROBLEM_KEYS = {"type", "title", "status", "detail", "request_id"}
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    412: "Precondition Failed",
    414: "Request-URI Too Long",  # Python's phrase; the parser's limits (issue 11)
    403: "Forbidden",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@cache
def sample() -> dict[str, Any]:
    """The sample fixture, parsed: the independent source of expected answers."""
    return json.loads(SAMPLE_FIXTURE.read_text(encoding="utf-8"))


def by_id(table: str, data: Mapping[str, list[dict[str, Any]]] | None = None) -> dict[int, Any]:
    """A fixture table (of the sample unless ``data`` is given) indexed by id."""
    return {row["id"]: row for row in (sample() if data is None else data)[table]}


def team_names_by_employee(data: Mapping[str, list[dict[str, Any]]]) -> dict[int, list[str]]:
    """Each employee's team names, in team_members order: what ``groups`` is made of."""
    names = {t["id"]: t["name"] for t in data["teams"]}
    teams: dict[int, list[str]] = {}
    for member in data["team_members"]:
        teams.setdefault(member["employee_id"], []).append(names[member["team_id"]])
    return teams


def next_event_id() -> int:
    """The first event id the sample does not use."""
    return max(e["id"] for e in sample()["campaign_events"]) + 1


def generated_events(count: int, campaigns: list[int], first_id: int) -> list[dict[str, Any]]:
    """Synthetic events for sample campaigns, each by an employee of the right company."""
    gen = random.Random(count)
    owner = {c["id"]: c["company_id"] for c in sample()["campaigns"]}
    staff: dict[int, list[int]] = {}
    for person in sample()["employees"]:
        staff.setdefault(person["company_id"], []).append(person["id"])
    start = datetime(2025, 1, 1, tzinfo=UTC)
    events = []
    for event_id in range(first_id, first_id + count):
        campaign = gen.choice(campaigns)
        moment = start + timedelta(seconds=gen.randrange(300 * 86400))
        events.append(
            {
                "id": event_id,
                "campaign_id": campaign,
                "employee_id": gen.choice(staff[owner[campaign]]),
                "type": gen.choice(("open", "click", "report", "fail")),
                "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "with_captcha": gen.random() < 0.3,
            }
        )
    return events


def make_sample_db(directory: Path, template_dir: Path | None = None) -> Path:
    """A fresh database holding the sample data, made by the real loader."""
    path = directory / "sample.sqlite3"
    if template_dir is not None:
        template = template_dir / "template.sqlite3"
        if not template.exists():
            load_files(template, [SAMPLE_FIXTURE])
        shutil.copy(template, path)
    else:
        load_files(path, [SAMPLE_FIXTURE])
    return path


def query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one query on a fresh connection and close it again."""
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def dump_tables(
    db: Path, tables: Iterable[str] | None = None, without: tuple[str, ...] = ()
) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables (default: all of them), ordered by every column: comparable.
    The columns ``without`` names are left out."""
    conn = sqlite3.connect(db)
    try:
        if tables is None:
            listed = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")
            tables = [name for (name,) in listed]
        rows = {}
        for table in tables:
            described = conn.execute(f"SELECT * FROM {table} LIMIT 0").description
            columns = ", ".join(d[0] for d in described if d[0] not in without)
            rows[table] = conn.execute(
                f"SELECT {columns} FROM {table} ORDER BY {columns}"
            ).fetchall()
        return rows
    finally:
        conn.close()


class Day:
    """A clock the test sets, for app[TODAY]: overdue inscriptions depend on the date."""

    def __init__(self, day: date) -> None:
        self.day = day

    def __call__(self) -> date:
        return self.day


async def get(
    client: TestClient, path: str, key: str | None = KEY_1, **headers: str
) -> ClientResponse:
    """GET with an optional X-API-KEY; the body is read so the connection is reused."""
    if key is not None:
        headers["X-API-KEY"] = key
    response = await client.get(path, headers=headers)
    await response.read()
    return response


async def comparable(
    client: TestClient, path: str, key: str | None = KEY_1, **headers: str
) -> tuple[int, list[tuple[str, str]], Any]:
    """Status, headers and body of an answer, minus what differs between any two requests.

    Two answers equal in this form are indistinguishable to a client (contract.md 1).
    """
    response = await get(client, path, key, **headers)
    body = await response.json(content_type=None)
    if isinstance(body, dict):
        assert body.pop("request_id", None) in (None, response.headers["X-Request-ID"])
    moving = ("Date", "X-Request-ID", "RateLimit-Remaining", "RateLimit", "RateLimit-Reset")
    kept = sorted((k, v) for k, v in response.headers.items() if k not in moving)
    return response.status, kept, body


async def assert_problem(response: ClientResponse, status: int) -> dict[str, Any]:
    """Check the one problem+json shape of contract.md 5 and return the body."""
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"] == "application/problem+json; charset=utf-8"
    body = await response.json(content_type=None)
    assert set(body) >= PROBLEM_KEYS, body
    assert set(body) - PROBLEM_KEYS <= {"errors"}, body
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["title"] == TITLES[status]
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert isinstance(body["detail"], str) and body["detail"]
    text = json.dumps(body)
    for leak in ("Traceback", "SELECT ", "sqlite", ".py", "/work/", "/tmp/"):
        assert leak not in text, text
    return body


# What schema version 7 added (inscriptions' completion dates, the teams' index,
# PostgreSQL's unixepoch; partners, scoped keys, folded company names; the change feeds'
# triggers, places and the webhook tables): dropped again by the tests that make an older
# database. The hooks' block goes first: its triggers read the completion date.
# -- hooks' block: the triggers by table (SQLite has one more for deletions).
CHANGE_TRIGGERS = {
    "inscriptions_moved": "inscriptions",
    "section_results_added": "section_results",
    "section_results_changed": "section_results",
    "employees_moved": "employees",
    "team_members_added": "team_members",
    "team_members_changed": "team_members",
    "teams_renamed": "teams",
}
_SQLITE_ONLY_TRIGGERS = ("section_results_removed", "team_members_removed")
HOOKS_SINCE_VERSION_6 = (
    *(f"DROP TRIGGER IF EXISTS {name}" for name in (*CHANGE_TRIGGERS, *_SQLITE_ONLY_TRIGGERS)),
    *(
        f"DROP INDEX IF EXISTS {t}_{kind}"
        for t in ("inscriptions", "employees")
        for kind in ("by_seq", "unplaced")
    ),
    "ALTER TABLE inscriptions DROP COLUMN seq",
    "ALTER TABLE employees DROP COLUMN seq",
    "DROP TABLE webhook_deliveries",
    "DROP TABLE webhooks",
)
PG_HOOKS_SINCE_VERSION_6 = (
    *(f"DROP TRIGGER IF EXISTS {name} ON {table}" for name, table in CHANGE_TRIGGERS.items()),
    "DROP TABLE webhook_deliveries, webhooks",
    "ALTER TABLE inscriptions DROP COLUMN seq",
    "ALTER TABLE employees DROP COLUMN seq",
)
# -- stats' block
STATS_SINCE_VERSION_6 = (
    "ALTER TABLE inscriptions DROP COLUMN completed_at",
    "DROP INDEX IF EXISTS teams_by_company",
)
# -- keys' block: partner keys go, api_keys takes version 6's shape again (company_id not
# null, no scopes), partners and the folded company names go.
KEYS_SINCE_VERSION_6 = (
    "CREATE TABLE api_keys_6 (id INTEGER PRIMARY KEY,"
    " company_id INTEGER NOT NULL REFERENCES companies(id),"
    " key_hash TEXT NOT NULL UNIQUE CHECK (length(key_hash) = 64), prefix TEXT NOT NULL,"
    " label TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT, expires_at TEXT)",
    "INSERT INTO api_keys_6 SELECT id, company_id, key_hash, prefix, label, created_at,"
    " revoked_at, expires_at FROM api_keys WHERE company_id IS NOT NULL",
    "DROP TABLE api_keys",
    "ALTER TABLE api_keys_6 RENAME TO api_keys",
    "CREATE INDEX api_keys_by_company ON api_keys (company_id)",
    "DROP TABLE partner_companies",
    "DROP TABLE partners",
    "ALTER TABLE companies DROP COLUMN name_key",
)
PG_KEYS_SINCE_VERSION_6 = (
    "DELETE FROM api_keys WHERE company_id IS NULL",
    "ALTER TABLE api_keys DROP CONSTRAINT api_keys_one_owner, DROP COLUMN partner_id,"
    " DROP COLUMN scopes, ALTER COLUMN company_id SET NOT NULL",
    "DROP TABLE partner_companies, partners",
    "ALTER TABLE companies DROP COLUMN name_key",
)
# -- version 12: a campaign's index of events covers their listings (SQLite).
EVENTS_INDEX_SINCE_VERSION_12 = (
    "DROP INDEX IF EXISTS campaign_events_by_campaign",
    "CREATE INDEX campaign_events_by_campaign ON campaign_events (campaign_id, timestamp, id)",
)
SINCE_VERSION_6 = (
    *HOOKS_SINCE_VERSION_6,
    *STATS_SINCE_VERSION_6,
    *KEYS_SINCE_VERSION_6,
    *EVENTS_INDEX_SINCE_VERSION_12,
)
PG_SINCE_VERSION_6 = (
    *PG_HOOKS_SINCE_VERSION_6,
    *STATS_SINCE_VERSION_6,
    "DROP FUNCTION unixepoch(text)",
    *PG_KEYS_SINCE_VERSION_6,
)


def older_copy(db: Path, target: Path, undo: Iterable[str], version: int) -> Path:
    """A consistent copy of ``db`` (VACUUM INTO) taken back to schema ``version`` by the
    statements ``undo``."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("VACUUM INTO ?", (str(target),))
    conn.close()
    conn = sqlite3.connect(target, isolation_level=None)
    for statement in undo:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    return target


def _undo_version_11(integer: str, text: str) -> list[str]:
    """Version 10 kept every campaign's and every employee's sends per row of the stats
    in stats_members (version 11 keeps the campaigns' in stats_campaigns)."""
    return [
        f"""CREATE TABLE stats_members (company_id {integer} NOT NULL, span {text} NOT NULL,
        period_start {text} NOT NULL, gk {text} NOT NULL, gv {text} NOT NULL,
        kind {text} NOT NULL, member {integer} NOT NULL, n {integer} NOT NULL,
        PRIMARY KEY (company_id, span, gk, period_start, gv, kind, member))""",
        "INSERT INTO stats_members SELECT company_id, span, period_start, gk, gv, 'campaign',"
        " campaign_id, n FROM stats_campaigns",
        "INSERT INTO stats_members SELECT DISTINCT company_id, span, period_start, gk, gv,"
        " 'person', 1, 1 FROM stats_campaigns",
        "DROP TABLE stats_campaigns",
    ]


UNDO_VERSION_11 = _undo_version_11("INTEGER", "TEXT")
PG_UNDO_VERSION_11 = _undo_version_11("BIGINT", 'TEXT COLLATE "C"')


def version_6_copy(sample_db: Path, target: Path) -> Path:
    """A copy of the sample file made version 6 again (what version 7 added, dropped)."""
    return older_copy(sample_db, target, SINCE_VERSION_6, 6)


async def to_version_6(conn: Any) -> None:
    """Make a PostgreSQL sample database (an asyncpg connection's) version 6 again."""
    for statement in PG_SINCE_VERSION_6:
        await conn.execute(statement)
    await conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def _first(table: str, **changes: Any) -> Callable[[dict[str, Any]], None]:
    def edit(document: dict[str, Any]) -> None:
        document[table][0] |= changes

    return edit


def _new_team_member(document: dict[str, Any]) -> None:
    members = {(m["team_id"], m["employee_id"]) for m in document["team_members"]}
    team = document["teams"][0]
    employee = next(
        e["id"] for e in document["employees"]
        if e["company_id"] == team["company_id"] and (team["id"], e["id"]) not in members
    )  # fmt: skip
    document["team_members"].append({"team_id": team["id"], "employee_id": employee})


# One change to one row of the sample per table a load writes: each must move the data
# version, where the sample loaded again as it is must not (both stores' loaders).
ONE_ROW_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "companies": _first("companies", name="Northwind Logistics Ltd"),
    "partners": _first("partners", name="Harbour Security"),
    "api_keys": _first("api_keys", label="renamed"),
    "employees": _first("employees", department="Finance"),
    "teams": _first("teams", name="Red Team"),
    "team_members": _new_team_member,
    "campaigns": _first("campaigns", title="Overdue Invoice"),
    "campaign_targets": _first("campaign_targets", sent_at="2025-02-11T09:05:00Z"),
    "campaign_events": _first("campaign_events", type="click"),
    "courses": _first("courses", title="Phishing Basics"),
    "course_sections": _first("course_sections", position=9),
    "inscriptions": _first("inscriptions", due_date="2025-06-20"),
    "section_results": _first("section_results", completed_at="2025-04-19"),
}
