"""contract.md 13 (the change sequence the event feed reads in): what each load does to it.

Every event a load writes, new or changed in any column, takes the next value of the
database's sequence (meta ``change_seq``), in id order; an event stored exactly as given
is not written and keeps its place; a load that writes nothing new leaves the sequence
alone; values only grow; two loads at once take disjoint, consecutive ranges in the order
they commit, so a reader polling by sequence never skips an event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.tools.loader import SAMPLE_FIXTURE, load_files

from .support.factories import query, sample
from .support.loads import loads_at_once, write_fixture


def seqs(db: Path) -> dict[int, int]:
    """Each event's sequence value, by id."""
    return dict(query(db, "SELECT id, seq FROM campaign_events"))


def change_seq(db: Path) -> int:
    return int(query(db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0])


def events_of(company_id: int) -> list[dict[str, Any]]:
    campaigns = {c["id"] for c in sample()["campaigns"] if c["company_id"] == company_id}
    return [dict(e) for e in sample()["campaign_events"] if e["campaign_id"] in campaigns]


def test_a_first_load_numbers_events_in_id_order(tmp_path: Path) -> None:
    db = tmp_path / "fresh.sqlite3"
    load_files(db, [SAMPLE_FIXTURE])
    ids = sorted(e["id"] for e in sample()["campaign_events"])
    assert seqs(db) == {event_id: n for n, event_id in enumerate(ids, start=1)}
    # Then the inscriptions and the employees take theirs (the change feeds).
    placed = len(sample()["inscriptions"]) + len(sample()["employees"])
    assert change_seq(db) == len(ids) + placed


def test_loading_the_same_file_again_moves_nothing(sample_db: Path) -> None:
    before, top = seqs(sample_db), change_seq(sample_db)
    counts = load_files(sample_db, [SAMPLE_FIXTURE])
    assert counts["campaign_events (new or changed)"] == 0
    assert seqs(sample_db) == before
    assert change_seq(sample_db) == top


def other_value(event: dict[str, Any], column: str) -> Any:
    """A different, still valid value of one column of an event (same company)."""
    same_company = events_of(1)
    if column == "employee_id":
        return next(e["employee_id"] for e in same_company if e["employee_id"] != event[column])
    if column == "campaign_id":
        return next(e["campaign_id"] for e in same_company if e["campaign_id"] != event[column])
    return {
        "type": "report" if event["type"] != "report" else "open",
        "timestamp": "2025-12-31T23:59:59Z",
        "with_captcha": not event["with_captcha"],
        "ip": "203.0.113.77",
        "user_agent": "Changed/1.0",
    }[column]


COLUMNS = ["type", "timestamp", "with_captcha", "employee_id", "campaign_id", "ip", "user_agent"]


@pytest.mark.parametrize("column", COLUMNS)
def test_a_changed_event_and_a_new_one_take_the_next_values(
    column: str, sample_db: Path, tmp_path: Path
) -> None:
    before, top = seqs(sample_db), change_seq(sample_db)
    unchanged, changed = events_of(1)[0], events_of(1)[1]
    changed[column] = other_value(changed, column)
    new = events_of(1)[2] | {"id": 10**9}  # a new id, higher than the changed one's
    write_fixture(tmp_path / "change.json", {"campaign_events": [new, unchanged, changed]})
    counts = load_files(sample_db, [tmp_path / "change.json"])
    after = seqs(sample_db)
    assert counts["campaign_events (new or changed)"] == 2
    assert after[changed["id"]] == top + 1 and after[new["id"]] == top + 2
    assert after[unchanged["id"]] == before[unchanged["id"]]
    assert {k: v for k, v in after.items() if k not in (changed["id"], new["id"])} == {
        k: v for k, v in before.items() if k != changed["id"]
    }
    assert change_seq(sample_db) == top + 2


def test_values_only_grow_and_never_repeat(sample_db: Path, tmp_path: Path) -> None:
    seen = set(seqs(sample_db).values())
    top = change_seq(sample_db)
    events = events_of(2)
    for round_ in range(3):
        edited = [e | {"timestamp": f"2026-01-0{round_ + 1}T00:00:00Z"} for e in events[:5]]
        fresh = [events[0] | {"id": 2 * 10**6 + 10 * round_ + i} for i in range(3)]
        write_fixture(tmp_path / "round.json", {"campaign_events": edited + fresh})
        load_files(sample_db, [tmp_path / "round.json"])
        now = seqs(sample_db)
        written = {now[e["id"]] for e in edited + fresh}
        assert min(written) > top and not written & seen
        assert max(now.values()) == change_seq(sample_db)
        top = change_seq(sample_db)
        seen |= written
    assert len(set(seqs(sample_db).values())) == len(seqs(sample_db))


@pytest.mark.system
def test_two_loads_at_once_take_consecutive_ranges_in_commit_order(
    sample_db: Path, tmp_path: Path
) -> None:
    top = change_seq(sample_db)
    template = events_of(1)[0]
    batches = {
        "a": [template | {"id": 3 * 10**6 + i} for i in range(200)],
        "b": [template | {"id": 4 * 10**6 - i} for i in range(150)],
    }
    files = [
        write_fixture(tmp_path / f"{n}.json", {"campaign_events": b}) for n, b in batches.items()
    ]
    results = loads_at_once(sample_db, files, ["campaign_events", "campaign_events"])
    assert [code for code, _ in results] == [0, 0], results
    now = seqs(sample_db)
    ranges = {n: sorted(now[e["id"]] for e in b) for n, b in batches.items()}
    assert sorted(ranges["a"] + ranges["b"]) == list(range(top + 1, top + 351))
    first, second = sorted(ranges.values(), key=min)
    assert first[-1] + 1 == second[0], "each load's values are consecutive, one after the other"
    in_id_order = [now[event_id] for event_id in sorted(e["id"] for e in batches["b"])]
    assert in_id_order == ranges["b"], "within a load, values follow the ids"
    assert change_seq(sample_db) == top + 350
