"""contract.md 9: fixture loads are validated, all or nothing, and idempotent.

A bad record anywhere leaves the database byte-for-byte unchanged and the error names
the file and the record's path; loading the same file twice leaves the same state.
"""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.tools.fixture_reader import Item
from app.tools.loader import SAMPLE_FIXTURE, LoadError, load_files, load_items, summary

from .support.factories import DATA_TABLES, ONE_ROW_EDITS, dump_tables, query, sample
from .support.servers import run_python

Edit = Callable[[dict[str, Any]], None]


def dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every data table (meta excluded), in a stable order."""
    return dump_tables(db, DATA_TABLES)


def meta(db: Path) -> dict[str, str]:
    """The meta table: data_version and data_token."""
    return dict(query(db, "SELECT key, value FROM meta"))


def fingerprint(db: Path) -> dict[str, str]:
    """SHA-256 of the database file and of its WAL file, if there is one."""
    files = [db, Path(f"{db}-wal")]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def write_json(path: Path, document: Any) -> Path:
    """Write a fixture document and return its path."""
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def employee_of_company(company_id: int) -> int:
    """Some employee of a company, from the fixture."""
    return next(e["id"] for e in sample()["employees"] if e["company_id"] == company_id)


def campaign_company(campaign_id: int) -> int:
    """The company of a campaign, from the fixture."""
    return next(c["company_id"] for c in sample()["campaigns"] if c["id"] == campaign_id)


def other_company_employee(doc: dict[str, Any]) -> None:
    """Point campaign_events[17] at an employee of the other company."""
    event = doc["campaign_events"][17]
    event["employee_id"] = employee_of_company(3 - campaign_company(event["campaign_id"]))


def setter(table: str, index: int, field: str, value: Any) -> Edit:
    """An edit that sets one field of one record."""

    def edit(doc: dict[str, Any]) -> None:
        doc[table][index][field] = value

    return edit


def deleter(table: str, index: int, field: str) -> Edit:
    """An edit that removes one field of one record."""

    def edit(doc: dict[str, Any]) -> None:
        del doc[table][index][field]

    return edit


def duplicate_event_id(doc: dict[str, Any]) -> None:
    """Give campaign_events[17] the id of campaign_events[16]."""
    doc["campaign_events"][17]["id"] = doc["campaign_events"][16]["id"]


def other_company_target(doc: dict[str, Any]) -> None:
    """Point campaign_targets[4] at an employee of the campaign's other company."""
    target = doc["campaign_targets"][4]
    target["employee_id"] = employee_of_company(3 - campaign_company(target["campaign_id"]))


def duplicate_target(doc: dict[str, Any]) -> None:
    """Make campaign_targets[4] repeat the pair of campaign_targets[3]."""
    doc["campaign_targets"][4] = dict(doc["campaign_targets"][3])


