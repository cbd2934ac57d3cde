"""Write a database, or one company of it, as a fixture file (the loader's input format).

A generated data set becomes a file to share or to load into another database. SQLite
builds each record's JSON (``json_object``) and the file is written as it is read, so
memory stays flat; it is written beside its final name and renamed at the end, so a
failed export leaves no half file. API keys are stored hashed, so their plain text must
be given (``keys``: company id to key); companies without one get none (make keys with
the key tool after loading).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import TextIO

from ..config import OneLineParser
from .cli import ToolError, command, plural
from .fixture_format import TABLES

CHUNK = 10_000
# Which rows belong to one company (``?`` is its id), table by table.
OWNER = {
    "companies": "id = ?",
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

# Each table's record, as SQLite builds it from the stored row, and the row order.
RECORDS: dict[str, tuple[str, str]] = {
    "companies": ("json_object('id', id, 'name', name)", "id"),
    "employees": (
        "json_object('id', id, 'company_id', company_id, 'first_name', first_name,"
        " 'last_name', last_name, 'email', email, 'department', department,"
        " 'country', country)",
        "id",
    ),
    "teams": ("json_object('id', id, 'company_id', company_id, 'name', name)", "id"),
    "team_members": (
        "json_object('team_id', team_id, 'employee_id', employee_id)",
        "employee_id, team_id",
    ),
    "campaigns": (
        "json_object('id', id, 'company_id', company_id, 'title', title,"
        " 'launch_date', launch_date)",
        "id",
    ),
    "campaign_targets": (
        "json_object('campaign_id', campaign_id, 'employee_id', employee_id, 'sent_at', sent_at)",
        "campaign_id, employee_id",
    ),
    "campaign_events": (
        "json_object('id', id, 'campaign_id', campaign_id, 'employee_id', employee_id,"
        " 'type', type, 'timestamp', timestamp,"
        " 'with_captcha', json(CASE with_captcha WHEN 1 THEN 'true' ELSE 'false' END),"
        " 'ip', ip, 'user_agent', user_agent)",
        "id",
    ),
    "courses": ("json_object('id', id, 'company_id', company_id, 'title', title)", "id"),
    "course_sections": (
        "json_object('id', id, 'course_id', course_id, 'title', title,"
        " 'section_type', section_type, 'position', position)",
        "id",
    ),
    "inscriptions": (
        "json_object('id', id, 'employee_id', employee_id, 'course_id', course_id,"
        " 'start_date', start_date, 'due_date', due_date, 'status', status)",
        "id",
    ),
    "section_results": (
        "json_object('inscription_id', inscription_id, 'section_id', section_id,"
        " 'completed_at', completed_at, 'result', result, 'status', status)",
        "inscription_id, section_id",
    ),
}


def export_fixture(
    db_path: str | Path,
    out: str | Path,
    keys: Mapping[int, str] | None = None,
    company: int | None = None,
) -> dict[str, int]:
    """Write every table of the database (or only ``company``'s rows) to ``out`` as one
    fixture; return the records written per table."""
    if not Path(db_path).is_file():
        raise ToolError(f"no database at {db_path}")
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    part = Path(f"{out}.part")
    try:
        companies = [c for (c,) in conn.execute("SELECT id FROM companies ORDER BY id")]
        if company is not None and company not in companies:
            raise ToolError(f"no company {company} in {db_path}")
        chosen = companies if company is None else [company]
        counts = _write(conn, part, chosen, keys or {}, company)
        os.replace(part, out)
        return counts
    finally:
        conn.close()
        part.unlink(missing_ok=True)


def _write(
    conn: sqlite3.Connection,
    path: Path,
    companies: list[int],
    keys: Mapping[int, str],
    company: int | None,
) -> dict[str, int]:
    counts: dict[str, int] = {}
    with open(path, "w", encoding="utf-8") as file:
        file.write("{")
        for number, table in enumerate(TABLES):
            file.write(f'{"," if number else ""}\n"{table}": [')
            if table == "api_keys":
                rows: Iterable[tuple[str]] = _keys(companies, keys)
            else:
                record, order = RECORDS[table]
                where, params = (
                    ("", ()) if company is None else (f" WHERE {OWNER[table]}", (company,))
                )
                rows = conn.execute(f"SELECT {record} FROM {table}{where} ORDER BY {order}", params)
            counts[table] = _write_rows(file, iter(rows))
            file.write("\n]")
        file.write("\n}\n")
    return counts


def _keys(companies: list[int], keys: Mapping[int, str]) -> list[tuple[str]]:
    """The given keys of the exported companies, as api_keys records."""
    return [
        (json.dumps({"company_id": c, "label": "exported", "key": keys[c]}),)
        for c in companies
        if c in keys
    ]


def _write_rows(file: TextIO, rows: Iterator[tuple[str]]) -> int:
    """Write the records of one table, comma-separated, one per line; return how many."""
    written = 0
    while batch := list(islice(rows, CHUNK)):
        file.write(("," if written else "") + "\n" + ",\n".join(r[0] for r in batch))
        written += len(batch)
    return written


def build_parser() -> argparse.ArgumentParser:
    """The command line: --db, --company and the file to write."""
    parser = OneLineParser(
        description="Write a database, or one company of it, as a fixture file that"
        " reporting-load loads back. API keys are stored hashed and cannot be exported."
    )
    parser.add_argument("output", type=Path, help="the fixture file to write (replaced)")
    parser.add_argument("--db", required=True, help="SQLite database file to read")
    parser.add_argument("--company", type=int, metavar="ID", help="export this company only")
    return parser


@command("export refused, nothing written")
def main(argv: Sequence[str] | None = None) -> int:
    """Export, then say how many records went where."""
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    counts = export_fixture(args.db, args.output, company=args.company)
    seconds = time.perf_counter() - started
    print(f"exported {plural(sum(counts.values()), 'record')} to {args.output} in {seconds:.1f} s")
    return 0
