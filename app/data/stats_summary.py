"""The stats' summaries: /stats/phishing and /stats/training read them, the writers keep them.

Every writer calls :func:`refresh` in its own transaction, just before it bumps the data
version, naming what it loaded (:class:`Touched`); the events whose verdicts changed are
found by the change sequence (every event a write gives or reclassifies takes a place
above the one before it). The summaries are kept exact and incremental:

- a snapshot of what each send, inscription and employee contributed (``stats_sends``,
  ``stats_inscriptions``, ``stats_groups``): a refresh takes the old contribution of what
  it touched away and adds the new one, so only the touched rows are read;
- the answers' rows, per company, interval (``span``), period, grouping, group value (and, for the
  phishing, value of ``filter[automation]``): every figure additive, plus ``campaigns``
  (distinct: kept exact by counting each campaign's sends per row in ``stats_campaigns``),
  ``people`` (distinct: a touched employee is taken out of the rows they were in and put
  into those they are in now, from the snapshot of all their sends) and the medians
  (recomputed for the rows whose histogram of seconds changed: the counts per period and
  hour, ``stats_seconds_hours``, tell which hour holds each median, and only that hour's
  seconds are read from ``stats_seconds``, kept per launch day and summed over the
  period's days).

The statements are the same text on both stores (``?`` parameters; PostgreSQL numbers
them); :mod:`app.data.pg.stats_summary` runs them there. Where a statement joins a
temporary table of what was touched to a table that grows with the data, the temporary
one comes first with ``CROSS JOIN``: SQLite then keeps that order (it knows nothing of
the temporary table's size and would otherwise scan the large one), and PostgreSQL
reads it as a plain join.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, groupby
from operator import itemgetter
from typing import Any

from .automation import kept_events
from .vocabulary import AUTOMATION_FILTERS

KINDS = (("click", "c"), ("report", "r"))  # the medians' event types, their columns' letter
VARIANTS = range(len(AUTOMATION_FILTERS))  # column suffix n: AUTOMATION_FILTERS[n]


@dataclass(frozen=True)
class Touched:
    """What a write may have changed, each a SELECT ('' for nothing): campaigns (ids:
    every send of theirs), employees (ids: their groups, sends and inscriptions), sends
    (campaign_id, employee_id) and inscriptions (ids). Events whose place in the change
    sequence is above the one before the write count as touched sends."""

    campaigns: str = ""
    employees: str = ""
    sends: str = ""
    inscriptions: str = ""


EVERYTHING = Touched(
    campaigns="SELECT id FROM campaigns",
    employees="SELECT id FROM employees",
    inscriptions="SELECT id FROM inscriptions",
)

# --- The tables (SQLite's; PostgreSQL's twin in pg/stats_summary.py). ---
_PER_VARIANT = ", ".join(f"{x}{n} {{int}}" for x in "ofcr" for n in VARIANTS)
_SECONDS = ", ".join(f"{k}{n} {{int}} NOT NULL" for _, k in KINDS for n in VARIANTS)
_KEY = "company_id {int} NOT NULL, span {text} NOT NULL, period_start {text} NOT NULL," \
    " gk {text} NOT NULL, gv {text} NOT NULL"  # fmt: skip
TABLES = f"""
CREATE TABLE IF NOT EXISTS stats_groups (
    employee_id {{int}} NOT NULL, gk {{text}} NOT NULL, gv {{text}} NOT NULL,
    PRIMARY KEY (employee_id, gk, gv)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_sends (
    campaign_id {{int}} NOT NULL, employee_id {{int}} NOT NULL, company_id {{int}} NOT NULL,
    launch_date {{text}} NOT NULL, {_PER_VARIANT},
    PRIMARY KEY (campaign_id, employee_id)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_inscriptions (
    id {{int}} PRIMARY KEY, company_id {{int}} NOT NULL, employee_id {{int}} NOT NULL,
    start_date {{text}} NOT NULL, due_date {{text}}, outcome {{int}} NOT NULL,
    total {{real}}, n {{int}} NOT NULL);
CREATE TABLE IF NOT EXISTS stats_phishing (
    {_KEY}, automation {{text}} NOT NULL,
    campaigns {{int}} NOT NULL, sends {{int}} NOT NULL, people {{int}} NOT NULL,
    opened {{int}} NOT NULL, clicked {{int}} NOT NULL, reported {{int}} NOT NULL,
    failed {{int}} NOT NULL, median_click {{int}}, median_report {{int}},
    PRIMARY KEY (company_id, span, automation, gk, period_start, gv)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_campaigns (
    {_KEY}, campaign_id {{int}} NOT NULL, n {{int}} NOT NULL,
    PRIMARY KEY (company_id, span, gk, period_start, gv, campaign_id)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_seconds (
    company_id {{int}} NOT NULL, gk {{text}} NOT NULL, gv {{text}} NOT NULL,
    hour {{int}} NOT NULL, day {{text}} NOT NULL, seconds {{int}} NOT NULL, {_SECONDS},
    PRIMARY KEY (company_id, gk, gv, hour, day, seconds)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_seconds_hours (
    {_KEY}, hour {{int}} NOT NULL, {_SECONDS},
    PRIMARY KEY (company_id, span, gk, period_start, gv, hour)){{without_rowid}};
CREATE TABLE IF NOT EXISTS stats_training (
    {_KEY}, due {{int}} NOT NULL, completed_on_time {{int}} NOT NULL,
    completed_late {{int}} NOT NULL, not_completed {{int}} NOT NULL,
    no_due_date {{int}} NOT NULL, started {{int}} NOT NULL, total {{real}}, n {{int}} NOT NULL,
    PRIMARY KEY (company_id, span, gk, period_start, gv)){{without_rowid}};
"""
# An event that moves to another send (a load gave its id another campaign or employee)
# leaves its old send behind: a trigger notes that send for the next refresh.
MOVED = (
    "CREATE TABLE IF NOT EXISTS stats_moved_sends (campaign_id {int} NOT NULL,"
    " employee_id {int} NOT NULL, PRIMARY KEY (campaign_id, employee_id));"
)
SQLITE_TABLES = (
    (TABLES + MOVED).format(int="INTEGER", text="TEXT", real="REAL", without_rowid=" WITHOUT ROWID")
    + """
CREATE TRIGGER IF NOT EXISTS stats_event_moved AFTER UPDATE OF campaign_id, employee_id
ON campaign_events WHEN OLD.campaign_id <> NEW.campaign_id OR OLD.employee_id <> NEW.employee_id
BEGIN
    INSERT INTO stats_moved_sends SELECT OLD.campaign_id, OLD.employee_id
    WHERE NOT EXISTS (SELECT 1 FROM stats_moved_sends m
        WHERE m.campaign_id = OLD.campaign_id AND m.employee_id = OLD.employee_id);
END;
"""
)
# The stats' figures, in every table that keeps them: refresh empties them first on a
# rebuild (EVERYTHING), as an upgrade does.
SUMMARIES = (
    "stats_groups", "stats_sends", "stats_inscriptions", "stats_phishing", "stats_campaigns",
    "stats_seconds", "stats_seconds_hours", "stats_training",
)  # fmt: skip

# --- What a refresh touches: temporary tables of ids, filled from the writer's Touched. ---
_SCRATCH = (
    "sumstats_t", "sumstats_i", "sumstats_e", "sumstats_days", "sumstats_sp", "sumstats_dp",
    "sumstats_di", "sumstats_pm", "sumstats_pg", "sumstats_keys", "sumstats_pd",
    "sumstats_md", "sumstats_mk", "sumstats_sd", "sumstats_hd", "sumstats_hours", "sumstats_tk",
    "sumstats_pk",
)  # fmt: skip
_CREATE_SCRATCH = (
    "CREATE TEMP TABLE sumstats_t (campaign_id {int}, employee_id {int},"
    " PRIMARY KEY (campaign_id, employee_id))",
    "CREATE TEMP TABLE sumstats_i (id {int} PRIMARY KEY)",
    "CREATE TEMP TABLE sumstats_e (id {int} PRIMARY KEY)",
    "CREATE TEMP TABLE sumstats_days (day {text}, span {text}, period_start {text},"
    " PRIMARY KEY (day, span))",
    "CREATE TEMP TABLE sumstats_pg (sign {int}, employee_id {int}, gk {text}, gv {text},"
    " PRIMARY KEY (sign, employee_id, gk, gv))",  # sought by send: (sign, employee_id)
    "CREATE TEMP TABLE sumstats_pk (company_id {int}, span {text}, period_start {text},"
    " gk {text}, gv {text}, people {int})",
    # In the order of the histograms' primary key: they are read by it without a sort.
    "CREATE TEMP TABLE sumstats_keys (company_id {int}, span {text}, gk {text},"
    " period_start {text}, gv {text}, PRIMARY KEY (company_id, span, gk, period_start, gv))",
)


TOUCH = "INSERT INTO sumstats_t"  # the statement that takes the sequence


def _touch(touched: Touched) -> list[str]:
    """The statements filling sumstats_t, _i and _e (after the change sequence's sends,
    which take ``?``: the sequence before the write)."""
    sends = [
        "SELECT campaign_id, employee_id FROM campaign_events WHERE seq > ?",
        "SELECT campaign_id, employee_id FROM stats_moved_sends",
    ]
    if touched.sends:
        sends.append(touched.sends)
    if touched.campaigns:
        sends.append(
            "SELECT t.campaign_id, t.employee_id FROM campaign_targets t"
            f" WHERE t.campaign_id IN ({touched.campaigns})"
        )
    if touched.employees:
        sends.append(
            "SELECT t.campaign_id, t.employee_id FROM campaign_targets t"
            f" WHERE t.employee_id IN ({touched.employees})"
        )
    inscriptions = [touched.inscriptions] if touched.inscriptions else []
    if touched.employees:
        inscriptions.append(
            f"SELECT i.id FROM inscriptions i WHERE i.employee_id IN ({touched.employees})"
        )
    employees = [
        "SELECT employee_id FROM sumstats_t",
        "SELECT employee_id FROM inscriptions WHERE id IN (SELECT id FROM sumstats_i)",
    ]
    if touched.employees:
        employees.append(touched.employees)
    statements = [
        f"{TOUCH} SELECT DISTINCT g.campaign_id, g.employee_id FROM"
        f" ({' UNION '.join(sends)}) x JOIN campaign_targets g"
        " ON g.campaign_id = x.campaign_id AND g.employee_id = x.employee_id"
        " WHERE true ON CONFLICT DO NOTHING",
    ]
    if inscriptions:
        statements.append(
            f"INSERT INTO sumstats_i SELECT DISTINCT * FROM ({' UNION '.join(inscriptions)}) x"
            " WHERE true ON CONFLICT DO NOTHING"
        )
    statements.append(
        f"INSERT INTO sumstats_e SELECT DISTINCT * FROM ({' UNION '.join(employees)}) x"
        " WHERE true ON CONFLICT DO NOTHING"
    )
    return statements


# --- The snapshots' rows as the raw rows give them now. ---
def _kept(n: int) -> str:
    return kept_events(AUTOMATION_FILTERS[n]) or "1 = 1"


def _seconds(instant: str, launch: str) -> str:
    """Whole seconds from ``launch`` to ``instant``, 0 when it came first (the raw
    path's rule, app/data/stats.py); NULL stays NULL."""
    return (
        f"CASE WHEN {instant} IS NULL THEN NULL WHEN {instant} < {launch} THEN 0"
        f" ELSE unixepoch({instant}) - unixepoch({launch}) END"
    )


def _send_columns() -> str:
    """The per-variant figures of a send from its events ``ev`` (grouped)."""
    parts = []
    for n in VARIANTS:
        parts.append(f"max(CASE WHEN ev.type = 'open' AND {_kept(n)} THEN 1 ELSE 0 END) AS o{n}")
    for n in VARIANTS:
        parts.append(f"max(CASE WHEN ev.type = 'fail' AND {_kept(n)} THEN 1 ELSE 0 END) AS f{n}")
    for kind, letter in KINDS:
        for n in VARIANTS:
            parts.append(
                f"min(CASE WHEN ev.type = '{kind}' AND {_kept(n)} THEN ev.timestamp END)"
                f" AS {letter}{n}"
            )
    return ", ".join(parts)


def _events_of_touched() -> str:
    """The touched sends' events, one seek of the type index per send and type."""
    return " UNION ALL ".join(
        "SELECT e.campaign_id, e.employee_id, e.type, e.timestamp, e.verdict"
        " FROM sumstats_t t CROSS JOIN campaign_events e WHERE e.campaign_id = t.campaign_id"
        f" AND e.type = '{kind}' AND e.employee_id = t.employee_id"
        for kind in ("open", "click", "report", "fail")
    )


_SEND_SNAPSHOT = f"""INSERT INTO stats_sends SELECT t.campaign_id, t.employee_id, c.company_id,
    c.launch_date, {", ".join(f"coalesce(fs.{x}{n}, 0)" for x in "of" for n in VARIANTS)},
    {", ".join(_seconds(f"fs.{k}{n}", "c.launch_date") for _, k in KINDS for n in VARIANTS)}
    FROM sumstats_t t JOIN campaigns c ON c.id = t.campaign_id
    LEFT JOIN (SELECT campaign_id, employee_id, {_send_columns()}
        FROM ({_events_of_touched()}) ev GROUP BY campaign_id, employee_id) fs
    ON fs.campaign_id = t.campaign_id AND fs.employee_id = t.employee_id"""
_DONE = "i.status = 'completed'"
_INSCRIPTION_SNAPSHOT = f"""INSERT INTO stats_inscriptions SELECT i.id, i.company_id,
    i.employee_id, i.start_date, i.due_date,
    CASE WHEN {_DONE} AND (i.completed_at IS NULL OR i.completed_at <= i.due_date) THEN 1
        WHEN {_DONE} AND i.completed_at > i.due_date THEN 2 ELSE 0 END,
    (SELECT sum(r.result) FROM section_results r WHERE r.inscription_id = i.id),
    (SELECT count(r.result) FROM section_results r WHERE r.inscription_id = i.id)
    FROM sumstats_i s JOIN inscriptions i ON i.id = s.id"""
# An employee's group values: '' (the ungrouped rows), department, country, and each
# distinct name of their teams (an employee in two teams counts in both).
_GROUPS_SNAPSHOT = """INSERT INTO stats_groups SELECT e.id, '', '' FROM sumstats_e s
    CROSS JOIN employees e WHERE e.id = s.id
    UNION SELECT e.id, 'department', e.department FROM sumstats_e s CROSS JOIN employees e
    WHERE e.id = s.id
    UNION SELECT e.id, 'country', e.country FROM sumstats_e s CROSS JOIN employees e
    WHERE e.id = s.id
    UNION SELECT tm.employee_id, 'team', t.name FROM sumstats_e s
    JOIN team_members tm ON tm.employee_id = s.id JOIN teams t ON t.id = tm.team_id"""


# The contributions of the touched rows, with their sign: taken before the snapshots are
# written again (-1), then after (+1): the touched sends (sumstats_sp), inscriptions (with
# their groups: sumstats_di), and the touched employees' groups (sumstats_pg) and, for
# ``people``, the days of all their sends (sumstats_pm).
def _contributions(sign: int) -> list[str]:
    return [
        f"""INSERT INTO sumstats_sp SELECT {sign}, s.* FROM sumstats_t t
        JOIN stats_sends s ON s.campaign_id = t.campaign_id AND s.employee_id = t.employee_id""",
        f"""INSERT INTO sumstats_di SELECT {sign}, s.*, g.gk, g.gv FROM sumstats_i t
        JOIN stats_inscriptions s ON s.id = t.id
        JOIN stats_groups g ON g.employee_id = s.employee_id""",
        f"""INSERT INTO sumstats_pm SELECT DISTINCT {sign}, s.company_id, s.employee_id,
        substr(s.launch_date, 1, 10) FROM sumstats_e e CROSS JOIN campaign_targets t
        CROSS JOIN stats_sends s WHERE t.employee_id = e.id
        AND s.campaign_id = t.campaign_id AND s.employee_id = t.employee_id""",
        f"""INSERT INTO sumstats_pg SELECT {sign}, g.employee_id, g.gk, g.gv FROM sumstats_e e
        CROSS JOIN stats_groups g WHERE g.employee_id = e.id""",
    ]


_CREATE_DELTAS = (
    "CREATE TEMP TABLE sumstats_sp AS SELECT 0 AS sign, s.* FROM stats_sends s WHERE 1 = 0",
    "CREATE TEMP TABLE sumstats_di AS SELECT 0 AS sign, s.*, g.gk, g.gv"
    " FROM stats_inscriptions s CROSS JOIN stats_groups g WHERE 1 = 0",
    "CREATE TEMP TABLE sumstats_pm AS SELECT 0 AS sign, s.company_id, s.employee_id,"
    " s.launch_date AS day FROM stats_sends s WHERE 1 = 0",
)
_SNAPSHOTS = (
    "DELETE FROM stats_sends WHERE (campaign_id, employee_id) IN"
    " (SELECT campaign_id, employee_id FROM sumstats_t)",
    "DELETE FROM stats_inscriptions WHERE id IN (SELECT id FROM sumstats_i)",
    "DELETE FROM stats_groups WHERE employee_id IN (SELECT id FROM sumstats_e)",
    _SEND_SNAPSHOT,
    _INSCRIPTION_SNAPSHOT,
    _GROUPS_SNAPSHOT,
    "DELETE FROM stats_moved_sends",
)
# --- The deltas applied to the answers' rows. ---
DAYS_OF = (
    "SELECT DISTINCT day FROM sumstats_pm"  # every touched send's day is its employee's
    " UNION SELECT due_date FROM sumstats_di WHERE due_date IS NOT NULL"
    " UNION SELECT start_date FROM sumstats_di"
)
_P_KEY = "d.company_id, m.span, m.period_start, d.gk, d.gv"
_KEY_COLUMNS = "company_id, span, period_start, gk, gv"
_VARIANT_TABLE = " UNION ALL ".join(
    f"SELECT {n} AS n, '{name}' AS automation" for n, name in enumerate(AUTOMATION_FILTERS)
)


# The rows a touched send's contribution falls in: their medians are found again. Of n
# values the median is the ((n + 1) / 2)-th smallest: the first whose running count
# reaches n / 2.
_KEYS = """INSERT INTO sumstats_keys SELECT DISTINCT d.company_id, m.span, d.gk,
    m.period_start, d.gv FROM sumstats_pd d JOIN sumstats_days m ON m.day = d.day"""
_IN_KEYS = (
    "(company_id, span, gk, period_start, gv) IN"
    " (SELECT company_id, span, gk, period_start, gv FROM sumstats_keys)"
)


def _pick(prefix: str) -> str:
    """The column ``{prefix}{n}`` of the variant ``v.n``."""
    cases = " ".join(f"WHEN {n} THEN d.{prefix}{n}" for n in VARIANTS)
    return f"CASE v.n {cases} END"


def _added(columns: Iterable[str], table: str) -> str:
    return ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in columns)


_COUNTS = ("sends", "opened", "clicked", "reported", "failed")
_DAY = "substr(s.launch_date, 1, 10)"
_SENDS_FIGURES = ", ".join(
    [f"sum(s.sign * s.{x}{n}) AS {x}{n}" for x in "of" for n in VARIANTS]
    + [
        f"sum(CASE WHEN s.{k}{n} IS NOT NULL THEN s.sign ELSE 0 END) AS {k}{n}"
        for _, k in KINDS
        for n in VARIANTS
    ]
)
_FIGURES = [f"{x}{n}" for x in "of" for n in VARIANTS] + [
    f"{k}{n}" for _, k in KINDS for n in VARIANTS
]
# The touched sends' contributions in each of their employee's groups (every employee of
# a touched send is a touched employee: sumstats_pg holds their groups of either side),
# per campaign (whose sends share its launch day): one sort of the sends' rows in their
# groups serves both the figures per day and the campaigns' counts.
_BY_GROUP = f"""CREATE TEMP TABLE sumstats_dp AS SELECT s.company_id, {_DAY} AS day, g.gk,
    g.gv, s.campaign_id, sum(s.sign) AS sends, {_SENDS_FIGURES}
    FROM sumstats_sp s JOIN sumstats_pg g ON g.sign = s.sign AND g.employee_id = s.employee_id
    GROUP BY s.company_id, {_DAY}, g.gk, g.gv, s.campaign_id"""
_BY_DAY = f"""CREATE TEMP TABLE sumstats_pd AS SELECT company_id, day, gk, gv, sum(sends) AS sends,
    {", ".join(f"sum({c}) AS {c}" for c in _FIGURES)}
    FROM sumstats_dp GROUP BY company_id, day, gk, gv"""
_PHISHING_DELTA = f"""INSERT INTO stats_phishing ({_KEY_COLUMNS}, automation, campaigns, sends,
    people, opened, clicked, reported, failed)
    SELECT {_P_KEY}, v.automation, 0, sum(d.sends), 0, sum({_pick("o")}), sum({_pick("c")}),
    sum({_pick("r")}), sum({_pick("f")})
    FROM sumstats_pd d JOIN sumstats_days m ON m.day = d.day CROSS JOIN ({_VARIANT_TABLE}) v
    WHERE true GROUP BY {_P_KEY}, v.automation
    ON CONFLICT (company_id, span, automation, gk, period_start, gv) DO UPDATE SET
    {_added(_COUNTS, "stats_phishing")}"""
# campaigns: each campaign's sends per row; a row's count moves when a campaign's goes
# from none to some or back.
_CAMPAIGN_DELTA = f"""CREATE TEMP TABLE sumstats_md AS SELECT {_P_KEY}, d.campaign_id,
    sum(d.sends) AS d FROM sumstats_dp d JOIN sumstats_days m ON m.day = d.day
    GROUP BY {_P_KEY}, d.campaign_id"""
_CAMPAIGN_KEY = "company_id, span, gk, period_start, gv, campaign_id"
# people: a touched employee counts -1 in each (period, group) they were in and +1 in each
# they are in now (at least one send launched in the period); where nothing changed the
# two cancel. Python counts them (PeopleMoves) from PEOPLE_ROWS, one employee at a time,
# into sumstats_pk: about four times faster than the same sums in SQL, which sorted every
# (employee, period, group) of the touched people.
_MOVES = """CREATE TEMP TABLE sumstats_mk AS SELECT company_id, span, period_start, gk, gv,
    sum(campaigns) AS campaigns, sum(people) AS people FROM (
        SELECT md.company_id, md.span, md.period_start, md.gk, md.gv,
        CASE WHEN coalesce(c.n, 0) + md.d > 0 THEN 1 ELSE 0 END
        - CASE WHEN coalesce(c.n, 0) > 0 THEN 1 ELSE 0 END AS campaigns, 0 AS people
        FROM sumstats_md md LEFT JOIN stats_campaigns c ON c.company_id = md.company_id
        AND c.span = md.span AND c.gk = md.gk AND c.period_start = md.period_start
        AND c.gv = md.gv AND c.campaign_id = md.campaign_id
        UNION ALL SELECT company_id, span, period_start, gk, gv, 0, people FROM sumstats_pk
    ) x GROUP BY company_id, span, period_start, gk, gv"""
PEOPLE_ROWS = """SELECT employee_id, 1, sign, company_id, day, NULL FROM sumstats_pm
    UNION ALL SELECT employee_id, 2, sign, 0, gk, gv FROM sumstats_pg ORDER BY 1, 2"""
_GROUP = 2  # PEOPLE_ROWS' kinds of row: 1, a day of the employee's sends; 2, a group
ADD_PEOPLE = "INSERT INTO sumstats_pk VALUES (?, ?, ?, ?, ?, ?)"


class PeopleMoves:
    """The rows of sumstats_pk from PEOPLE_ROWS, given one at a time (either store reads
    them from a cursor): an employee's moves are counted when their rows end, so only one
    employee's periods are held at a time."""

    def __init__(self, periods: dict[str, list[tuple[str, str]]]):
        self.periods = periods  # day: its (interval, period start) for every interval
        self.counts: dict[tuple[Any, ...], int] = {}
        self.employee: object = None
        self._start(None)

    def _start(self, employee: object) -> None:
        self.employee = employee
        self.sent: dict[int, set[tuple[Any, str, str]]] = {-1: set(), 1: set()}
        self.groups: list[tuple[int, str, str]] = []

    def add(self, row: Sequence[Any]) -> None:
        employee, kind, sign, company, day_or_gk, gv = row
        if employee != self.employee:
            self._count()
            self._start(employee)
        if kind == _GROUP:
            self.groups.append((sign, day_or_gk, gv))
        else:
            self.sent[sign].update((company, *p) for p in self.periods[day_or_gk])

    def _count(self) -> None:
        for sign, gk, gv in self.groups:
            for company, span, start in self.sent[sign]:
                key = (company, span, start, gk, gv)
                self.counts[key] = self.counts.get(key, 0) + sign

    def rows(self) -> list[tuple[Any, ...]]:
        """The parameters of ADD_PEOPLE: every (period, group) whose count moved."""
        self._count()
        self._start(None)
        return [(*key, n) for key, n in self.counts.items() if n]


_DISTINCT_MOVES = (
    f"""INSERT INTO stats_campaigns ({_CAMPAIGN_KEY}, n) SELECT {_CAMPAIGN_KEY}, d
    FROM sumstats_md WHERE d <> 0
    ON CONFLICT ({_CAMPAIGN_KEY}) DO UPDATE SET n = stats_campaigns.n + excluded.n""",
    f"""INSERT INTO stats_phishing ({_KEY_COLUMNS}, automation, campaigns, sends, people,
    opened, clicked, reported, failed)
    SELECT k.company_id, k.span, k.period_start, k.gk, k.gv, v.automation, k.campaigns, 0,
    k.people, 0, 0, 0, 0 FROM sumstats_mk k CROSS JOIN ({_VARIANT_TABLE}) v
    WHERE k.campaigns <> 0 OR k.people <> 0
    ON CONFLICT (company_id, span, automation, gk, period_start, gv) DO UPDATE SET
    {_added(("campaigns", "people"), "stats_phishing")}""",
)
# The medians: each send's seconds to its first click and report, counted per value, group
# and launch day (with its hour: a median is sought by hour): a period's histogram is the
# sum of its days', so each send counts once, not once per interval.
_SECONDS_COLUMNS = [f"{k}{n}" for _, k in KINDS for n in VARIANTS]
HOUR_SECONDS = 3600
_SECONDS_SUMS = ", ".join(f"sum({c}) AS {c}" for c in _SECONDS_COLUMNS)
_SECONDS_DELTA = f"""CREATE TEMP TABLE sumstats_sd AS SELECT company_id, gk, gv,
    seconds / {HOUR_SECONDS} AS hour, day, seconds, {_SECONDS_SUMS} FROM ({
    " UNION ALL ".join(
        f"SELECT s.sign, s.company_id, s.employee_id, {_DAY} AS day, s.{column} AS seconds, "
        + ", ".join(f"s.sign AS {c}" if c == column else f"0 AS {c}" for c in _SECONDS_COLUMNS)
        + f" FROM sumstats_sp s WHERE s.{column} IS NOT NULL"
        for column in _SECONDS_COLUMNS
    )
}) x JOIN sumstats_pg g ON g.sign = x.sign AND g.employee_id = x.employee_id
    GROUP BY company_id, gk, gv, day, seconds"""
_SECONDS_KEY = "company_id, gk, gv, hour, day, seconds"
_SECONDS_ADDED = f"""INSERT INTO stats_seconds ({_SECONDS_KEY}, {", ".join(_SECONDS_COLUMNS)})
    SELECT {_SECONDS_KEY}, {", ".join(_SECONDS_COLUMNS)} FROM sumstats_sd WHERE true
    ON CONFLICT ({_SECONDS_KEY}) DO UPDATE SET {_added(_SECONDS_COLUMNS, "stats_seconds")}"""
# The same counts per period and hour (seconds // 3600; never negative): the level a
# median is found on first.
_HOURS_KEY = "company_id, span, gk, period_start, gv, hour"
_BY_HOUR = "d.company_id, m.span, d.gk, m.period_start, d.gv, d.hour"  # _HOURS_KEY
_HOURS_DELTA = f"""CREATE TEMP TABLE sumstats_hd AS SELECT {_BY_HOUR}, {
    ", ".join(f"sum(d.{c}) AS {c}" for c in _SECONDS_COLUMNS)
} FROM sumstats_sd d JOIN sumstats_days m ON m.day = d.day GROUP BY {_BY_HOUR}"""
_HOURS_ADDED = f"""INSERT INTO stats_seconds_hours ({_HOURS_KEY}, {", ".join(_SECONDS_COLUMNS)})
    SELECT {_HOURS_KEY}, {", ".join(_SECONDS_COLUMNS)} FROM sumstats_hd WHERE true
    ON CONFLICT ({_HOURS_KEY}) DO UPDATE SET
    {_added(_SECONDS_COLUMNS, "stats_seconds_hours")}"""


def _emptied(table: str, delta: str, key: str, empty: str) -> tuple[str, str]:
    """The keys of ``table``'s rows that ``delta`` (a temporary table) touched and left
    ``empty``, and the statement deleting one: each a seek by key (SQLite finds no index
    for a row value IN a list of many columns)."""
    columns = key.split(", ")
    on = " AND ".join(f"x.{c} = d.{c}" for c in columns)
    where = " AND ".join(f"{c} = ?" for c in columns)
    return (
        f"SELECT {', '.join(f'x.{c}' for c in columns)} FROM {delta} d JOIN {table} x ON {on}"
        f" WHERE {empty.format(x='x.')}",
        f"DELETE FROM {table} WHERE {where}",
    )


# The rows a refresh left empty (SELECT, then DELETE each): periods without inscriptions,
# campaigns without sends, histogram values without sends.
_NO_SENDS = " AND ".join(f"{{x}}{c} = 0" for c in _SECONDS_COLUMNS)
EMPTIED = (
    _emptied("stats_training", "sumstats_tk", _KEY_COLUMNS, "{x}due = 0 AND {x}started = 0"),
    _emptied("stats_campaigns", "sumstats_md", _CAMPAIGN_KEY, "{x}n = 0"),
    _emptied("stats_seconds", "sumstats_sd", _SECONDS_KEY, _NO_SENDS),
    _emptied("stats_seconds_hours", "sumstats_hd", _HOURS_KEY, _NO_SENDS),
)
# Only a contribution taken away leaves a row empty: a write that took none (a whole load
# into a new database, a load of new campaigns) skips EMPTIED's searches and the list of
# training rows they read (TRAINING_TAKEN).
TAKEN_AWAY = (
    "SELECT EXISTS (SELECT 1 FROM sumstats_sp WHERE sign < 0)"
    " OR EXISTS (SELECT 1 FROM sumstats_di WHERE sign < 0)"
)
# The touched rows' histograms by hour, by row (in sumstats_keys' order, so no sort of them
# all): each row's medians are found in them first (:func:`median_hours`), then in the
# seconds of the hours that hold them (:func:`medians`), for both stores.
HOUR_HISTOGRAMS = f"""SELECT s.company_id, s.span, s.gk, s.period_start, s.gv, s.hour,
    {", ".join(f"s.{c}" for c in _SECONDS_COLUMNS)} FROM sumstats_keys k
    CROSS JOIN stats_seconds_hours s
    WHERE s.company_id = k.company_id AND s.span = k.span AND s.gk = k.gk
    AND s.period_start = k.period_start AND s.gv = k.gv
    ORDER BY k.company_id, k.span, k.gk, k.period_start, k.gv"""
MEDIAN_HOURS = (
    "CREATE TEMP TABLE sumstats_hours AS SELECT d.company_id, d.span, d.gk, d.period_start,"
    " d.gv, d.hour, d.period_start AS period_last FROM sumstats_hd d WHERE 1 = 0"
)
NEXT_MEDIAN_HOURS = "DELETE FROM sumstats_hours"  # a batch's hours, once it is done
ADD_MEDIAN_HOUR = (
    f"INSERT INTO sumstats_hours ({_HOURS_KEY}, period_last) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
# The seconds of each median's hour, summed over the days of its period.
HOUR_SECONDS_OF_MEDIANS = f"""SELECT h.company_id, h.span, h.gk, h.period_start, h.gv, s.seconds,
    {", ".join(f"sum(s.{c})" for c in _SECONDS_COLUMNS)}
    FROM (SELECT DISTINCT {_HOURS_KEY}, period_last FROM sumstats_hours) h
    CROSS JOIN stats_seconds s WHERE s.company_id = h.company_id AND s.gk = h.gk
    AND s.gv = h.gv AND s.hour = h.hour AND s.day >= h.period_start AND s.day <= h.period_last
    GROUP BY h.company_id, h.span, h.gk, h.period_start, h.gv, s.seconds
    ORDER BY h.company_id, h.span, h.gk, h.period_start, h.gv, s.seconds"""
NO_MEDIANS = f"UPDATE stats_phishing SET median_click = NULL, median_report = NULL WHERE {_IN_KEYS}"
SET_MEDIANS = (
    "UPDATE stats_phishing SET median_click = ?, median_report = ? WHERE company_id = ?"
    " AND span = ? AND gk = ? AND period_start = ? AND gv = ? AND automation = ?"
)


Key = tuple[Any, ...]  # company_id, span, gk, period_start, gv
MEDIAN_KEYS_A_BATCH = 5_000
# Where a row's median of one column lies: its hour, and its rank among that hour's values.
MedianHours = dict[tuple[Key, int], tuple[int, int]]


def median_hours(rows: Iterable[Sequence[Any]]) -> Iterator[MedianHours]:
    """For the rows of HOUR_HISTOGRAMS, each key's and column's hour holding the median
    (of n values the ((n + 1) / 2)-th smallest) and its rank within that hour.

    The keys come in batches of MEDIAN_KEYS_A_BATCH, each finished (its seconds read, its
    medians set) before the next is found: the hundred thousand keys of a whole load,
    held at once, kept about 30 MB more in the loader to its end.
    """
    found: MedianHours = {}
    for number, (key, by_hour) in enumerate(groupby(rows, key=lambda row: tuple(row[:5])), 1):
        # The key's histogram by column (transposed and summed in C, not row by row), in
        # the order of its hours: sorted here, a key's few rows, not by the statement.
        in_order = sorted(by_hour, key=itemgetter(5))
        hours, *counts = list(zip(*in_order, strict=True))[5:]
        for column, running in enumerate(list(accumulate(c)) for c in counts):
            rank = (running[-1] + 1) // 2
            if rank:
                at = bisect_left(running, rank)  # the first hour whose running count reaches it
                found[key, column] = (hours[at], rank - (running[at - 1] if at else 0))
        if number % MEDIAN_KEYS_A_BATCH == 0:
            yield found
            found = {}
    if found:
        yield found


def hours_to_read(found: MedianHours) -> list[tuple[Any, ...]]:
    """The parameters of ADD_MEDIAN_HOUR: the hours whose seconds hold a median, each with
    the last day of its period."""
    from .stats import last_day  # stats reads listings, which read the schema

    last: dict[tuple[str, str], str] = {}  # (interval, period start): many keys share one
    rows = []
    for (key, _), (hour, _) in found.items():
        span, start = key[1], key[3]
        if (span, start) not in last:
            last[span, start] = last_day(dt.date.fromisoformat(start), span).isoformat()
        rows.append((*key, hour, last[span, start]))
    return rows


def medians(found: MedianHours, rows: Iterable[Sequence[Any]]) -> Iterator[tuple[object, ...]]:
    """The parameters of SET_MEDIANS from the rows of HOUR_SECONDS_OF_MEDIANS (a row
    without values of a kind keeps the NULL that NO_MEDIANS gave it)."""
    for key, values in groupby(rows, key=lambda row: tuple(row[:5])):
        seconds = list(values)
        found_here = {}
        for column in range(len(_SECONDS_COLUMNS)):
            if (key, column) not in found:
                continue
            hour, rank = found[key, column]
            for row in seconds:
                if row[5] // HOUR_SECONDS == hour and row[6 + column]:
                    rank -= row[6 + column]
                    if rank <= 0:
                        found_here[column] = row[5]
                        break
        for n, automation in enumerate(AUTOMATION_FILTERS):
            click, report = found_here.get(n), found_here.get(len(VARIANTS) + n)
            if click is not None or report is not None:
                yield click, report, *key, automation


_TRAINING_COUNTS = (
    "due", "completed_on_time", "completed_late", "not_completed", "no_due_date", "started",
    "total", "n",
)  # fmt: skip
_TRAINING_UPSERT = f"""ON CONFLICT (company_id, span, gk, period_start, gv) DO UPDATE SET {
    ", ".join(
        f"{c} = stats_training.{c} + excluded.{c}"
        if c != "total"
        else "total = CASE WHEN stats_training.n + excluded.n = 0 THEN NULL"
        " ELSE coalesce(stats_training.total, 0) + coalesce(excluded.total, 0) END"
        for c in _TRAINING_COUNTS
    )
}"""
# Two statements, the due dates' figures then the start dates', each a sort of its own:
# one statement for both kept both sorts' memory at once, the loader's peak.
_TRAINING_DELTAS = tuple(
    f"""INSERT INTO stats_training ({_KEY_COLUMNS}, {", ".join(_TRAINING_COUNTS)})
    SELECT {_P_KEY}, {", ".join(f"sum(d.{c})" for c in _TRAINING_COUNTS)} FROM ({part}) d
    JOIN sumstats_days m ON m.day = d.day WHERE true GROUP BY {_P_KEY} {_TRAINING_UPSERT}"""
    for part in (
        """SELECT d.company_id, d.due_date AS day, d.gk, d.gv, sum(d.sign) AS due,
        sum(CASE WHEN d.outcome = 1 THEN d.sign ELSE 0 END) AS completed_on_time,
        sum(CASE WHEN d.outcome = 2 THEN d.sign ELSE 0 END) AS completed_late,
        sum(CASE WHEN d.outcome = 0 THEN d.sign ELSE 0 END) AS not_completed,
        0 AS no_due_date, 0 AS started, sum(d.sign * d.total) AS total, sum(d.sign * d.n) AS n
        FROM sumstats_di d WHERE d.due_date IS NOT NULL
        GROUP BY d.company_id, d.due_date, d.gk, d.gv""",
        """SELECT d.company_id, d.start_date AS day, d.gk, d.gv, 0 AS due,
        0 AS completed_on_time, 0 AS completed_late, 0 AS not_completed,
        sum(CASE WHEN d.due_date IS NULL THEN d.sign ELSE 0 END) AS no_due_date,
        sum(d.sign) AS started, CAST(NULL AS NUMERIC) AS total, 0 AS n
        FROM sumstats_di d GROUP BY d.company_id, d.start_date, d.gk, d.gv""",
    )
)

# The rows of stats_training a refresh took a contribution from (by their start and due
# dates): the only ones it can have left empty.
TRAINING_TAKEN = f"""CREATE TEMP TABLE sumstats_tk AS SELECT {_P_KEY}
    FROM sumstats_di d JOIN sumstats_days m ON m.day = d.start_date WHERE d.sign < 0
    UNION SELECT {_P_KEY} FROM sumstats_di d JOIN sumstats_days m ON m.day = d.due_date
    WHERE d.sign < 0"""


_APPLY_AFTER_MOVES = (
    *_DISTINCT_MOVES,
    _SECONDS_DELTA,
    _SECONDS_ADDED,
    _HOURS_DELTA,
    _HOURS_ADDED,
    NO_MEDIANS,
    f"DELETE FROM stats_phishing WHERE {_IN_KEYS} AND sends = 0",
    *_TRAINING_DELTAS,
)


APPLY = (_BY_DAY, _KEYS, _PHISHING_DELTA, _CAMPAIGN_DELTA, _MOVES, *_APPLY_AFTER_MOVES)


def day_periods(days: Iterable[str]) -> list[tuple[str, str, str]]:
    """(day, interval, period start) of each day for every interval: the buckets' rule of
    app/data/stats.py, applied by Python for both stores."""
    from .stats import INTERVALS, period_start  # stats reads listings, which read the schema

    found = []
    for text in days:
        day = dt.date.fromisoformat(text)
        found += [(text, i, period_start(day, i).isoformat()) for i in INTERVALS]
    return found


def periods_by_day(found: Iterable[tuple[str, str, str]]) -> dict[str, list[tuple[str, str]]]:
    """day_periods' rows as PeopleMoves takes them: each day's (interval, period start)."""
    periods: dict[str, list[tuple[str, str]]] = {}
    for day, span, start in found:
        periods.setdefault(day, []).append((span, start))
    return periods


def scratch(int_type: str, text_type: str) -> list[str]:
    """The temporary tables' statements for a store's types."""
    return [s.format(int=int_type, text=text_type) for s in _CREATE_SCRATCH]


def drops() -> list[str]:
    return [f"DROP TABLE IF EXISTS {name}" for name in _SCRATCH]


def before_days(touched: Touched) -> list[str]:
    """The statements that find what is touched, take its old contribution away from the
    snapshots and write them again (the first takes ``?``: the sequence before the write);
    a rebuild (EVERYTHING) empties the summaries first."""
    empty = [f"DELETE FROM {t}" for t in SUMMARIES] if touched == EVERYTHING else []
    return [
        *empty,
        *_touch(touched),
        *_CREATE_DELTAS,
        *_contributions(-1),
        *_SNAPSHOTS,
        *_contributions(1),
        _BY_GROUP,
    ]


def refresh(conn: sqlite3.Connection, seq: int, touched: Touched) -> None:
    """Bring the stats' summaries up to date with the write in progress (inside its
    transaction): what ``touched`` names and the events above ``seq``."""
    try:
        for statement in scratch("INTEGER", "TEXT"):
            conn.execute(statement)
        for statement in before_days(touched):
            conn.execute(statement, (seq,) if statement.startswith(TOUCH) else ())
        periods = day_periods(d for (d,) in conn.execute(DAYS_OF))
        conn.executemany("INSERT INTO sumstats_days VALUES (?, ?, ?)", periods)
        moves = PeopleMoves(periods_by_day(periods))
        for row in conn.execute(PEOPLE_ROWS):
            moves.add(row)
        conn.executemany(ADD_PEOPLE, moves.rows())
        for statement in APPLY:
            conn.execute(statement)
        conn.execute(MEDIAN_HOURS)
        for at in median_hours(conn.execute(HOUR_HISTOGRAMS)):
            conn.execute(NEXT_MEDIAN_HOURS)
            conn.executemany(ADD_MEDIAN_HOUR, hours_to_read(at))
            conn.executemany(SET_MEDIANS, medians(at, conn.execute(HOUR_SECONDS_OF_MEDIANS)))
        if conn.execute(TAKEN_AWAY).fetchone()[0]:
            conn.execute(TRAINING_TAKEN)
            for found, delete in EMPTIED:
                conn.executemany(delete, conn.execute(found).fetchall())
    finally:
        for statement in drops():
            conn.execute(statement)
