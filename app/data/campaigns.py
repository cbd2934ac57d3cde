"""Campaigns with their funnel: the list and the report on one (contract.md 11).

Every figure is computed by SQLite in the statement that reads the page. For each
campaign ``c`` of the page, the events of each type are one range of the index
``campaign_events_by_type`` (campaign, type, person, instant, captcha, verdict): a
count of distinct people is a walk along it (counting, in the same walk, the events of
each verdict), and a person's first event of a type is where their run of that range
starts. The fragments are shared with PostgreSQL's JSON of a campaign
(:mod:`app.data.pg.reports`): only the JSON and the numbers' rounding differ.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .aggregates import COUNT_NAMES, Fields, json_pairs, lower_median, rate, seconds_after
from .automation import and_kept, kept_events
from .listings import Listing, Record, owned, placeholders
from .vocabulary import AUTOMATION_FILTERS


@dataclass(frozen=True)
class CampaignFilters:
    """The list's filters; titles are already case-folded."""

    titles: Sequence[str] = ()
    from_launch_date: dt.date | None = None
    to_launch_date: dt.date | None = None
    without_captcha: bool = False
    automation: str = "include"  # filter[automation]


def events_of(kind: str, captcha: str) -> str:
    """Campaign ``c``'s events of one type (``captcha``: the with_captcha condition).

    No check of each person's company here: the databases' tenancy rules guarantee it,
    and a lookup per event would make the figures two to four times slower (measured on
    both stores). The departments, which join the people anyway, do check it.
    """
    return f"FROM campaign_events ev WHERE ev.campaign_id = c.id AND ev.type = '{kind}'{captcha}"


def captcha_condition(without_captcha: bool) -> str:
    """The condition on events ``ev`` that ``filter[with_captcha]=false`` adds."""
    return " AND ev.with_captcha = 0" if without_captcha else ""


# The verdicts a campaign record counts its events of (automation.py decides them).
VERDICT_COUNTS = {"automated": "automated_events", "suspected": "suspected_events"}


def figures(captcha: str, kept: str = "") -> str:
    """One row: campaign ``c``'s targets, the four counts of people and the events of
    each verdict in :data:`VERDICT_COUNTS`.

    Each type's range is walked once, counting its people and, in the same walk, its
    events of each verdict. ``captcha`` leaves out only captcha-verified events, which
    are always ``human``: the verdicts' counts are the same with it and without it.
    ``kept`` (``filter[automation]``'s condition) only decides whose events count as
    people: the verdicts are counted before any exclusion.
    """
    person = f"CASE WHEN {kept} THEN ev.employee_id END" if kept else "ev.employee_id"
    tallies = ", ".join(
        f"count(CASE WHEN ev.verdict = '{verdict}' THEN 1 END) AS {verdict}"
        for verdict in VERDICT_COUNTS
    )
    walks = ", ".join(
        f"(SELECT count(DISTINCT {person}) AS people, {tallies}"
        f" {events_of(kind, captcha)}) w_{kind}"
        for kind in COUNT_NAMES
    )
    counts = ", ".join(f"w_{kind}.people AS {name}" for kind, name in COUNT_NAMES.items())
    verdicts = ", ".join(
        f"{' + '.join(f'w_{kind}.{verdict}' for kind in COUNT_NAMES)} AS {name}"
        for verdict, name in VERDICT_COUNTS.items()
    )
    targets = "(SELECT count(*) FROM campaign_targets t WHERE t.campaign_id = c.id)"
    return f"SELECT {targets} AS targets, {counts}, {verdicts} FROM {walks}"


def verdict_counts(row: str) -> Fields:
    """``automated_events`` and ``suspected_events`` of ``row``."""
    return [(name, f"{row}.{name}") for name in VERDICT_COUNTS.values()]


def firsts(kind: str, captcha: str) -> str:
    """Column ``v``: each person's first event of ``kind`` in campaign ``c``."""
    return f"SELECT min(ev.timestamp) AS v {events_of(kind, captcha)} GROUP BY ev.employee_id"


def _median_seconds(kind: str, captcha: str) -> str:
    """Seconds from launch to the lower-middle person's first event of ``kind``."""
    first = lower_median(firsts(kind, captcha), f"s.{COUNT_NAMES[kind]}")
    return seconds_after(first, "c.launch_date")


def counts_and_rates(row: str, rate: Callable[[str, str], str]) -> Fields:
    """``targets``, the four counts and the four rates of ``row`` (``rate``: the backend's)."""
    counts = [(name, f"{row}.{name}") for name in COUNT_NAMES.values()]
    rates = [
        (f"{kind}_rate", rate(f"{row}.{name}", f"{row}.targets"))
        for kind, name in COUNT_NAMES.items()
    ]
    return [("targets", f"{row}.targets"), *counts, *rates]


