"""contract.md 10: campaign targets and event addresses, as the loader stores them.

A target row is stored as given (``sent_at`` an instant or null); every employee with an
event in a campaign is a target of it, the loader adding the row (``sent_at`` null) when
no target row lists them; a listed row's ``sent_at`` wins, in the same load or later.
Events keep ``ip`` and ``user_agent`` as given, null when left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.tools.loader import load_files

from .support.factories import query, sample
from .support.loads import write_fixture


def targets(db: Path) -> dict[tuple[int, int], str | None]:
    """Every target row: (campaign, employee) -> sent_at."""
    rows = query(db, "SELECT campaign_id, employee_id, sent_at FROM campaign_targets")
    return {(c, e): sent for c, e, sent in rows}


def test_the_sample_targets_are_its_rows_plus_what_its_events_imply(sample_db: Path) -> None:
    listed = {
        (t["campaign_id"], t["employee_id"]): t["sent_at"] for t in sample()["campaign_targets"]
    }
    acted = {(e["campaign_id"], e["employee_id"]) for e in sample()["campaign_events"]}
    implied = acted - set(listed)
    assert implied, "the sample leaves some targets to their events"
    assert targets(sample_db) == listed | dict.fromkeys(implied)
    campaigns = {c["id"] for c in sample()["campaigns"]}
    idle = set(listed) - acted
    assert {c for c, _ in idle} == campaigns, "every campaign has targets who did nothing"


def test_addresses_are_stored_as_given(sample_db: Path) -> None:
    stored = {
        i: (ip, agent)
        for i, ip, agent in query(sample_db, "SELECT id, ip, user_agent FROM campaign_events")
    }
    given = {e["id"]: (e.get("ip"), e.get("user_agent")) for e in sample()["campaign_events"]}
    assert stored == given
    assert any(ip for ip, _ in given.values()) and any(ip is None for ip, _ in given.values())


def new_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """A campaign and one of its company's employees that are not a target pair yet."""
    listed = {(t["campaign_id"], t["employee_id"]) for t in sample()["campaign_targets"]}
    acted = {(e["campaign_id"], e["employee_id"]) for e in sample()["campaign_events"]}
    for campaign in sample()["campaigns"]:
        for person in sample()["employees"]:
            pair = (campaign["id"], person["id"])
            if person["company_id"] == campaign["company_id"] and pair not in listed | acted:
                return campaign, person
    raise AssertionError("the sample has no free pair")


def event(event_id: int, campaign: dict[str, Any], person: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": event_id, "campaign_id": campaign["id"], "employee_id": person["id"],
        "type": "click", "timestamp": "2025-07-01T08:00:00Z", "with_captcha": False,
    }  # fmt: skip


def test_an_event_makes_a_target_and_a_listed_sent_at_wins(sample_db: Path, tmp_path: Path) -> None:
    campaign, person = new_pair()
    pair = (campaign["id"], person["id"])
    only_event = write_fixture(
        tmp_path / "event.json", {"campaign_events": [event(10**8, campaign, person)]}
    )
    counts = load_files(sample_db, [only_event])
    assert counts["campaign_targets (implied)"] == 1
    assert targets(sample_db)[pair] is None
    listed = {"campaign_id": pair[0], "employee_id": pair[1], "sent_at": "2025-06-30T09:00:00Z"}
    write_fixture(tmp_path / "target.json", {"campaign_targets": [listed]})
    load_files(sample_db, [tmp_path / "target.json"])
    assert targets(sample_db)[pair] == "2025-06-30T09:00:00Z"
    again = write_fixture(
        tmp_path / "again.json", {"campaign_events": [event(10**8 + 1, campaign, person)]}
    )
    load_files(sample_db, [again])
    assert targets(sample_db)[pair] == "2025-06-30T09:00:00Z", "an event never clears sent_at"


def test_a_target_listed_with_its_event_keeps_its_sent_at(sample_db: Path, tmp_path: Path) -> None:
    campaign, person = new_pair()
    listed = {"campaign_id": campaign["id"], "employee_id": person["id"]}  # sent_at left out
    both = {"campaign_events": [event(10**8, campaign, person)], "campaign_targets": [listed]}
    counts = load_files(sample_db, [write_fixture(tmp_path / "both.json", both)])
    assert counts["campaign_targets (implied)"] == 0
    assert targets(sample_db)[(campaign["id"], person["id"])] is None
