"""Trends over time and breakdowns by group: /stats/phishing and /stats/training.

A window of whole buckets (ISO weeks, months, quarters, years) is cut into rows, one a
bucket, or one a (bucket, group) pair for every group met in the window: a dense grid.
Each answer is one statement over indexed raw rows, shared by both stores: the buckets
are a ``VALUES`` list, every figure is computed by the database (a send's events are a
few index seeks, once per send), and each row's JSON is built from its
columns (SQLite's here, PostgreSQL's in :mod:`app.data.pg.reports`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .aggregates import COUNT_NAMES, Fields, json_pairs, rate, rounded_mean
from .automation import and_kept
from .inscriptions import person_conditions
from .listings import Listing, Record

INTERVALS = ("week", "month", "quarter", "year")
GROUPS = ("department", "country", "team")
MAX_BUCKETS = 120

# The months of a bucket (weeks are 7 days).
_MONTHS = {"month": 1, "quarter": 3, "year": 12}


def period_start(day: dt.date, interval: str) -> dt.date:
    """The first day of the bucket of ``interval`` that holds ``day`` (weeks: Mondays)."""
    if interval == "week":
        return day - dt.timedelta(days=day.weekday())
    months = _MONTHS[interval]
    return day.replace(month=(day.month - 1) // months * months + 1, day=1)


def next_start(start: dt.date, interval: str) -> dt.date | None:
    """The first day of the bucket after the one starting on ``start``; None past 9999."""
    try:
        if interval == "week":
            return start + dt.timedelta(days=7)
        month = start.month - 1 + _MONTHS[interval]
        return start.replace(year=start.year + month // 12, month=month % 12 + 1)
    except (OverflowError, ValueError):
        return None


def last_day(start: dt.date, interval: str) -> dt.date:
    """The last day of the bucket of ``interval`` starting on ``start`` (date.max past 9999)."""
    after = next_start(start, interval)
    return dt.date.max if after is None else after - dt.timedelta(days=1)


def buckets(
    first: dt.date, last: dt.date, interval: str, limit: int
) -> list[tuple[dt.date, dt.date]]:
    """The buckets from the one holding ``first`` to the one holding ``last``, each its
    first and last day; at most ``limit + 1`` of them (more: the window is too long)."""
    found: list[tuple[dt.date, dt.date]] = []
    start: dt.date | None = period_start(first, interval)
    while start is not None and start <= last and len(found) <= limit:
        found.append((start, last_day(start, interval)))
        start = next_start(start, interval)
    return found


def default_window(today: dt.date) -> tuple[dt.date, dt.date]:
    """The 12 whole months before today's month and today's month (UTC)."""
    month = today.year * 12 + today.month - 1 - 12
    first = dt.date(month // 12, month % 12 + 1, 1)
    after = next_start(today.replace(day=1), "month")
    return first, dt.date.max if after is None else after - dt.timedelta(days=1)


@dataclass(frozen=True)
class StatsFilters:
    """A stats query: its buckets (first and last days), grouping and filters."""

    buckets: Sequence[tuple[dt.date, dt.date]]
    group_by: str | None = None
    lists: Mapping[str, Sequence[str]] = field(default_factory=dict)  # case-folded
    without_captcha: bool = False
    automation: str = "include"  # filter[automation] (phishing)


def _grid_parts(filters: StatsFilters) -> tuple[str, list[object]]:
    """The CTE ``b`` of the buckets (period_start, period_end, period_last: the last
    instant of the period as stored text compares) and its parameters."""
    rows = ", ".join("(?, ?, ?)" for _ in filters.buckets)
    params: list[object] = []
    for first, last in filters.buckets:
        params += [first.isoformat(), last.isoformat(), f"{last.isoformat()}T23:59:59Z"]
    values = (
        "SELECT column1 AS period_start, column2 AS period_end, column3 AS period_last"
        f" FROM (VALUES {rows}) v"
    )
    return f"b AS ({values})", params


def _group(group_by: str | None, company_id: int) -> tuple[str, str, list[object]]:
    """The group value of employee ``e``, the join it needs and the join's parameters
    ('' when not grouped).

    Teams by name, once per (employee, name): an employee in two teams is in both rows.
    """
    if group_by == "team":
        teams = (
            "JOIN (SELECT DISTINCT tm.employee_id, t.name FROM teams t"
            " JOIN team_members tm ON tm.team_id = t.id WHERE t.company_id = ?) g"
            " ON g.employee_id = e.id"
        )
        return "g.name", teams, [company_id]
    if group_by in ("department", "country"):
        return f"e.{group_by}", "", []
    return "''", "", []


def _groups(group_by: str | None, rows: str) -> str:
    """The CTE ``gr`` of the grid's groups: those met in ``rows``, or the one ''."""
    if group_by is None:
        return "gr AS (SELECT '' AS grp)"
    return f"gr AS (SELECT DISTINCT grp FROM {rows})"


