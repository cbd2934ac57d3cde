"""A plain-Python oracle for /stats/phishing and /stats/training, over fixture records.

It shares no code with the server: buckets come from walking the window day by day
(ISO weeks from ``isocalendar``), sends from the fixture's targets and events, rates and
means from exact ratios (support/reports.py), completion dates from the fixture or its
section results, load by load (``loaded``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from .reports import COUNTS, Data, half_up, instant, lower_median, person_matches, ratio

Row = dict[str, Any]


def bucket_of(day: dt.date, interval: str) -> tuple[dt.date, dt.date]:
    """The first and last day of the bucket holding ``day``."""
    if interval == "week":
        year, week, _ = day.isocalendar()
        first = dt.date.fromisocalendar(year, week, 1)
        return first, first + dt.timedelta(days=6)
    span = {"month": 1, "quarter": 3, "year": 12}[interval]
    month = (day.month - 1) // span * span + 1
    first = dt.date(day.year, month, 1)
    end = month + span  # the next bucket's month, 13 past December
    after = dt.date(day.year + (end - 1) // 12, (end - 1) % 12 + 1, 1)
    return first, after - dt.timedelta(days=1)


def window(first: dt.date, last: dt.date, interval: str) -> list[tuple[dt.date, dt.date]]:
    """Every bucket touching ``first`` to ``last``, walked day by day."""
    found: dict[dt.date, tuple[dt.date, dt.date]] = {}
    day = first
    while day <= last:
        bucket = bucket_of(day, interval)
        found[bucket[0]] = bucket
        day += dt.timedelta(days=1)
    return list(found.values())


def group_values(data: Data, person: dict[str, Any], group_by: str | None) -> list[str]:
    """The rows an employee counts in: one, or one per distinct team name."""
    if group_by is None:
        return [""]
    if group_by != "team":
        return [person[group_by]]
    teams = {t["id"]: t["name"] for t in data["teams"]}
    return sorted(
        {teams[m["team_id"]] for m in data["team_members"] if m["employee_id"] == person["id"]}
    )


def _people(data: Data, company: int, lists: Mapping[str, list[str]]) -> dict[int, Any]:
    return {
        e["id"]: e
        for e in data["employees"]
        if e["company_id"] == company and person_matches(data, e, lists)
    }


def _grid(
    buckets: list[tuple[dt.date, dt.date]],
    groups: set[str],
    group_by: str | None,
    figures: dict[tuple[dt.date, str], Row],
    empty: Row,
) -> list[Row]:
    rows = []
    for first, last in buckets:
        for group in sorted(groups) if group_by else [""]:
            row: Row = {"period_start": first.isoformat(), "period_end": last.isoformat()}
            if group_by:
                row[group_by] = group
            rows.append(row | figures.get((first, group), empty))
    return rows


def phishing(
    data: Data,
    company: int,
    buckets: list[tuple[dt.date, dt.date]],
    group_by: str | None = None,
    lists: Mapping[str, list[str]] | None = None,
    without_captcha: bool = False,
    left_out: set[int] | None = None,
) -> list[Row]:
    """Every row of /stats/phishing over ``buckets``; ``left_out``: event ids that
    ``filter[automation]`` leaves out."""
    people = _people(data, company, lists or {})
    sends: dict[tuple[int, int], set[str]] = defaultdict(set)  # (campaign, person): types
    firsts: dict[tuple[int, int, str], str] = {}
    for t in data.get("campaign_targets", []):
        sends.setdefault((t["campaign_id"], t["employee_id"]), set())
    for e in data.get("campaign_events", []):
        key = (e["campaign_id"], e["employee_id"])
        did = sends.setdefault(key, set())
        if (without_captcha and e["with_captcha"]) or e["id"] in (left_out or set()):
            continue
        did.add(e["type"])
        typed = (e["campaign_id"], e["employee_id"], e["type"])
        if typed not in firsts or e["timestamp"] < firsts[typed]:
            firsts[typed] = e["timestamp"]
    campaigns = {c["id"]: c for c in data["campaigns"] if c["company_id"] == company}
    by_cell: dict[tuple[dt.date, str], list[tuple[int, int]]] = defaultdict(list)
    groups: set[str] = set()
    for (campaign, person), _ in sends.items():
        if campaign not in campaigns or person not in people:
            continue
        day = dt.date.fromisoformat(campaigns[campaign]["launch_date"][:10])
        bucket = next((b for b in buckets if b[0] <= day <= b[1]), None)
        if bucket is None:
            continue
        for group in group_values(data, people[person], group_by):
            groups.add(group)
            by_cell[bucket[0], group].append((campaign, person))

    def seconds(campaign: int, person: int, kind: str) -> int | None:
        first = firsts.get((campaign, person, kind))
        if first is None:
            return None
        launch = instant(campaigns[campaign]["launch_date"])
        return max(0, int((instant(first) - launch).total_seconds()))

    figures = {}
    for cell, cell_sends in by_cell.items():
        counts = {
            name: sum(1 for s in cell_sends if kind in sends[s]) for kind, name in COUNTS.items()
        }
        row: Row = {
            "campaigns": len({c for c, _ in cell_sends}),
            "sends": len(cell_sends),
            "people": len({p for _, p in cell_sends}),
            **counts,
            **{f"{k}_rate": ratio(counts[n], len(cell_sends)) for k, n in COUNTS.items()},
        }
        for kind in ("click", "report"):
            found = [seconds(c, p, kind) for c, p in cell_sends]
            row[f"median_seconds_to_first_{kind}"] = lower_median(v for v in found if v is not None)
        figures[cell] = row
    empty: Row = {"campaigns": 0, "sends": 0, "people": 0, **dict.fromkeys(COUNTS.values(), 0)}
    empty |= {f"{k}_rate": None for k in COUNTS}
    empty |= {"median_seconds_to_first_click": None, "median_seconds_to_first_report": None}
    return _grid(buckets, groups, group_by, figures, empty)


def completed_at(data: Data, inscription: dict[str, Any]) -> str | None:
    """The date a load giving ``inscription`` stores: the fixture's, or, when completed, the
    latest completion of the section results in ``data`` (those stored after that load)."""
    if "completed_at" in inscription:
        return inscription["completed_at"]  # type: ignore[no-any-return]
    if inscription["status"] != "completed":
        return None
    days = [
        r["completed_at"]
        for r in data.get("section_results", [])
        if r["inscription_id"] == inscription["id"] and r["completed_at"] is not None
    ]
    return max(days, default=None)


# The key a load upserts each table's records by (the others': id).
KEYS = {
    "api_keys": ("key",),
    "partner_companies": ("partner_id", "company_id"),
    "team_members": ("team_id", "employee_id"),
    "campaign_targets": ("campaign_id", "employee_id"),
    "section_results": ("inscription_id", "section_id"),
}


def loaded(*loads: Data) -> dict[str, list[dict[str, Any]]]:
    """The records after ``loads``, one after the other: each by its key, the later load's
    winning, and every inscription with the completion date stored. A load that gives an
    inscription without one derives it from the section results stored then; a load of
    section results alone leaves it as it is."""
    tables: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    for load in loads:
        for table, rows in load.items():
            for row in rows:
                tables[table][tuple(row[k] for k in KEYS.get(table, ("id",)))] = row
        data = {table: list(rows.values()) for table, rows in tables.items()}
        for i in load.get("inscriptions", []):
            tables["inscriptions"][(i["id"],)] = i | {"completed_at": completed_at(data, i)}
    return {table: list(rows.values()) for table, rows in tables.items()}


def training(
    data: Data,
    company: int,
    buckets: list[tuple[dt.date, dt.date]],
    group_by: str | None = None,
    lists: Mapping[str, list[str]] | None = None,
) -> list[Row]:
    """Every row of /stats/training over ``buckets``."""
    people = _people(data, company, lists or {})
    results: dict[int, list[float]] = defaultdict(list)
    for r in data.get("section_results", []):
        if r["result"] is not None:
            results[r["inscription_id"]].append(r["result"])
    cells: dict[tuple[dt.date, str], Row] = {}
    groups: set[str] = set()

    def bucket(day: str | None) -> dt.date | None:
        if day is None:
            return None
        found = dt.date.fromisoformat(day)
        return next((b[0] for b in buckets if b[0] <= found <= b[1]), None)

    for i in data.get("inscriptions", []):
        if i["employee_id"] not in people:
            continue
        due, started = bucket(i["due_date"]), bucket(i["start_date"])
        if due is None and started is None:
            continue
        done = completed_at(data, i)
        for group in group_values(data, people[i["employee_id"]], group_by):
            groups.add(group)
            if due is not None:
                cell = cells.setdefault((due, group), _training_cell())
                cell["due"] += 1
                if i["status"] != "completed":
                    cell["not_completed"] += 1
                elif done is not None and done > i["due_date"]:
                    cell["completed_late"] += 1
                else:
                    cell["completed_on_time"] += 1
                cell["results"] += results[i["id"]]
            if started is not None:
                cell = cells.setdefault((started, group), _training_cell())
                cell["started"] += 1
                cell["no_due_date"] += i["due_date"] is None
    figures = {key: _training_row(cell) for key, cell in cells.items()}
    return _grid(buckets, groups, group_by, figures, _training_row(_training_cell()))


def _training_cell() -> Row:
    return {
        "due": 0,
        "completed_on_time": 0,
        "completed_late": 0,
        "not_completed": 0,
        "no_due_date": 0,
        "started": 0,
        "results": [],
    }


def _training_row(cell: Row) -> Row:
    results = cell.pop("results")
    mean = half_up(sum(map(Decimal, map(str, results))) / len(results), 1) if results else None
    return {
        "due": cell["due"],
        "completed_on_time": cell["completed_on_time"],
        "completed_late": cell["completed_late"],
        "not_completed": cell["not_completed"],
        "on_time_rate": ratio(cell["completed_on_time"], cell["due"]),
        "no_due_date": cell["no_due_date"],
        "started": cell["started"],
        "average_result": mean,
    }
