"""Write a database's data back out as a fixture file (the loader's input format).

The benchmark's load scenario (``bench_load``) uses it to load the standard data set
from JSON; it also turns a generated database into fixtures to share. SQLite builds each
record's JSON (``json_object``) and the file is written as it is read, so memory stays
flat. API keys are stored hashed, so their plain text must be given (``keys``: company id
to key); companies without one get none.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import TextIO

from app.tools.fixture_format import TABLES

CHUNK = 10_000

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
    db_path: str | Path, out: str | Path, keys: Mapping[int, str] | None = None
) -> dict[str, int]:
    """Write every table of the database to ``out`` as one fixture; return the records."""
    conn = sqlite3.connect(f"{Path(db_path).resolve().as_uri()}?mode=ro", uri=True)
    counts: dict[str, int] = {}
    try:
        with open(out, "w", encoding="utf-8") as file:
            file.write("{")
            for number, table in enumerate(TABLES):
                file.write(f'{"," if number else ""}\n"{table}": [')
                if table == "api_keys":
                    rows: Iterable[tuple[str]] = _keys(conn, keys or {})
                else:
                    record, order = RECORDS[table]
                    rows = conn.execute(f"SELECT {record} FROM {table} ORDER BY {order}")
                counts[table] = _write_rows(file, iter(rows))
                file.write("\n]")
            file.write("\n}\n")
    finally:
        conn.close()
    return counts


def _keys(conn: sqlite3.Connection, keys: Mapping[int, str]) -> list[tuple[str]]:
    """The given keys of the companies the database has, as api_keys records."""
    companies = [c for (c,) in conn.execute("SELECT id FROM companies ORDER BY id")]
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
