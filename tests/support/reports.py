"""A plain-Python oracle for the reports of contract.md 11 and 12, over fixture records.

It reads the records a fixture holds (the sample, or a generated dataset) and says what
each report must answer, with exact arithmetic: rates and means are rounded half up
from the exact ratio (Decimal), medians are the lower middle of the sorted seconds. It
shares no code with the server.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from .verdicts import decide

Data = Mapping[str, list[dict[str, Any]]]
TYPES = ("open", "click", "report", "fail")
COUNTS = {"open": "opened", "click": "clicked", "report": "reported", "fail": "failed"}
STATUSES = ("not_started", "in_progress", "completed")
# filter[automation]: the verdicts each value leaves out (docs/interface.md).
DROPPED = {"include": (), "exclude_automated": ("automated",)}
DROPPED["exclude_suspected"] = ("automated", "suspected")


def instant(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def half_up(value: Decimal, places: int) -> float:
    """``value`` rounded half up to ``places`` decimals, as the JSON number a client reads."""
    return float(value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def ratio(count: int, total: int) -> float | None:
    """count / total rounded half up to 4 decimals; None when total is 0."""
    return half_up(Decimal(count) / Decimal(total), 4) if total else None


def lower_median(values: Iterable[int]) -> int | None:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2] if ordered else None


def targets_of(data: Data) -> dict[int, set[int]]:
    """Each campaign's targets: the listed ones and everybody with an event (contract 10)."""
    targets: dict[int, set[int]] = {c["id"]: set() for c in data.get("campaigns", [])}
    for row in data.get("campaign_targets", []):
        targets[row["campaign_id"]].add(row["employee_id"])
    for event in data.get("campaign_events", []):
        targets[event["campaign_id"]].add(event["employee_id"])
    return targets


def funnel(people: set[int], did: Mapping[str, set[int]]) -> dict[str, Any]:
    """targets, the four counts (of ``people``) and their rates."""
    counts = {COUNTS[t]: len(did[t] & people) for t in TYPES}
    rates = {f"{t}_rate": ratio(counts[COUNTS[t]], len(people)) for t in TYPES}
    return {"targets": len(people), **counts, **rates}


def verdicts(data: Data) -> dict[int, str]:
    """Each event's verdict by the rules' defaults (the loaders' settings in the tests)."""
    sent = {
        (t["campaign_id"], t["employee_id"]): t.get("sent_at")
        for t in data.get("campaign_targets", [])
    }
    decided = decide(data.get("campaign_events", []), sent)
    return {event: automation["verdict"] for event, automation in decided.items()}


def counted(
    event: Mapping[str, Any], without_captcha: bool, automation: str, verdict: Mapping[int, str]
) -> bool:
    """Whether the filters keep ``event`` in the figures."""
    if without_captcha and event["with_captcha"]:
        return False
    return verdict[event["id"]] not in DROPPED[automation]


def campaign(
    data: Data,
    campaign_id: int,
    without_captcha: bool = False,
    verdict: Mapping[int, str] | None = None,
    automation: str = "include",
) -> dict[str, Any]:
    """One campaign as the list gives it (keys in contract order); ``verdict``: each
    event's, when already decided (:func:`verdicts`)."""
    row = next(c for c in data["campaigns"] if c["id"] == campaign_id)
    verdict = verdicts(data) if verdict is None else verdict
    own = [e["id"] for e in data.get("campaign_events", []) if e["campaign_id"] == campaign_id]
    launch = instant(row["launch_date"])
    people = targets_of(data)[campaign_id]
    firsts: dict[str, dict[int, dt.datetime]] = {t: {} for t in TYPES}
    for event in data.get("campaign_events", []):
        if event["campaign_id"] != campaign_id or not counted(
            event, without_captcha, automation, verdict
        ):
            continue
        when, seen = instant(event["timestamp"]), firsts[event["type"]]
        person = event["employee_id"]
        seen[person] = min(when, seen.get(person, when))

    def median(kind: str) -> int | None:
        seconds = (int((t - launch).total_seconds()) for t in firsts[kind].values())
        return lower_median(max(0, s) for s in seconds)

    did = {t: set(firsts[t]) for t in TYPES}
    return {
        "id": row["id"],
        "title": row["title"],
        "launch_date": row["launch_date"],
        **funnel(people, did),
        "median_seconds_to_first_click": median("click"),
        "median_seconds_to_first_report": median("report"),
        "automated_events": sum(verdict[e] == "automated" for e in own),
        "suspected_events": sum(verdict[e] == "suspected" for e in own),
    }