def _first(kind: str, captcha: str) -> str:
    """Send ``s``'s first event of ``kind`` (NULL: none): a seek of the type index."""
    return (
        f"(SELECT min(ev.timestamp) FROM campaign_events ev WHERE ev.campaign_id = s.campaign_id"
        f" AND ev.type = '{kind}' AND ev.employee_id = s.employee_id{captcha})"
    )


def _seconds(instant: str) -> str:
    """Whole seconds from the send's launch to ``instant``, 0 when it came first."""
    return (
        f"CASE WHEN {instant} < p.launch_date THEN 0"
        f" ELSE unixepoch({instant}) - unixepoch(p.launch_date) END"
    )


def _lower_median(values: str, rank: str, count: str) -> str:
    """The ((n + 1) / 2)-th smallest of a group's ``values`` (ranked by ``rank``)."""
    return f"min(CASE WHEN {rank} = ({count} + 1) / 2 THEN {values} END)"


PHISHING_COUNTS = ("campaigns", "sends", "people", *COUNT_NAMES.values())


def phishing_grid(filters: StatsFilters, company_id: int) -> tuple[str, str, list[object]]:
    """The rows (FROM), the rows to count (FROM) and their parameters."""
    buckets, params = _grid_parts(filters)
    group, join, join_params = _group(filters.group_by, company_id)
    person, person_params = person_conditions(filters.lists, "e.id", company_id)
    captcha = " AND ev.with_captcha = 0" if filters.without_captcha else ""
    captcha += and_kept(filters.automation)
    where = " AND ".join(["c.company_id = ?", *person])
    # One row a send (and group): the campaign's bucket is its launch date's.
    sends = f"""s AS MATERIALIZED (SELECT b.period_start, {group} AS grp, t.campaign_id,
        t.employee_id, c.launch_date FROM b JOIN campaigns c ON c.launch_date >= b.period_start
        AND c.launch_date <= b.period_last JOIN campaign_targets t ON t.campaign_id = c.id
        JOIN employees e ON e.id = t.employee_id {join} WHERE {where})"""
    events = f"""p AS MATERIALIZED (SELECT s.period_start, s.grp, s.campaign_id, s.employee_id,
        s.launch_date,
        CASE WHEN EXISTS (SELECT 1 FROM campaign_events ev WHERE ev.campaign_id = s.campaign_id
            AND ev.type = 'open' AND ev.employee_id = s.employee_id{captcha}) THEN 1 ELSE 0 END
            AS opened,
        CASE WHEN EXISTS (SELECT 1 FROM campaign_events ev WHERE ev.campaign_id = s.campaign_id
            AND ev.type = 'fail' AND ev.employee_id = s.employee_id{captcha}) THEN 1 ELSE 0 END
            AS failed,
        {_first("click", captcha)} AS first_click, {_first("report", captcha)} AS first_report
        FROM s)"""
    part = "PARTITION BY p.period_start, p.grp"
    ranked = f"""r AS (SELECT p.period_start, p.grp, p.campaign_id, p.employee_id, p.opened,
        p.failed, {_seconds("p.first_click")} AS click_s, {_seconds("p.first_report")} AS report_s,
        row_number() OVER ({part} ORDER BY {_seconds("p.first_click")} NULLS LAST) AS click_rank,
        row_number() OVER ({part} ORDER BY {_seconds("p.first_report")} NULLS LAST) AS report_rank,
        count(p.first_click) OVER ({part}) AS clicks, count(p.first_report) OVER ({part}) AS reports
        FROM p)"""
    figures = f"""f AS (SELECT period_start, grp, count(DISTINCT campaign_id) AS campaigns,
        count(*) AS sends, count(DISTINCT employee_id) AS people, sum(opened) AS opened,
        count(click_s) AS clicked, count(report_s) AS reported, sum(failed) AS failed,
        {_lower_median("click_s", "click_rank", "clicks")} AS median_click,
        {_lower_median("report_s", "report_rank", "reports")} AS median_report
        FROM r GROUP BY period_start, grp)"""
    counts = ", ".join(f"coalesce(f.{name}, 0) AS {name}" for name in PHISHING_COUNTS)
    rows = f"""(WITH {buckets}, {sends}, {_groups(filters.group_by, "s")}, {events}, {ranked},
        {figures} SELECT b.period_start, b.period_end, gr.grp, {counts},
        f.median_click, f.median_report FROM b CROSS JOIN gr
        LEFT JOIN f ON f.period_start = b.period_start AND f.grp = gr.grp) x"""
    counted = f"(WITH {buckets}, {sends}, {_groups(filters.group_by, 's')} SELECT 1 FROM b, gr) x"
    return f"FROM {rows}", f"FROM {counted}", [*params, *join_params, company_id, *person_params]


