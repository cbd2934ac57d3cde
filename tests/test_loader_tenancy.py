"""contract.md 1 and 9 for writers: a load never moves a row to another company.

Pins issue 11 item 4: an upsert of an existing id with another company (directly, or
through parents of another company) is refused naming the record; the database triggers
refuse cross-company rows on update as on insert; and two loads running at once check
their references inside the write transaction, so they cannot both pass and cross tenants.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from app.tools.loader import LoadError, load_files

from .support.factories import DATA_TABLES, dump_tables, query, sample
from .support.loads import loads_at_once, write_fixture

NEW_ID = 5_000


def first_of(table: str, company_id: int) -> dict[str, Any]:
    """The first record of a sample table that belongs to a company."""
    return next(dict(r) for r in sample()[table] if r["company_id"] == company_id)


def company_of(table: str, record_id: int) -> int:
    return next(r["company_id"] for r in sample()[table] if r["id"] == record_id)


def refused(db: Path, document: dict[str, Any], path: str, tmp_path: Path) -> list[str]:
    """Load the document, expect a refusal naming ``path`` and an unchanged database."""
    before = dump_tables(db)
    bad = write_fixture(tmp_path / "other.json", document)
    with pytest.raises(LoadError) as caught:
        load_files(db, [bad])
    problems = caught.value.problems
    assert any(p.startswith(f"{bad}: {path}:") for p in problems), problems
    assert dump_tables(db) == before
    return problems


@pytest.mark.parametrize("table", ["employees", "teams", "campaigns", "courses"])
def test_an_owned_row_never_changes_company(table: str, sample_db: Path, tmp_path: Path) -> None:
    record = first_of(table, 1) | {"company_id": 2}
    problems = refused(sample_db, {table: [record]}, f"{table}[0].id", tmp_path)
    assert any("belongs to another company" in p for p in problems)


def test_an_event_never_moves_to_another_company(sample_db: Path, tmp_path: Path) -> None:
    event = next(
        e for e in sample()["campaign_events"] if company_of("campaigns", e["campaign_id"]) == 1
    )
    moved = event | {
        "campaign_id": first_of("campaigns", 2)["id"],
        "employee_id": first_of("employees", 2)["id"],
    }
    refused(sample_db, {"campaign_events": [moved]}, "campaign_events[0].id", tmp_path)


def test_an_inscription_never_moves_to_another_company(sample_db: Path, tmp_path: Path) -> None:
    inscription = next(
        i for i in sample()["inscriptions"] if company_of("courses", i["course_id"]) == 1
    )
    moved = inscription | {
        "employee_id": first_of("employees", 2)["id"],
        "course_id": first_of("courses", 2)["id"],
    }
    refused(sample_db, {"inscriptions": [moved]}, "inscriptions[0].id", tmp_path)


def test_a_section_never_moves_to_another_company(sample_db: Path, tmp_path: Path) -> None:
    section = next(
        s for s in sample()["course_sections"] if company_of("courses", s["course_id"]) == 1
    )
    moved = section | {"course_id": first_of("courses", 2)["id"], "position": 9_999}
    refused(sample_db, {"course_sections": [moved]}, "course_sections[0].id", tmp_path)


def test_an_api_key_never_moves_to_another_company(sample_db: Path, tmp_path: Path) -> None:
    key = next(k for k in sample()["api_keys"] if k["company_id"] == 1) | {"company_id": 2}
    refused(sample_db, {"api_keys": [key]}, "api_keys[0].key", tmp_path)


def other_company_rows() -> dict[str, tuple[str, tuple[Any, ...]]]:
    """For each guarded table, an UPDATE that would cross or change companies."""
    employee_2 = first_of("employees", 2)["id"]
    campaign_2 = first_of("campaigns", 2)["id"]
    course_2 = first_of("courses", 2)["id"]
    team_2 = first_of("teams", 2)["id"]
    return {
        "employee company": ("UPDATE employees SET company_id = 2 WHERE company_id = 1", ()),
        "campaign company": ("UPDATE campaigns SET company_id = 2 WHERE company_id = 1", ()),
        "event employee": (
            "UPDATE campaign_events SET employee_id = ? WHERE campaign_id IN"
            " (SELECT id FROM campaigns WHERE company_id = 1)",
            (employee_2,),
        ),
        "event moved whole": (
            "UPDATE campaign_events SET employee_id = ?, campaign_id = ? WHERE campaign_id IN"
            " (SELECT id FROM campaigns WHERE company_id = 1)",
            (employee_2, campaign_2),
        ),
        "target employee": (
            "UPDATE campaign_targets SET employee_id = ? WHERE campaign_id IN"
            " (SELECT id FROM campaigns WHERE company_id = 1)",
            (employee_2,),
        ),
        "team member": (
            "UPDATE team_members SET team_id = ? WHERE team_id IN"
            " (SELECT id FROM teams WHERE company_id = 1)",
            (team_2,),
        ),
        "inscription course": (
            "UPDATE inscriptions SET course_id = ? WHERE company_id = 1",
            (course_2,),
        ),
        "section course": (
            "UPDATE course_sections SET course_id = ?, position = position + 1000"
            " WHERE course_id IN (SELECT id FROM courses WHERE company_id = 1)",
            (course_2,),
        ),
    }


@pytest.mark.parametrize("case", list(other_company_rows()))
def test_triggers_refuse_cross_company_updates(case: str, sample_db: Path) -> None:
    sql, params = other_company_rows()[case]
    before = dump_tables(sample_db)
    conn = sqlite3.connect(sample_db)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(sqlite3.IntegrityError, match="compan"):
            conn.execute(sql, params)
        conn.rollback()
    finally:
        conn.close()
    assert dump_tables(sample_db) == before


def person(company_id: int, name: str) -> dict[str, Any]:
    return {
        "id": NEW_ID, "company_id": company_id, "first_name": name, "last_name": "Race",
        "email": f"{name.lower()}@race.example", "department": "Finance", "country": "Spain",
    }  # fmt: skip


@pytest.mark.system
def test_two_loads_at_once_cannot_cross_tenants(sample_db: Path, tmp_path: Path) -> None:
    """Both read their files while a third writer holds the lock, then write in turn.

    Checked before the lock (as they once were), both would see employee 5000 as free and
    both would succeed, company 2's person landing in company 1's row.
    """
    campaign_2 = first_of("campaigns", 2)["id"]
    event = {
        "id": 10**6, "campaign_id": campaign_2, "employee_id": NEW_ID, "type": "click",
        "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False,
    }  # fmt: skip
    files = {
        1: write_fixture(tmp_path / "one.json", {"employees": [person(1, "Alice")]}),
        2: write_fixture(
            tmp_path / "two.json", {"employees": [person(2, "Bob")], "campaign_events": [event]}
        ),
    }
    results = loads_at_once(sample_db, [files[1], files[2]], ["employees", "campaign_events"])
    codes = {1: results[0][0], 2: results[1][0]}
    assert sorted(codes.values()) == [0, 1], results
    winner = next(c for c, code in codes.items() if code == 0)
    said = results[2 - winner][1]
    assert "employees[0].id: 5000 belongs to another company" in said
    row = query(sample_db, "SELECT company_id, first_name FROM employees WHERE id = ?", NEW_ID)
    assert row == [(winner, "Alice" if winner == 1 else "Bob")]
    crossed = query(
        sample_db,
        "SELECT count(*) FROM campaign_events e JOIN campaigns c ON c.id = e.campaign_id"
        " JOIN employees p ON p.id = e.employee_id WHERE c.company_id != p.company_id",
    )
    assert crossed == [(0,)]
    assert all(query(sample_db, f"SELECT count(*) FROM {t}")[0][0] for t in DATA_TABLES)
