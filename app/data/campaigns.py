"""Campaigns with their funnel: the list and the report on one (contract.md 11).

Every figure is read from the summaries the writers keep (:mod:`app.data.summaries`):
for each campaign ``c`` of the page, its rows of ``campaign_funnels`` under the
request's filters (one a department: the report's ``by_department``, and summed, the
campaign's figures), and for each median a walk along the campaign's histogram of
first instants. The fragments are shared with PostgreSQL's JSON of a campaign
(:mod:`app.data.pg.reports`): only the JSON and the numbers' rounding differ.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .aggregates import COUNT_NAMES, Fields, json_pairs, rate, seconds_after
from .listings import SUMMARY_RECORDS_INLINE, Listing, Record, owned, placeholders
from .summaries import FUNNEL_COUNTS, MEDIAN_KINDS, VERDICT_COLUMNS, filter_key
from .vocabulary import AUTOMATION_FILTERS


@dataclass(frozen=True)
class CampaignFilters:
    """The list's filters; titles are already case-folded."""

    titles: Sequence[str] = ()
    from_launch_date: dt.date | None = None
    to_launch_date: dt.date | None = None
    without_captcha: bool = False
    automation: str = "include"  # filter[automation]


# The verdicts a campaign record counts its events of (automation.py decides them).
VERDICT_COUNTS = VERDICT_COLUMNS


# The summaries were made with the campaign's own people: a campaign whose people are not
# of its company (rows moved behind the tenancy triggers' backs) shows none of them. One
# probe of its first send in normal data.
OWN_PEOPLE = (
    "EXISTS (SELECT 1 FROM send_firsts s JOIN employees e ON e.id = s.employee_id"
    " WHERE s.campaign_id = c.id AND e.company_id = c.company_id)"
)


def funnel_rows(key: str) -> str:
    """Campaign ``c``'s rows of ``campaign_funnels`` (one a department) under filters ``key``."""
    return (
        f"FROM campaign_funnels f WHERE f.campaign_id = c.id AND f.filters = '{key}'"
        f" AND {OWN_PEOPLE}"
    )


def figures(key: str) -> str:
    """One row: campaign ``c``'s targets, the four counts of people and the events of
    each verdict in :data:`VERDICT_COUNTS`, summed over its departments."""
    sums = ", ".join(
        f"CAST(coalesce(sum(f.{column}), 0) AS BIGINT) AS {column}" for column in FUNNEL_COUNTS
    )
    return f"SELECT {sums} {funnel_rows(key)}"


def verdict_counts(row: str) -> Fields:
    """``automated_events`` and ``suspected_events`` of ``row``."""
    return [(name, f"{row}.{name}") for name in VERDICT_COUNTS.values()]


def medians(key: str, seconds_after: Callable[[str, str], str]) -> Fields:
    """The two medians of campaign ``c`` whose figures are ``s``, from the medians the
    writers keep (``seconds_after``: the backend's); none when no one was counted."""
    return [
        (
            f"median_seconds_to_first_{kind}",
            seconds_after(
                f"CASE WHEN s.{COUNT_NAMES[kind]} > 0 THEN (SELECT md.instant"
                f" FROM campaign_medians md WHERE md.campaign_id = c.id"
                f" AND md.filters = '{key}' AND md.kind = '{kind}') END",
                "c.launch_date",
            ),
        )
        for kind in MEDIAN_KINDS
    ]


def counts_and_rates(row: str, rate: Callable[[str, str], str]) -> Fields:
    """``targets``, the four counts and the four rates of ``row`` (``rate``: the backend's)."""
    counts = [(name, f"{row}.{name}") for name in COUNT_NAMES.values()]
    rates = [
        (f"{kind}_rate", rate(f"{row}.{name}", f"{row}.targets"))
        for kind, name in COUNT_NAMES.items()
    ]
    return [("targets", f"{row}.targets"), *counts, *rates]


def _departments(key: str) -> str:
    """Campaign ``c``'s ``by_department`` array, by department name."""
    department = json_pairs([("department", "d.department"), *counts_and_rates("d", rate)])
    return f"""(SELECT json_group_array(json_object({department})) FROM (
        SELECT f.* {funnel_rows(key)} ORDER BY f.department) d)"""


def campaign_json(without_captcha: bool, automation: str, by_department: bool) -> str:
    """The JSON of campaign ``c``, keys in the order of contract.md 11.

    The figures are read once into ``s`` (MATERIALIZED: otherwise each use of a
    count would run its query again).
    """
    key = filter_key(without_captcha, automation)
    departments = f", 'by_department', {_departments(key)}" if by_department else ""
    return f"""(WITH s AS MATERIALIZED ({figures(key)})
    SELECT json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date,
        {json_pairs(counts_and_rates("s", rate))},
        {json_pairs(medians(key, seconds_after))},
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
    return Listing(
        record, rows_from, rows_from, "c.launch_date, c.id", tuple(params), heavy=True,
        inline_records=SUMMARY_RECORDS_INLINE,
    )  # fmt: skip


def campaign_report(
    company_id: int, campaign_id: int, without_captcha: bool, automation: str = "include"
) -> Listing:
    """One campaign of the company with its departments; RecordNotFound unless theirs.

    Not heavy: its figures are the writers' summaries, a row a department, so it is a
    short read on the event loop (a page of campaigns, up to a thousand, is heavy: only
    one of at most ``SUMMARY_RECORDS_INLINE`` is read there).
    """
    rows_from = "FROM campaigns c WHERE c.id = ? AND c.company_id = ?"
    record = RECORDS[without_captcha, automation, True]
    guard = owned("campaigns", campaign_id, company_id)
    params = (campaign_id, company_id)
    return Listing(record, rows_from, rows_from, "c.id", params, guard)