UNKNOWN_ID = 10**9
BAD_RECORDS: dict[str, tuple[Edit, str]] = {
    "missing field": (deleter("campaign_events", 17, "type"), "campaign_events[17].type"),
    "wrong type (id as text)": (setter("employees", 3, "id", "4"), "employees[3].id"),
    "wrong type (captcha as text)": (
        setter("campaign_events", 17, "with_captcha", "yes"),
        "campaign_events[17].with_captcha",
    ),
    "bad enum": (setter("campaign_events", 17, "type", "phish"), "campaign_events[17].type"),
    "impossible date": (
        setter("inscriptions", 5, "start_date", "2026-02-30"),
        "inscriptions[5].start_date",
    ),
    "date in another format": (
        setter("inscriptions", 5, "due_date", "13/06/2025"),
        "inscriptions[5].due_date",
    ),
    "timestamp without zone": (
        setter("campaign_events", 17, "timestamp", "2025-05-24T01:52:44"),
        "campaign_events[17].timestamp",
    ),
    "event of an unknown employee": (
        setter("campaign_events", 17, "employee_id", UNKNOWN_ID),
        "campaign_events[17].employee_id",
    ),
    "inscription to an unknown course": (
        setter("inscriptions", 5, "course_id", UNKNOWN_ID),
        "inscriptions[5].course_id",
    ),
    "employee of another company": (other_company_employee, "campaign_events[17]"),
    "duplicate id": (duplicate_event_id, "campaign_events[17].id"),
    "target of another company": (other_company_target, "campaign_targets[4]"),
    "duplicate target": (duplicate_target, "campaign_targets[4].employee_id"),
    "target of an unknown campaign": (
        setter("campaign_targets", 4, "campaign_id", UNKNOWN_ID),
        "campaign_targets[4].campaign_id",
    ),
    "sent_at not an instant": (
        setter("campaign_targets", 4, "sent_at", "2025-02-11"),
        "campaign_targets[4].sent_at",
    ),
    "ip too long": (setter("campaign_events", 17, "ip", "1" * 46), "campaign_events[17].ip"),
    "ip not a string": (setter("campaign_events", 17, "ip", 3232235777), "campaign_events[17].ip"),
    "empty user agent": (
        setter("campaign_events", 17, "user_agent", ""),
        "campaign_events[17].user_agent",
    ),
    "user agent too long": (
        setter("campaign_events", 17, "user_agent", "x" * 1001),
        "campaign_events[17].user_agent",
    ),
}


def test_sample_loads_every_record(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite3"
    load_files(db, [SAMPLE_FIXTURE])
    for table in DATA_TABLES:
        assert query(db, f"SELECT count(*) FROM {table}") == [(len(sample()[table]),)], table


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_bad_record_refused_database_unchanged(tmp_path: Path, sample_db: Path, case: str) -> None:
    edit, path = BAD_RECORDS[case]
    document = copy.deepcopy(sample())
    edit(document)
    bad = write_json(tmp_path / "bad.json", document)
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad])
    problems = caught.value.problems
    assert any(p.startswith(f"{bad}: {path}:") for p in problems), problems
    assert fingerprint(sample_db) == before


def test_a_good_file_with_a_bad_one_loads_nothing(tmp_path: Path) -> None:
    db = tmp_path / "empty.sqlite3"
    document = copy.deepcopy(sample())
    document["campaign_events"][17]["type"] = "phish"
    bad = write_json(tmp_path / "bad.json", document)
    with pytest.raises(LoadError) as caught:
        load_files(db, [SAMPLE_FIXTURE, bad])
    assert all(str(SAMPLE_FIXTURE) not in p for p in caught.value.problems)
    if db.exists():
        assert all(query(db, f"SELECT count(*) FROM {t}") == [(0,)] for t in DATA_TABLES)


def test_loading_twice_leaves_the_same_state_and_data_version(tmp_path: Path) -> None:
    """The same files again change no row, so every ETag (and cached answer) stays."""
    db = tmp_path / "twice.sqlite3"
    load_files(db, [SAMPLE_FIXTURE])
    first, first_meta = dump(db), meta(db)
    counts = load_files(db, [SAMPLE_FIXTURE])
    assert dump(db) == first and meta(db) == first_meta
    assert summary(db, counts, 1.0).endswith("; nothing changed, data version kept")


@pytest.mark.parametrize("table", ONE_ROW_EDITS)
def test_one_changed_row_of_any_table_moves_the_data_version(
    tmp_path: Path, sample_db: Path, table: str
) -> None:
    document = copy.deepcopy(sample())
    ONE_ROW_EDITS[table](document)
    before = meta(sample_db)
    counts = load_files(sample_db, [write_json(tmp_path / "edited.json", document)])
    after = meta(sample_db)
    assert int(after["data_version"]) == int(before["data_version"]) + 1
    assert after["data_token"] != before["data_token"]
    assert "nothing changed" not in summary(sample_db, counts, 1.0)


