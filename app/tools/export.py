"""Write a database, or one company of it, as a fixture file (the loader's input format).

A generated data set becomes a file to share or to load into another database, SQLite
or PostgreSQL. The database builds each record's JSON and the file is written as it is
read, in one read transaction (a load meanwhile is in all of it or none), so memory stays
flat; it is written beside its final name and renamed at the end, so a failed export
leaves no half file. API keys are stored hashed, so their plain text must be given
(``keys``: company id to key); companies without one get none (make keys with the key
tool after loading).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..config import OneLineParser
from ..data.pg.session import connect
from ..data.pg.sql import numbered
from ..data.pg.store import check_schema
from ..data.schema import DERIVED_COMPLETION, check_readable, read_snapshot
from .cli import ToolError, add_store_arguments, command, plural, record_id
from .fixture_format import TABLES
from .staging import EVENT_COLUMNS

CHUNK = 10_000
# Which rows belong to one company (``?`` is its id), table by table.
OWNER = {
    "companies": "id = ?",
    "partners": "id IN (SELECT partner_id FROM partner_companies WHERE company_id = ?)",
    "partner_companies": "company_id = ?",
    "employees": "company_id = ?",
    "teams": "company_id = ?",
    "team_members": "employee_id IN (SELECT id FROM employees WHERE company_id = ?)",
    "campaigns": "company_id = ?",
    "campaign_targets": "campaign_id IN (SELECT id FROM campaigns WHERE company_id = ?)",
    "campaign_events": "campaign_id IN (SELECT id FROM campaigns WHERE company_id = ?)",
    "courses": "company_id = ?",
    "course_sections": "course_id IN (SELECT id FROM courses WHERE company_id = ?)",
    "inscriptions": "company_id = ?",
    "section_results": "inscription_id IN (SELECT id FROM inscriptions WHERE company_id = ?)",
}
# Each table's record (its fields, as stored) and the order of its rows.
RECORDS: dict[str, tuple[tuple[str, ...], str]] = {
    "companies": (("id", "name"), "id"),
    "partners": (("id", "name"), "id"),
    "partner_companies": (("partner_id", "company_id"), "partner_id, company_id"),
    "employees": (
        ("id", "company_id", "first_name", "last_name", "email", "department", "country"),
        "id",
    ),
    "teams": (("id", "company_id", "name"), "id"),
    "team_members": (("team_id", "employee_id"), "employee_id, team_id"),
    "campaigns": (("id", "company_id", "title", "launch_date"), "id"),
    "campaign_targets": (("campaign_id", "employee_id", "sent_at"), "campaign_id, employee_id"),
    "campaign_events": (
        EVENT_COLUMNS,
        "id",
    ),
    "courses": (("id", "company_id", "title"), "id"),
    "course_sections": (("id", "course_id", "title", "section_type", "position"), "id"),
    "inscriptions": (
        ("id", "employee_id", "course_id", "start_date", "due_date", "status", "completed_at"),
        "id",
    ),
    "section_results": (
        ("inscription_id", "section_id", "completed_at", "result", "status"),
        "inscription_id, section_id",
    ),
}
# A field left out of a record where the load would derive the very value stored (it must
# be the record's last): a derived completion date may precede the start date, which a
# given one may not, so written out it would not load back.
DERIVED = {"inscriptions": ("completed_at", f"completed_at IS ({DERIVED_COMPLETION})")}
# The flag each store holds as 0 or 1, as JSON's boolean.
FLAG = {
    "sqlite": "json(CASE with_captcha WHEN 1 THEN 'true' ELSE 'false' END)",
    "postgresql": "with_captcha = 1",
}


def select(table: str, store: str, company: int | None) -> str:
    """The query giving one table's records as JSON text, in order (``?``: the company),
    and whether the load would derive its :data:`DERIVED` field."""
    fields, order = RECORDS[table]
    value = {f: FLAG[store] if f == "with_captcha" else f for f in fields}
    where = "" if company is None else f" WHERE {OWNER[table]}"
    derived = DERIVED[table][1] if table in DERIVED else "FALSE"
    if store == "sqlite":
        pairs = ", ".join(f"'{f}', {v}" for f, v in value.items())
        return f"SELECT json_object({pairs}), {derived} FROM {table}{where} ORDER BY {order}"
    # row_to_json writes SQLite's compact text ({"id":1,...}) in the fields' order, where
    # json_build_object puts spaces around each colon; jsonb would reorder the keys.
    columns = ", ".join(f"{v} AS {f}" for f, v in value.items())
    derived = derived.replace(" IS (", " IS NOT DISTINCT FROM (")
    return (
        f"SELECT (SELECT row_to_json(r)::text FROM (SELECT {columns}) r), {derived}"
        f" FROM {table}{where} ORDER BY {order}"
    )


def record(table: str, row: Sequence[Any]) -> str:
    """A row of :func:`select` as its record: without the field the load derives."""
    text, derived = str(row[0]), row[1]
    if not derived:
        return text
    field = json.dumps(DERIVED[table][0])
    return text[: text.rindex(f",{field}:")] + "}"


class FixtureFile:
    """A fixture written table by table, record by record: ``{"table": [record, ...]}``."""

    def __init__(self, file: TextIO) -> None:
        self.file = file
        self.counts: dict[str, int] = {}
        self.table = ""
        file.write("{")

    def start(self, table: str) -> None:
        """Open the next table's array (closing the previous one)."""
        self.file.write(("\n],\n" if self.table else "\n") + f'"{table}": [')
        self.table, self.counts[table] = table, 0

    def add(self, records: Iterable[str]) -> None:
        """Records (JSON text) of the current table, one a line."""
        for record in records:
            self.file.write(("," if self.counts[self.table] else "") + "\n" + record)
            self.counts[self.table] += 1

    def finish(self) -> dict[str, int]:
        """Close the document; the records written per table."""
        self.file.write("\n]\n}\n")
        return self.counts


