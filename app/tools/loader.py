"""Load fixture files: validate every record, check every reference, write in one go.

A load is all or nothing. Nothing is written until every file has been validated and
every reference resolved (against the files and the database), and the writes happen
in one transaction, so any error leaves the database exactly as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from marshmallow import ValidationError

from ..config import OneLineParser
from ..data import api_keys as apikeys
from ..data.fields import TIMESTAMP_FORMAT
from ..data.schema import bump_data_version, connect_writer, write_transaction
from .cli import ToolError, command
from .fixture_format import FixtureFile, flatten_errors

# fixtures/ ships inside the package as app.fixtures (see pyproject.toml), so an
# installed wheel finds the sample as a clone does.
SAMPLE_FIXTURE = Path(str(resources.files("app.fixtures") / "sample.json"))

# Tables whose records carry their own company.
OWNED = ("employees", "teams", "campaigns", "courses")


class LoadError(ToolError):
    """A fixture could not be loaded; ``problems`` name file, record path and cause."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(*problems)


@dataclass
class Batch:
    """Validated records of all files, with where each came from (for error paths)."""

    tables: dict[str, list[tuple[str, dict[str, Any]]]] = field(default_factory=dict)

    def add(self, source: str, data: dict[str, list[dict[str, Any]]]) -> None:
        for table, records in data.items():
            rows = self.tables.setdefault(table, [])
            rows.extend((f"{source}: {table}[{i}]", r) for i, r in enumerate(records))

    def rows(self, table: str) -> list[tuple[str, dict[str, Any]]]:
        return self.tables.get(table, [])