def phishing_fields(rate: Callable[[str, str], str], group_by: str | None) -> Fields:
    """A phishing row's keys in order over the grid's row ``x`` (``rate``: the backend's)."""
    rates = [(f"{kind}_rate", rate(f"x.{name}", "x.sends")) for kind, name in COUNT_NAMES.items()]
    return [
        ("period_start", "x.period_start"),
        ("period_end", "x.period_end"),
        *([(group_by, "x.grp")] if group_by else []),
        *((name, f"x.{name}") for name in PHISHING_COUNTS),
        *rates,
        ("median_seconds_to_first_click", "x.median_click"),
        ("median_seconds_to_first_report", "x.median_report"),
    ]


TRAINING_COUNTS = ("due", "completed_on_time", "completed_late", "not_completed")


def training_grid(filters: StatsFilters, company_id: int) -> tuple[str, str, list[object]]:
    """The rows (FROM), the rows to count (FROM) and their parameters."""
    buckets, params = _grid_parts(filters)
    group, join, join_params = _group(filters.group_by, company_id)
    person, person_params = person_conditions(filters.lists, "e.id", company_id)
    first, last = filters.buckets[0][0].isoformat(), filters.buckets[-1][1].isoformat()
    where = " AND ".join(["i.company_id = ?", *person])
    # The inscriptions due or started in the window (once per group).
    met = f"""i AS MATERIALIZED (SELECT {group} AS grp, i.id, i.start_date, i.due_date, i.status,
        i.completed_at FROM inscriptions i JOIN employees e ON e.id = i.employee_id {join}
        WHERE {where} AND (i.due_date BETWEEN ? AND ? OR i.start_date BETWEEN ? AND ?))"""
    done = "i.status = 'completed'"
    due = f"""d AS (SELECT b.period_start, i.grp, count(*) AS due,
        sum(CASE WHEN {done} AND (i.completed_at IS NULL OR i.completed_at <= i.due_date)
            THEN 1 ELSE 0 END) AS completed_on_time,
        sum(CASE WHEN {done} AND i.completed_at > i.due_date THEN 1 ELSE 0 END) AS completed_late,
        sum(CASE WHEN {done} THEN 0 ELSE 1 END) AS not_completed
        FROM b JOIN i ON i.due_date BETWEEN b.period_start AND b.period_end
        GROUP BY b.period_start, i.grp)"""
    results = """res AS (SELECT b.period_start, i.grp, sum(r.result) AS total, count(r.result) AS n
        FROM b JOIN i ON i.due_date BETWEEN b.period_start AND b.period_end
        JOIN section_results r ON r.inscription_id = i.id GROUP BY b.period_start, i.grp)"""
    started = """st AS (SELECT b.period_start, i.grp, count(*) AS started,
        sum(CASE WHEN i.due_date IS NULL THEN 1 ELSE 0 END) AS no_due_date
        FROM b JOIN i ON i.start_date BETWEEN b.period_start AND b.period_end
        GROUP BY b.period_start, i.grp)"""
    counts = ", ".join(f"coalesce(d.{name}, 0) AS {name}" for name in TRAINING_COUNTS)
    on = "ON {t}.period_start = b.period_start AND {t}.grp = gr.grp"
    rows = f"""(WITH {buckets}, {met}, {_groups(filters.group_by, "i")}, {due}, {results},
        {started} SELECT b.period_start, b.period_end, gr.grp, {counts},
        coalesce(st.no_due_date, 0) AS no_due_date, coalesce(st.started, 0) AS started,
        res.total, coalesce(res.n, 0) AS n FROM b CROSS JOIN gr
        LEFT JOIN d {on.format(t="d")} LEFT JOIN res {on.format(t="res")}
        LEFT JOIN st {on.format(t="st")}) x"""
    counted = f"(WITH {buckets}, {met}, {_groups(filters.group_by, 'i')} SELECT 1 FROM b, gr) x"
    window = [first, last, first, last]
    found = [*params, *join_params, company_id, *person_params, *window]
    return f"FROM {rows}", f"FROM {counted}", found