@pytest.mark.parametrize(
    "content",
    ['{"companies": [', "[]", '"text"', "\xff\xfe"],
    ids=["truncated", "array", "string", "bytes"],
)
def test_not_a_json_object_is_refused(tmp_path: Path, sample_db: Path, content: str) -> None:
    bad = tmp_path / "broken.json"
    bad.write_bytes(content.encode("latin-1"))
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad])
    assert caught.value.problems and all(p.startswith(f"{bad}:") for p in caught.value.problems)
    assert fingerprint(sample_db) == before


def test_every_problem_of_every_file_in_one_run(tmp_path: Path, sample_db: Path) -> None:
    """Issue 12 item 1: format and reference problems together, in file and record order."""
    document = copy.deepcopy(sample())
    document["campaign_events"][17]["type"] = "phish"
    document["inscriptions"][3]["course_id"] = UNKNOWN_ID
    document["employees"][5]["email"] = "not an address"
    bad = write_json(tmp_path / "bad.json", document)
    other = write_json(tmp_path / "other.json", {"teams": [{"id": 1, "company_id": 2}]})
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad, other])
    assert caught.value.problems == [
        f"{bad}: employees[5].email: Not a valid email address.",
        f"{bad}: campaign_events[17].type: Must be one of: open, click, report, fail.",
        f"{bad}: inscriptions[3].course_id: unknown course {UNKNOWN_ID}",
        f"{other}: teams[0].name: Missing data for required field.",
    ]
    assert fingerprint(sample_db) == before


def test_a_refused_record_is_not_blamed_again_through_its_children(
    tmp_path: Path, sample_db: Path
) -> None:
    """An employee refused for its email keeps its id: its events are not 'unknown'."""
    person = {**sample()["employees"][0], "id": UNKNOWN_ID, "email": "nope"}
    event = {**sample()["campaign_events"][0], "id": UNKNOWN_ID, "employee_id": UNKNOWN_ID}
    event["campaign_id"] = next(
        c["id"] for c in sample()["campaigns"] if c["company_id"] == person["company_id"]
    )
    bad = write_json(tmp_path / "bad.json", {"employees": [person], "campaign_events": [event]})
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad])
    assert caught.value.problems == [f"{bad}: employees[0].email: Not a valid email address."]


def test_problems_are_listed_up_to_a_hundred_then_counted(tmp_path: Path, sample_db: Path) -> None:
    events = copy.deepcopy(sample()["campaign_events"][:150])
    for event in events:
        event["employee_id"] = UNKNOWN_ID
    bad = write_json(tmp_path / "bad.json", {"campaign_events": events})
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad])
    problems = caught.value.problems
    assert len(problems) == 101
    assert problems[0] == f"{bad}: campaign_events[0].employee_id: unknown employee {UNKNOWN_ID}"
    assert problems[99].startswith(f"{bad}: campaign_events[99].employee_id:")
    assert problems[100] == "... and 50 more"


def test_a_record_given_by_two_files_takes_the_later_one(tmp_path: Path, sample_db: Path) -> None:
    """As if the files were loaded one after the other; within one file it is a duplicate."""
    first = {**sample()["campaign_events"][0], "type": "report"}
    later = {**sample()["campaign_events"][0], "type": "fail"}
    one = write_json(tmp_path / "one.json", {"campaign_events": [first]})
    two = write_json(tmp_path / "two.json", {"campaign_events": [later]})
    load_files(sample_db, [one, two])
    assert query(sample_db, "SELECT type FROM campaign_events WHERE id = ?", first["id"]) == [
        ("fail",)
    ]


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """Run scripts/load_fixtures.py as a user would."""
    return run_python("scripts/load_fixtures.py", *args)


