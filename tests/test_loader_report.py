"""contract.md 9 (a refusal names every problem): the loader's report, run as a command.

The same bad files give the same complete report on SQLite and on PostgreSQL, every
problem of every table in file and record order; a file that cannot be parsed is refused
before any write step, placed by its line and column, and an empty file is called empty.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .support.factories import dump_tables
from .support.servers import run_python

pytestmark = pytest.mark.system  # every test here runs the loader as a process

REFUSED = "load refused, database unchanged:"
# Company 1 owns employee 1, team 1, campaign 1 and course 1; company 2 employee 41,
# team 3, campaign 3 and course 3.
FIRST = {
    "employees": [
        {"id": 9001, "company_id": 1, "first_name": "A", "last_name": "B",
         "email": "a.b@northwind.example", "department": "HR", "country": "Spain"},
        {"id": 9002, "company_id": "one", "first_name": "C", "last_name": "D",
         "email": "c.d@northwind.example", "department": "HR", "country": "Spain"},
    ],
    "team_members": [
        {"team_id": 3, "employee_id": 1},
        {"team_id": 1, "employee_id": 424242},
        {"team_id": 434343, "employee_id": 1},
        {"team_id": 1, "employee_id": 9002},
    ],
    "campaign_events": [
        {"id": 900001, "campaign_id": 3, "employee_id": 1, "type": "open",
         "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False},
        {"id": 900002, "campaign_id": 454545, "employee_id": 1, "type": "open",
         "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False},
    ],
    "inscriptions": [
        {"id": 9001, "employee_id": 1, "course_id": 3, "start_date": "2025-04-14",
         "due_date": "2025-06-13", "status": "completed"},
    ],
}  # fmt: skip
SECOND = {
    "teams": [{"id": 1, "company_id": 2, "name": "Blue Team"}],
    "campaign_targets": [{"campaign_id": 1, "employee_id": 41, "sent_at": "2025-06-01T10:00:00Z"}],
    # Section 24 and inscription 1 (of course 7) have a result: neither may leave course 7.
    "course_sections": [
        {
            "id": 24,
            "course_id": 4,
            "title": "Home Network Basics",
            "section_type": "lecture",
            "position": 99,
        }
    ],
    "inscriptions": [
        {
            "id": 1,
            "employee_id": 83,
            "course_id": 4,
            "start_date": "2025-04-14",
            "due_date": "2025-06-13",
            "status": "completed",
        }
    ],
}
EXPECTED = [
    "{a}: employees[1].company_id: Not a valid integer.",
    "{a}: team_members[0]: employee_id and team_id belong to different companies",
    "{a}: team_members[1].employee_id: unknown employee 424242",
    "{a}: team_members[2].team_id: unknown team 434343",
    "{a}: campaign_events[0]: campaign_id and employee_id belong to different companies",
    "{a}: campaign_events[1].campaign_id: unknown campaign 454545",
    "{a}: inscriptions[0]: employee_id and course_id belong to different companies",
    "{b}: teams[0].id: 1 belongs to another company",
    "{b}: campaign_targets[0]: campaign_id and employee_id belong to different companies",
    "{b}: course_sections[0].course_id: section 24 has results: it cannot move to another course",
    "{b}: inscriptions[0].course_id: inscription 1 has results: it cannot move to another course",
]


def write(path: Path, document: dict[str, Any] | str) -> Path:
    text = document if isinstance(document, str) else json.dumps(document)
    path.write_text(text, encoding="utf-8")
    return path


def load(store: list[str], *files: Path) -> subprocess.CompletedProcess[str]:
    return run_python("scripts/load_fixtures.py", *map(str, files), *store)


def refused_alike(expected: list[str], sample_db: Path, pg_database: str, *files: Path) -> None:
    """Both stores refuse ``files`` (over the sample) with the very lines ``expected``."""
    on_sqlite = load(["--db", str(sample_db), "--no-progress"], *files)
    on_postgresql = load(["--database-url", pg_database], *files)
    assert on_sqlite.returncode == on_postgresql.returncode == 1
    assert on_sqlite.stderr.splitlines() == expected
    assert on_postgresql.stderr.splitlines() == expected


def test_the_same_complete_report_on_both_stores(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    a = write(tmp_path / "a.json", FIRST)
    b = write(tmp_path / "b.json", SECOND)
    expected = [REFUSED, *(f"  {line.format(a=a, b=b)}" for line in EXPECTED)]
    before = dump_tables(sample_db)
    refused_alike(expected, sample_db, pg_database, a, b)
    assert dump_tables(sample_db) == before


# A parent refused for its format, with children of its own in the same load (a company's
# employee and course, that course's section, an employee's inscription): PostgreSQL
# merged the children and ended on a foreign key or tenancy trigger's raw error.
ORPHANS = {
    "companies": [{"id": 77, "name": ""}],
    "employees": [
        {"id": 9001, "company_id": 77, "first_name": "A", "last_name": "B",
         "email": "a@b.example", "department": "HR", "country": "Spain"},
        {"id": 9002, "company_id": 1, "first_name": "C", "last_name": "D",
         "email": "not an address", "department": "HR", "country": "Spain"},
    ],
    "courses": [{"id": 9001, "company_id": 77, "title": "T"}],
    "course_sections": [
        {"id": 9001, "course_id": 9001, "title": "S", "section_type": "quiz", "position": 1}
    ],
    "inscriptions": [
        {"id": 9001, "employee_id": 9002, "course_id": 1, "start_date": "2025-04-14",
         "due_date": None, "status": "in_progress"},
        {"id": 9002, "employee_id": 9001, "course_id": 9001, "start_date": "2025-04-14",
         "due_date": None, "status": "in_progress"},
    ],
    "section_results": [
        {"inscription_id": 9002, "section_id": 9001, "completed_at": None, "result": None,
         "status": None}
    ],
}  # fmt: skip


def test_a_refused_parent_s_children_add_no_database_error(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    """The refused records' own lines, and nothing about their children, on both stores."""
    bad = write(tmp_path / "orphans.json", ORPHANS)
    expected = [
        REFUSED,
        f"  {bad}: companies[0].name: Length must be between 1 and 500.",
        f"  {bad}: employees[1].email: Not a valid email address.",
    ]
    refused_alike(expected, sample_db, pg_database, bad)