def training_fields(
    rate: Callable[[str, str], str], mean: Callable[[str, str], str], group_by: str | None
) -> Fields:
    """A training row's keys in order over the grid's row ``x`` (the backend's rounding)."""
    return [
        ("period_start", "x.period_start"),
        ("period_end", "x.period_end"),
        *([(group_by, "x.grp")] if group_by else []),
        *((name, f"x.{name}") for name in TRAINING_COUNTS),
        ("on_time_rate", rate("x.completed_on_time", "x.due")),
        ("no_due_date", "x.no_due_date"),
        ("started", "x.started"),
        ("average_result", mean("x.total", "x.n")),
    ]


def record_name(endpoint: str, group_by: str | None) -> str:
    """``phishing_stats``, ``training_stats_by_team``, ..."""
    return f"{endpoint}_stats" + (f"_by_{group_by}" if group_by else "")


RECORDS = {
    **{
        ("phishing", g): Record(
            record_name("phishing", g), f"json_object({json_pairs(phishing_fields(rate, g))})"
        )
        for g in (None, *GROUPS)
    },
    **{
        ("training", g): Record(
            record_name("training", g),
            f"json_object({json_pairs(training_fields(rate, rounded_mean, g))})",
        )
        for g in (None, *GROUPS)
    },
}
ORDER = "x.period_start, x.grp"


def interval_of(bucket: tuple[dt.date, dt.date]) -> str:
    """The interval whose buckets include ``bucket`` (its first and last day)."""
    first, last = bucket
    for interval in INTERVALS:
        after = next_start(first, interval)
        if period_start(first, interval) == first and last == (
            dt.date.max if after is None else after - dt.timedelta(days=1)
        ):
            return interval
    raise ValueError(f"no interval has the bucket {first} to {last}")