def read_fixture(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Parse and validate one file; raise LoadError naming each bad record."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise LoadError([f"{path}: cannot read: {exc.strerror}"]) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LoadError([f"{path}: not valid JSON: {exc}"]) from None
    if not isinstance(document, dict):
        raise LoadError([f"{path}: the document must be a JSON object of tables"])
    try:
        tables: dict[str, list[dict[str, Any]]] = FixtureFile().load(document)
        return tables
    except ValidationError as exc:
        raise LoadError([f"{path}: {line}" for line in flatten_errors(exc.messages)]) from None


def load_files(db_path: str | Path, files: Iterable[str | Path]) -> dict[str, int]:
    """Validate the files and load them into the database in one transaction."""
    batch = Batch()
    problems: list[str] = []
    for name in files:
        try:
            batch.add(str(name), read_fixture(Path(name)))
        except LoadError as exc:
            problems.extend(exc.problems)
    if problems:
        raise LoadError(problems)
    conn = connect_writer(db_path)
    try:
        problems = check_references(conn, batch)
        if problems:
            raise LoadError(problems)
        return write(conn, batch)
    finally:
        conn.close()


def check_references(conn: sqlite3.Connection, batch: Batch) -> list[str]:
    """Find duplicate ids, unknown references and references across companies."""
    problems: list[str] = []
    owner: dict[str, dict[int, int]] = {}
    companies = {row[0] for row in conn.execute("SELECT id FROM companies")}
    problems += _duplicates(batch, "companies", ("id",))
    companies |= {r["id"] for _, r in batch.rows("companies")}
    for table in OWNED:
        owner[table] = dict(conn.execute(f"SELECT id, company_id FROM {table}"))
        problems += _duplicates(batch, table, ("id",))
        for where, record in batch.rows(table):
            if record["company_id"] not in companies:
                problems.append(f"{where}.company_id: unknown company {record['company_id']}")
            previous = owner[table].get(record["id"])
            if previous is not None and previous != record["company_id"]:
                problems.append(f"{where}.id: {record['id']} belongs to another company")
            owner[table][record["id"]] = record["company_id"]
    for where, record in batch.rows("api_keys"):
        if record["company_id"] not in companies:
            problems.append(f"{where}.company_id: unknown company {record['company_id']}")

    def company_of(table: str, where: str, column: str, value: int) -> int | None:
        company = owner[table].get(value)
        if company is None:
            problems.append(f"{where}.{column}: unknown {table[:-1].replace('_', ' ')} {value}")
        return company

    def same_company(where: str, refs: list[tuple[str, str, int]]) -> None:
        found = [company_of(table, where, column, value) for table, column, value in refs]
        if None not in found and len(set(found)) > 1:
            problems.append(f"{where}: {refs[0][1]} and {refs[1][1]} belong to different companies")

    problems += _duplicates(batch, "team_members", ("employee_id", "team_id"))
    for where, r in batch.rows("team_members"):
        same_company(
            where,
            [("employees", "employee_id", r["employee_id"]), ("teams", "team_id", r["team_id"])],
        )
    problems += _duplicates(batch, "campaign_events", ("id",))
    for where, r in batch.rows("campaign_events"):
        same_company(
            where,
            [
                ("campaigns", "campaign_id", r["campaign_id"]),
                ("employees", "employee_id", r["employee_id"]),
            ],
        )

    section_course = dict(conn.execute("SELECT id, course_id FROM course_sections"))
    problems += _duplicates(batch, "course_sections", ("id",))
    problems += _duplicates(batch, "course_sections", ("course_id", "position"))
    for where, r in batch.rows("course_sections"):
        if company_of("courses", where, "course_id", r["course_id"]) is not None:
            section_course[r["id"]] = r["course_id"]

    inscription_course = dict(conn.execute("SELECT id, course_id FROM inscriptions"))
    problems += _duplicates(batch, "inscriptions", ("id",))
    for where, r in batch.rows("inscriptions"):
        same_company(
            where,
            [
                ("employees", "employee_id", r["employee_id"]),
                ("courses", "course_id", r["course_id"]),
            ],
        )
        inscription_course[r["id"]] = r["course_id"]

    problems += _duplicates(batch, "section_results", ("inscription_id", "section_id"))
    for where, r in batch.rows("section_results"):
        course = inscription_course.get(r["inscription_id"])
        if course is None:
            problems.append(f"{where}.inscription_id: unknown inscription {r['inscription_id']}")
        elif section_course.get(r["section_id"]) != course:
            problems.append(
                f"{where}.section_id: {r['section_id']} is not in the inscription's course"
            )
    return problems


def _duplicates(batch: Batch, table: str, key: tuple[str, ...]) -> list[str]:
    """Report records of one table that repeat a key given earlier in the batch."""
    seen: dict[tuple[Any, ...], str] = {}
    problems = []
    for where, record in batch.rows(table):
        value = tuple(record[k] for k in key)
        if value in seen:
            shown = ", ".join(f"{k}={v}" for k, v in zip(key, value, strict=True))
            problems.append(f"{where}.{key[-1]}: duplicate {shown} (first at {seen[value]})")
        else:
            seen[value] = where
    return problems


def _casefold(text: str) -> str:
    return text.casefold()


def write(conn: sqlite3.Connection, batch: Batch) -> dict[str, int]:
    """Upsert every record in dependency order and bump the data version; all or nothing."""
    counts: dict[str, int] = {}
    company_of_employee = dict(conn.execute("SELECT id, company_id FROM employees"))
    company_of_employee |= {r["id"]: r["company_id"] for _, r in batch.rows("employees")}
    with write_transaction(conn):
        for table, sql, to_row in _UPSERTS:
            rows = [to_row(r, company_of_employee) for _, r in batch.rows(table)]
            conn.executemany(sql, rows)
            counts[table] = len(rows)
        bump_data_version(conn)
    return counts


def _ts(value: dt.datetime) -> str:
    return value.strftime(TIMESTAMP_FORMAT)


def _date(value: Any) -> str | None:
    return None if value is None else value.isoformat()


_UPSERTS: list[tuple[str, str, Any]] = [
    (
        "companies",
        "INSERT INTO companies (id, name) VALUES (?, ?)"
        " ON CONFLICT (id) DO UPDATE SET name = excluded.name",
        lambda r, _: (r["id"], r["name"]),
    ),
    (
        "api_keys",
        "INSERT INTO api_keys (company_id, key_hash, prefix, label, created_at)"
        " VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))"
        " ON CONFLICT (key_hash) DO UPDATE SET label = excluded.label",
        lambda r, _: (
            r["company_id"],
            apikeys.hash_key(r["key"]),
            apikeys.prefix_of(r["key"]),
            r["label"],
        ),
    ),
    (
        "employees",
        "INSERT INTO employees (id, company_id, first_name, last_name, email, department,"
        " country, first_name_key, last_name_key, email_key, department_key, country_key)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
        " first_name = excluded.first_name, last_name = excluded.last_name,"
        " email = excluded.email, department = excluded.department, country = excluded.country,"
        " first_name_key = excluded.first_name_key, last_name_key = excluded.last_name_key,"
        " email_key = excluded.email_key, department_key = excluded.department_key,"
        " country_key = excluded.country_key",
        lambda r, _: (
            r["id"],
            r["company_id"],
            r["first_name"],
            r["last_name"],
            r["email"],
            r["department"],
            r["country"],
            _casefold(r["first_name"]),
            _casefold(r["last_name"]),
            _casefold(r["email"]),
            _casefold(r["department"]),
            _casefold(r["country"]),
        ),
    ),
    (
        "teams",
        "INSERT INTO teams (id, company_id, name, name_key) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET name = excluded.name, name_key = excluded.name_key",
        lambda r, _: (r["id"], r["company_id"], r["name"], _casefold(r["name"])),
    ),
    (
        "team_members",
        "INSERT OR IGNORE INTO team_members (employee_id, team_id) VALUES (?, ?)",
        lambda r, _: (r["employee_id"], r["team_id"]),
    ),
    (
        "campaigns",
        "INSERT INTO campaigns (id, company_id, title, launch_date) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET title = excluded.title,"
        " launch_date = excluded.launch_date",
        lambda r, _: (r["id"], r["company_id"], r["title"], _ts(r["launch_date"])),
    ),
    (
        "campaign_events",
        "INSERT INTO campaign_events (id, campaign_id, employee_id, type, timestamp,"
        " with_captcha) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
        " campaign_id = excluded.campaign_id, employee_id = excluded.employee_id,"
        " type = excluded.type, timestamp = excluded.timestamp,"
        " with_captcha = excluded.with_captcha",
        lambda r, _: (
            r["id"],
            r["campaign_id"],
            r["employee_id"],
            r["type"],
            _ts(r["timestamp"]),
            int(r["with_captcha"]),
        ),
    ),
    (
        "courses",
        "INSERT INTO courses (id, company_id, title, title_key) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET title = excluded.title, title_key = excluded.title_key",
        lambda r, _: (r["id"], r["company_id"], r["title"], _casefold(r["title"])),
    ),
    (
        "course_sections",
        "INSERT INTO course_sections (id, course_id, title, section_type, position)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET course_id = excluded.course_id,"
        " title = excluded.title, section_type = excluded.section_type,"
        " position = excluded.position",
        lambda r, _: (r["id"], r["course_id"], r["title"], r["section_type"], r["position"]),
    ),
    (
        "inscriptions",
        "INSERT INTO inscriptions (id, company_id, employee_id, course_id, start_date,"
        " due_date, status) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
        " company_id = excluded.company_id, employee_id = excluded.employee_id,"
        " course_id = excluded.course_id, start_date = excluded.start_date,"
        " due_date = excluded.due_date, status = excluded.status",
        lambda r, owner: (
            r["id"],
            owner[r["employee_id"]],
            r["employee_id"],
            r["course_id"],
            _date(r["start_date"]),
            _date(r["due_date"]),
            r["status"],
        ),
    ),
    (
        "section_results",
        "INSERT INTO section_results (inscription_id, section_id, completed_at, result, status)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (inscription_id, section_id) DO UPDATE SET"
        " completed_at = excluded.completed_at, result = excluded.result, status = excluded.status",
        lambda r, _: (
            r["inscription_id"],
            r["section_id"],
            _date(r["completed_at"]),
            r["result"],
            r["status"],
        ),
    ),
]


def build_parser() -> argparse.ArgumentParser:
    """The command line: fixture files and --db."""
    parser = OneLineParser(description="Load fixture files into a database, all or nothing.")
    parser.add_argument("files", nargs="+", type=Path, help="fixture JSON files")
    parser.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    return parser


@command("load refused, database unchanged")
def main(argv: Sequence[str] | None = None) -> int:
    """Validate and load; a refusal names each problem (file, record path, cause)."""
    args = build_parser().parse_args(argv)
    counts = load_files(args.db, args.files)
    summary = ", ".join(f"{n} {table}" for table, n in counts.items() if n)
    print(f"loaded into {args.db}: {summary}")
    return 0