def test_an_email_is_at_most_500_characters_on_both_stores(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    """As every text: unbounded, 3,000 characters loaded into SQLite and broke
    PostgreSQL's index of e-mails (a raw "index row size" error)."""
    local = "".join(f"{n:04d}" for n in range(750))  # 3,000 characters, incompressible
    person = {"id": 9001, "company_id": 1, "first_name": "A", "last_name": "B",
              "email": f"{local}@x.example", "department": "HR", "country": "Spain"}  # fmt: skip
    bad = write(tmp_path / "long.json", {"employees": [person]})
    expected = [f"{REFUSED} {bad}: employees[0].email: Length must be between 1 and 500."]
    refused_alike(expected, sample_db, pg_database, bad)
    fits = write(
        tmp_path / "fits.json", {"employees": [{**person, "email": f"{local[:489]}@x.eu"}]}
    )
    assert load(["--db", str(sample_db), "--no-progress"], fits).returncode == 0
    assert load(["--database-url", pg_database], fits).returncode == 0


TRUNCATED = '{"companies": [{"id": 7, "name": "Seven"}],\n "employees": [\n  {"id": 1, "comp'
UNPARSABLE = {
    "truncated": (TRUNCATED, "at line 3, column 18: parse error: premature EOF"),
    "a bare word": (
        '{"companies": [\n {"id": 7, "name": "x"},\n {"id": 8, name: "y"}]}',
        "at line 3, column 13: lexical error: invalid string in json text.",
    ),
    "trailing text": ('{"companies": []}\n\nmore', "at line 3, column 1: parse error: trailing"),
}


@pytest.mark.parametrize("case", list(UNPARSABLE))
def test_a_file_that_cannot_parse_is_refused_before_any_write(
    case: str, tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    text, place = UNPARSABLE[case]
    bad = write(tmp_path / "bad.json", text)
    good = write(tmp_path / "good.json", {"companies": [{"id": 8, "name": "Eight"}]})
    before = dump_tables(sample_db)
    done = load(["--db", str(sample_db)], good, bad)
    assert done.returncode == 1
    assert "check and write" not in done.stderr
    refusal = done.stderr.splitlines()[-1]
    assert refusal.startswith(f"{REFUSED[:-1]}: {bad}: not valid JSON {place}"), done.stderr
    assert dump_tables(sample_db) == before
    on_postgresql = load(["--database-url", pg_database], good, bad)
    assert on_postgresql.returncode == 1
    assert on_postgresql.stderr == refusal + "\n"


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_an_empty_file_says_it_is_empty(text: str, tmp_path: Path, sample_db: Path) -> None:
    empty = write(tmp_path / "empty.json", text)
    done = load(["--db", str(sample_db), "--no-progress"], empty)
    assert done.returncode == 1
    assert done.stderr == (
        f"{REFUSED[:-1]}: {empty}: the file is empty: a fixture is a JSON object of tables\n"
    )


# Each alone over the sample: the checks against the stored rows. Section 1 (course 1)
# and inscription 1 (course 7) have results; course 3 and employee 41 are company 2's.
AGAINST_THE_STORED = {
    "a place taken": (
        {
            "course_sections": [
                {**SECOND["course_sections"][0], "id": 2, "course_id": 1, "position": 1}
            ]
        },
        ["course_sections[0].position: position 1 of course 1 is section 1's"],
    ),
    "a section moved": (
        {
            "course_sections": [
                {**SECOND["course_sections"][0], "id": 1, "course_id": 3, "position": 99}
            ]
        },
        [
            "course_sections[0].id: 1 belongs to another company",
            "course_sections[0].course_id: section 1 has results: it cannot move to another course",
        ],
    ),
    "an inscription moved": (
        {"inscriptions": [{**SECOND["inscriptions"][0], "employee_id": 41, "course_id": 3}]},
        [
            "inscriptions[0].id: 1 belongs to another company",
            "inscriptions[0].course_id: inscription 1 has results:"
            " it cannot move to another course",
        ],
    ),
    # Event 7 is of campaign 1 (company 1); the key is company 1's.
    "an event moved": (
        {"campaign_events": [{**FIRST["campaign_events"][0], "id": 7, "employee_id": 41}]},
        ["campaign_events[0].id: 7 belongs to another company"],
    ),
    "a key taken": (
        {
            "api_keys": [
                {"company_id": 2, "label": "x", "key": "rk_sample_northwind_7f3c9a1e5b2d4c6f8a0b"}
            ]
        },
        ["api_keys[0].key: this key belongs to another company or partner"],
    ),
    # PostgreSQL's loader made its nouns from the table's name: "unknown companie 99",
    # "unknown course section 99".
    "an unknown company": (
        {"teams": [{"id": 5000, "company_id": 99, "name": "x"}]},
        ["teams[0].company_id: unknown company 99"],
    ),
    "an unknown section": (
        {"section_results": [{"inscription_id": 1, "section_id": 99, "completed_at": None,
                              "result": None, "status": None}]},
        ["section_results[0].section_id: unknown section 99"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(AGAINST_THE_STORED))
def test_the_checks_against_the_stored_rows_give_the_same_lines(
    case: str, tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    document, lines = AGAINST_THE_STORED[case]
    bad = write(tmp_path / "bad.json", document)
    expected = [REFUSED, *(f"  {bad}: {line}" for line in lines)]
    if len(lines) == 1:  # a single problem is told on the refusal's line
        expected = [f"{REFUSED[:-1]}: {bad}: {lines[0]}"]
    refused_alike(expected, sample_db, pg_database, bad)