def key_records(companies: list[int], keys: Mapping[int, str]) -> list[str]:
    """The given keys of the exported companies, as api_keys records."""
    return [
        json.dumps({"company_id": c, "label": "exported", "key": keys[c]})
        for c in companies
        if c in keys
    ]


def export_fixture(
    db_path: str | Path,
    out: str | Path,
    keys: Mapping[int, str] | None = None,
    company: int | None = None,
) -> dict[str, int]:
    """Write every table of the SQLite database (or only ``company``'s rows) to ``out``
    as one fixture; return the records written per table."""
    if not Path(db_path).is_file():
        raise ToolError(f"no database at {db_path}")
    database = Path(db_path).resolve()
    if Path(out).resolve() in (database, *(Path(f"{database}-{end}") for end in ("wal", "shm"))):
        raise ToolError(f"{out} is the database itself (or its WAL): write the fixture elsewhere")
    check_regular(out)
    check_readable(db_path)  # a database of this schema version, not "no such table"
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    try:
        with read_snapshot(conn):
            found = [c for (c,) in conn.execute("SELECT id FROM companies ORDER BY id")]
            companies = _chosen(found, company, db_path)
            with _written(out) as fixture:
                for table in TABLES:
                    fixture.start(table)
                    if table == "api_keys":
                        fixture.add(key_records(companies, keys or {}))
                        continue
                    params = () if company is None else (company,)
                    rows = conn.execute(select(table, "sqlite", company), params)
                    while batch := rows.fetchmany(CHUNK):
                        fixture.add(record(table, r) for r in batch)
        return fixture.counts
    finally:
        conn.close()


async def export_pg(url: str, out: str | Path, company: int | None = None) -> dict[str, int]:
    """:func:`export_fixture` from the PostgreSQL database at ``url``."""
    check_regular(out)
    conn = await connect(url)
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            await check_schema(conn)
            found = await conn.fetch("SELECT id FROM companies ORDER BY id")
            _chosen([r["id"] for r in found], company, "the database")
            with _written(out) as fixture:
                for table in TABLES:
                    fixture.start(table)
                    if table == "api_keys":
                        continue
                    params: tuple[Any, ...] = () if company is None else (company,)
                    sql = numbered(select(table, "postgresql", company))
                    cursor = await conn.cursor(sql, *params)
                    while batch := await cursor.fetch(CHUNK):
                        fixture.add(record(table, r) for r in batch)
            return fixture.counts
    finally:
        await conn.close()


def check_regular(out: str | Path) -> None:
    """Refuse an output that exists and is no regular file: renamed over, a device, a
    pipe or a folder would go."""
    if Path(out).exists() and not Path(out).is_file():
        raise ToolError(f"{out} is not a regular file: name a file to write the fixture to")


def _chosen(companies: list[int], company: int | None, where: str | Path) -> list[int]:
    """The companies exported; ToolError for a company the database does not have."""
    if company is None:
        return companies
    if company not in companies:
        raise ToolError(f"no company {company} in {where}")
    return [company]


@contextlib.contextmanager
def _written(out: str | Path) -> Iterator[FixtureFile]:
    """A fixture written beside ``out`` and renamed to it once whole; removed otherwise.
    A file replaced keeps its mode (an export chmod'ed 0600 stays so); a new one follows
    the umask."""
    part = Path(f"{out}.part")
    try:
        with open(part, "w", encoding="utf-8") as file:
            with contextlib.suppress(FileNotFoundError):
                os.fchmod(file.fileno(), stat.S_IMODE(os.stat(out).st_mode))
            fixture = FixtureFile(file)
            yield fixture
            fixture.finish()
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)


def build_parser() -> argparse.ArgumentParser:
    """The command line: the file to write, --db or --database-url, and --company."""
    parser = OneLineParser(
        description="Write a database, or one company of it, as a fixture file that"
        " reporting-load loads back. API keys are stored hashed and cannot be exported."
    )
    parser.add_argument("output", type=Path, help="the fixture file to write (replaced)")
    add_store_arguments(parser, "SQLite database file to read")
    parser.add_argument("--company", type=record_id, metavar="ID", help="export this company only")
    return parser


@command("export refused, nothing written")
def main(argv: Sequence[str] | None = None) -> int:
    """Export, then say how many records went where."""
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    if args.db is not None:
        counts = export_fixture(args.db, args.output, company=args.company)
    else:
        counts = asyncio.run(export_pg(args.database_url, args.output, args.company))
    seconds = time.perf_counter() - started
    print(f"exported {plural(sum(counts.values()), 'record')} to {args.output} in {seconds:.1f} s")
    return 0


# ``python -m app.tools.export`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