def department_figures(captcha: str) -> str:
    """Campaign ``c``'s departments: targets and people per department (no order).

    One row per target and one per (type, person) with such an event, grouped by
    the person's department; the distinct pairs come straight from the index.
    """
    counts = ", ".join(
        f"count(CASE WHEN type = '{kind}' THEN 1 END) AS {name}"
        for kind, name in COUNT_NAMES.items()
    )
    return f"""SELECT department, sum(target) AS targets, {counts} FROM (
            SELECT e.department AS department, 1 AS target, NULL AS type
            FROM campaign_targets t JOIN employees e ON e.id = t.employee_id
            WHERE t.campaign_id = c.id AND e.company_id = c.company_id
            UNION ALL
            SELECT e.department, 0, p.type FROM (
                SELECT DISTINCT ev.type AS type, ev.employee_id AS employee_id
                FROM campaign_events ev WHERE ev.campaign_id = c.id{captcha}) p
            JOIN employees e ON e.id = p.employee_id AND e.company_id = c.company_id) u
        GROUP BY department"""


def _departments(captcha: str) -> str:
    """Campaign ``c``'s ``by_department`` array, by department name."""
    department = json_pairs([("department", "d.department"), *counts_and_rates("d", rate)])
    return f"""(SELECT json_group_array(json_object({department})) FROM (
        {department_figures(captcha)} ORDER BY department) d)"""


def conditions(without_captcha: bool, automation: str) -> tuple[str, str, str]:
    """The conditions a campaign's figures take from its filters: the walk's (captcha),
    the people's (``filter[automation]``, bare) and every other figure's (both)."""
    captcha = captcha_condition(without_captcha)
    return captcha, kept_events(automation), captcha + and_kept(automation)


def campaign_json(without_captcha: bool, automation: str, by_department: bool) -> str:
    """The JSON of campaign ``c``, keys in the order of contract.md 11.

    The figures are computed once into ``s`` (MATERIALIZED: otherwise each use of a
    count would run its query again).
    """
    captcha, kept, counted = conditions(without_captcha, automation)
    departments = f", 'by_department', {_departments(counted)}" if by_department else ""
    return f"""(WITH s AS MATERIALIZED ({figures(captcha, kept)})
    SELECT json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date,
        {json_pairs(counts_and_rates("s", rate))},
        'median_seconds_to_first_click', {_median_seconds("click", counted)},
        'median_seconds_to_first_report', {_median_seconds("report", counted)},
        {json_pairs(verdict_counts("s"))}
        {departments}) FROM s)"""


def record_name(without_captcha: bool, automation: str, by_department: bool) -> str:
    """The name of a campaign's record: a page's (``campaign``) or one report's
    (``campaign_report``), without the captcha-solving events or with them, and
    without the events ``filter[automation]`` leaves out."""
    name = "campaign_report" if by_department else "campaign"
    name = f"{name}_without_captcha" if without_captcha else name
    return name if automation == "include" else f"{name}_{automation}"


# Every variant of the campaign's record, built once.
VARIANTS = [
    (without, automation, departments)
    for without in (False, True)
    for automation in AUTOMATION_FILTERS
    for departments in (False, True)
]
RECORDS = {v: Record(record_name(*v), campaign_json(*v)) for v in VARIANTS}


def campaigns_listing(company_id: int, filters: CampaignFilters) -> Listing:
    """The company's campaigns matching the filters, by launch date then id."""
    where = ["c.company_id = ?"]
    params: list[object] = [company_id]
    if filters.titles:
        where.append(f"c.title_key IN ({placeholders(list(filters.titles))})")
        params.extend(filters.titles)
    for value, condition in (
        (filters.from_launch_date, "substr(c.launch_date, 1, 10) >= ?"),
        (filters.to_launch_date, "substr(c.launch_date, 1, 10) <= ?"),
    ):
        if value is not None:
            where.append(condition)
            params.append(value.isoformat())
    rows_from = f"FROM campaigns c WHERE {' AND '.join(where)}"
    record = RECORDS[filters.without_captcha, filters.automation, False]
    return Listing(record, rows_from, rows_from, "c.launch_date, c.id", tuple(params), heavy=True)


def campaign_report(
    company_id: int, campaign_id: int, without_captcha: bool, automation: str = "include"
) -> Listing:
    """One campaign of the company with its departments; RecordNotFound unless theirs."""
    rows_from = "FROM campaigns c WHERE c.id = ? AND c.company_id = ?"
    record = RECORDS[without_captcha, automation, True]
    guard = owned("campaigns", campaign_id, company_id)
    params = (campaign_id, company_id)
    return Listing(record, rows_from, rows_from, "c.id", params, guard, heavy=True)