@pytest.mark.system
def test_script_reports_the_record_path(tmp_path: Path) -> None:
    db = tmp_path / "cli.sqlite3"
    document = copy.deepcopy(sample())
    document["campaign_events"][17]["type"] = "phish"
    bad = write_json(tmp_path / "bad.json", document)
    refused = run_script(str(bad), "--db", str(db))
    assert refused.returncode == 1
    assert f"{bad}: campaign_events[17].type:" in refused.stderr
    assert "Traceback" not in refused.stderr
    loaded = run_script(str(SAMPLE_FIXTURE), "--db", str(db))
    assert loaded.returncode == 0, loaded.stderr
    assert query(db, "SELECT count(*) FROM campaign_events") == [
        (len(sample()["campaign_events"]),)
    ]


def test_records_from_elsewhere_load_like_a_file(tmp_path: Path, sample_db: Path) -> None:
    """load_items (for importers): the same checks, the same problems, the same writes."""
    event = {**sample()["campaign_events"][0], "id": UNKNOWN_ID}
    bad = {**event, "id": UNKNOWN_ID + 1, "employee_id": UNKNOWN_ID}
    source = [Item("campaign_events", 0, event), Item("campaign_events", 1, bad)]
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as caught:
        load_items(sample_db, [("import of x", source)])
    assert caught.value.problems == [
        f"import of x: campaign_events[1].employee_id: unknown employee {UNKNOWN_ID}"
    ]
    assert fingerprint(sample_db) == before
    load_items(sample_db, [("import of x", source[:1])])
    assert query(sample_db, "SELECT count(*) FROM campaign_events WHERE id = ?", UNKNOWN_ID) == [
        (1,)
    ]


def test_two_sections_at_one_place_are_refused_even_from_two_files(
    tmp_path: Path, sample_db: Path
) -> None:
    """(course, position) is unique: a clash is a problem naming the record, not an error."""
    section = sample()["course_sections"][0]
    new = {**section, "id": UNKNOWN_ID, "position": 9_000}
    clash = {**new, "id": UNKNOWN_ID + 1}
    one = write_json(tmp_path / "one.json", {"course_sections": [new]})
    two = write_json(tmp_path / "two.json", {"course_sections": [clash]})
    taken = write_json(tmp_path / "taken.json", {"course_sections": [{**new, "position": 1}]})
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [one, two, taken])
    course = section["course_id"]
    assert caught.value.problems == [
        f"{two}: course_sections[0].position: position 9000 of course {course}"
        f" is also given to section {UNKNOWN_ID}",
        f"{taken}: course_sections[0].position: position 1 of course {course}"
        f" is section {section['id']}'s",
    ]
    assert fingerprint(sample_db) == before


LOADER = ["-m", "app.tools.loader", str(SAMPLE_FIXTURE)]


@pytest.mark.system
@pytest.mark.parametrize("command", [LOADER, ["-m", "app"]])
def test_a_link_to_a_missing_file_is_refused_as_such(tmp_path: Path, command: list[str]) -> None:
    """A symbolic link whose file does not exist yet is named as such, not blamed on
    another writer, and nothing is made at either end (the server's first start too)."""
    link = tmp_path / "link.sqlite3"
    target = tmp_path / "missing.sqlite3"
    link.symlink_to(target)
    done = run_python(*command, "--db", str(link))
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    end = f"{link} is a symbolic link to {target}, which does not exist: name the database file"
    assert last.endswith(end + " itself")
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.sqlite3"]


@pytest.mark.system
def test_a_missing_directory_is_named(tmp_path: Path) -> None:
    """A database in a directory that does not exist (``~`` is not expanded without a
    shell) is refused with that directory, not with the loader's work file."""
    db = tmp_path / "~" / "x.sqlite3"
    done = run_python("-m", "app.tools.loader", str(SAMPLE_FIXTURE), "--db", str(db))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"load refused, database unchanged: cannot create {db}:"
        f" the directory {db.parent} does not exist"
    )
    assert list(tmp_path.iterdir()) == []