def summary_grid(
    filters: StatsFilters, company_id: int, table: str, counts: Sequence[str], rest: str
) -> tuple[str, str, list[object]]:
    """The rows (FROM), the rows to count (FROM) and their parameters, from the writers'
    summary ``table`` (app/data/stats_summary.py): a row of it per bucket and group value,
    none where nothing was sent or due. ``rest``: its further columns, as they are."""
    buckets, params = _grid_parts(filters)
    automation = filters.automation if table == "stats_phishing" else ""
    # BIGINT, not INTEGER: PostgreSQL's INTEGER is 32 bits, and a company id may be up to
    # 2^53-1 (SQLite reads BIGINT as its own 64-bit INTEGER).
    key = (
        "k AS (SELECT CAST(? AS BIGINT) AS company_id, CAST(? AS TEXT) AS span,"
        " CAST(? AS TEXT) AS automation, CAST(? AS TEXT) AS gk)"
    )
    on = "s.company_id = k.company_id AND s.span = k.span AND s.gk = k.gk"
    on += " AND s.automation = k.automation" if automation else ""
    groups = "gr AS (SELECT '' AS grp)"
    if filters.group_by:
        window = "(SELECT min(period_start) FROM b) AND (SELECT max(period_start) FROM b)"
        groups = (
            f"gr AS (SELECT DISTINCT s.gv AS grp FROM k JOIN {table} s ON {on}"
            f" WHERE s.period_start BETWEEN {window})"
        )
    figures = ", ".join(f"coalesce(s.{name}, 0) AS {name}" for name in counts)
    rows = f"""(WITH {key}, {buckets}, {groups} SELECT b.period_start, b.period_end, gr.grp,
        {figures}, {rest} FROM k CROSS JOIN b CROSS JOIN gr
        LEFT JOIN {table} s ON {on} AND s.period_start = b.period_start AND s.gv = gr.grp) x"""
    counted = f"(WITH {key}, {buckets}, {groups} SELECT 1 FROM b, gr) x"
    interval = interval_of(filters.buckets[0])
    return (
        f"FROM {rows}",
        f"FROM {counted}",
        [company_id, interval, automation, filters.group_by or "", *params],
    )


def summarised(filters: StatsFilters) -> bool:
    """Whether the writers' summaries answer: the person filters and
    ``filter[with_captcha]=false`` take the slower path over the raw rows."""
    return not filters.lists and not filters.without_captcha


def raw_listing(endpoint: str, company_id: int, filters: StatsFilters) -> Listing:
    """The rows computed from the raw rows at each request: the slower path of the filters
    the summaries do not cover."""
    grid = phishing_grid if endpoint == "phishing" else training_grid
    rows_from, counted_from, params = grid(filters, company_id)
    record = RECORDS[endpoint, filters.group_by]
    return Listing(record, rows_from, counted_from, ORDER, tuple(params), heavy=True)


def phishing_listing(company_id: int, filters: StatsFilters) -> Listing:
    """The phishing rows of the window: by period, then group value (code point order)."""
    if not summarised(filters):
        return raw_listing("phishing", company_id, filters)
    rows_from, counted_from, params = summary_grid(
        filters, company_id, "stats_phishing", PHISHING_COUNTS, "s.median_click, s.median_report"
    )
    return summary_listing(RECORDS["phishing", filters.group_by], rows_from, counted_from, params)


def training_listing(company_id: int, filters: StatsFilters) -> Listing:
    """The training rows of the window: by period, then group value (code point order)."""
    if not summarised(filters):
        return raw_listing("training", company_id, filters)
    counts = (*TRAINING_COUNTS, "no_due_date", "started", "n")
    rows_from, counted_from, params = summary_grid(
        filters, company_id, "stats_training", counts, "s.total"
    )
    return summary_listing(RECORDS["training", filters.group_by], rows_from, counted_from, params)


def summary_listing(
    record: Record, rows_from: str, counted_from: str, params: list[object]
) -> Listing:
    """A listing of a summary grid: its total (periods times the groups the summary
    holds in the window) is read with the page, in one short statement, as the training
    summaries' totals are: no count of its own on a pooled connection first."""
    count = f"SELECT count(*) {counted_from}"
    return Listing(
        record,
        rows_from,
        counted_from,
        ORDER,
        tuple(params),
        summed=count,
        summed_params=tuple(params),
    )