def campaign_report(
    data: Data,
    campaign_id: int,
    without_captcha: bool = False,
    automation: str = "include",
    verdict: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """One campaign with by_department (its targets' departments, by name)."""
    verdict = verdicts(data) if verdict is None else verdict
    departments = {e["id"]: e["department"] for e in data["employees"]}
    people = targets_of(data)[campaign_id]
    did: dict[str, set[int]] = {t: set() for t in TYPES}
    for event in data.get("campaign_events", []):
        if event["campaign_id"] == campaign_id and counted(
            event, without_captcha, automation, verdict
        ):
            did[event["type"]].add(event["employee_id"])
    by_department = []
    for name in sorted({departments[p] for p in people}):
        members = {p for p in people if departments[p] == name}
        by_department.append({"department": name, **funnel(members, did)})
    one = campaign(data, campaign_id, without_captcha, verdict, automation)
    return {**one, "by_department": by_department}


def campaigns(
    data: Data, company_id: int, without_captcha: bool = False, automation: str = "include"
) -> list[dict[str, Any]]:
    """The company's campaigns in the list's order: launch_date, then id."""
    own = [c for c in data["campaigns"] if c["company_id"] == company_id]
    own.sort(key=lambda c: (c["launch_date"], c["id"]))
    verdict = verdicts(data)
    return [campaign(data, c["id"], without_captcha, verdict, automation) for c in own]


def employee(
    data: Data,
    employee_id: int,
    today: dt.date,
    automation: str = "include",
    verdict: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """One employee of the directory with their phishing and training blocks (the events
    ``automation`` leaves out count nowhere in them)."""
    verdict = verdicts(data) if verdict is None else verdict
    person = next(e for e in data["employees"] if e["id"] == employee_id)
    teams = {t["id"]: t["name"] for t in data.get("teams", [])}
    groups = sorted(
        (teams[m["team_id"]], m["team_id"])
        for m in data.get("team_members", [])
        if m["employee_id"] == employee_id
    )
    events = [
        e
        for e in data.get("campaign_events", [])
        if e["employee_id"] == employee_id and counted(e, False, automation, verdict)
    ]
    targeted = [c for c, people in targets_of(data).items() if employee_id in people]
    phishing: dict[str, Any] = {"campaigns": len(targeted)}
    for kind in TYPES:
        phishing[COUNTS[kind]] = len({e["campaign_id"] for e in events if e["type"] == kind})
    phishing["last_event_at"] = max((e["timestamp"] for e in events), default=None)
    own = [i for i in data.get("inscriptions", []) if i["employee_id"] == employee_id]
    return {
        **{k: person[k] for k in ("id", "first_name", "last_name", "email")},
        **{k: person[k] for k in ("department", "country")},
        "groups": [{"name": name} for name, _ in groups],
        "phishing": phishing,
        "training": training(own, today),
    }


def overdue(inscription: dict[str, Any], today: dt.date) -> bool:
    due = inscription["due_date"]
    return inscription["status"] != "completed" and due is not None and due < today.isoformat()


def training(inscriptions: list[dict[str, Any]], today: dt.date) -> dict[str, int]:
    """Inscriptions by status, and those overdue on ``today``."""
    counts = {"inscriptions": len(inscriptions)}
    counts |= {s: sum(i["status"] == s for i in inscriptions) for s in STATUSES}
    counts["overdue"] = sum(overdue(i, today) for i in inscriptions)
    return counts


def course(data: Data, course_id: int, today: dt.date) -> dict[str, Any]:
    """One course with its training coverage."""
    row = next(c for c in data["courses"] if c["id"] == course_id)
    own = [i for i in data.get("inscriptions", []) if i["course_id"] == course_id]
    ids = {i["id"] for i in own}
    results = [
        Decimal(str(r["result"]))
        for r in data.get("section_results", [])
        if r["inscription_id"] in ids and r["result"] is not None
    ]
    counts = training(own, today)
    return {
        "id": row["id"],
        "title": row["title"],
        "sections": sum(s["course_id"] == course_id for s in data.get("course_sections", [])),
        **counts,
        "completion_rate": ratio(counts["completed"], counts["inscriptions"]),
        "average_result": half_up(sum(results) / len(results), 1) if results else None,
    }


def courses(data: Data, company_id: int, today: dt.date) -> list[dict[str, Any]]:
    own = sorted(c["id"] for c in data["courses"] if c["company_id"] == company_id)
    return [course(data, c, today) for c in own]


def employees(
    data: Data, company_id: int, today: dt.date, automation: str = "include"
) -> list[dict[str, Any]]:
    own = sorted(e["id"] for e in data["employees"] if e["company_id"] == company_id)
    verdict = verdicts(data)
    return [employee(data, e, today, automation, verdict) for e in own]


def person_matches(data: Data, person: dict[str, Any], lists: Mapping[str, list[str]]) -> bool:
    """contract.md 3's person filters: whole values in any case, OR inside, AND across."""
    teams = {t["id"]: t["name"] for t in data.get("teams", [])}
    facts = {"name": [person["first_name"]], "last_name": [person["last_name"]]}
    facts |= {k: [person[k]] for k in ("email", "department", "country")}
    facts["teams"] = [
        teams[m["team_id"]]
        for m in data.get("team_members", [])
        if m["employee_id"] == person["id"]
    ]
    for name, values in lists.items():
        wanted = {v.strip().casefold() for v in values}
        if not wanted & {f.casefold() for f in facts[name]}:
            return False
    return True
