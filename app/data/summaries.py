"""Summaries of the campaigns' events, kept by the writers for the reports to read.

The campaign reports (the list, one campaign's report with ``by_department``) and the
directory's ``phishing`` block read these tables instead of the raw events, so a report
costs what its answer holds, not what the company's history holds:

- ``send_firsts``: one row per send (a campaign target): the person's department, the
  first instant of each event type under each filter (``filter[with_captcha]`` times
  ``filter[automation]``: :data:`FILTERS`), the last instant under each value of
  ``filter[automation]``, and how many of its events are ``automated`` and ``suspected``.
- ``campaign_funnels``: per (campaign, filter, department) the targets, the four counts
  of people and the two counts of events: sums of the send rows.
- ``campaign_first_instants``: per (campaign, filter, kind, instant) how many people's
  first click (report) came at that instant: the medians' exact histogram, and
  ``campaign_first_hours`` the same per hour (``YYYY-MM-DDTHH``).
- ``campaign_medians``: per (campaign, filter, kind) the lower-middle person's first
  instant, found by walking the hours, then one hour's instants, whenever a write
  changes that histogram: a report reads one row per median.
- ``employee_phishing``: per (employee, value of ``filter[automation]``) the directory's
  block.
- ``directory_totals``: per (company, value of ``filter[automation]``, clicked, failed)
  how many of its people have such a block: the directory's total under
  ``filter[min_clicked]`` and ``filter[min_failed]`` is a sum of a few of these rows.
- ``stale_sends``: sends a trigger marked because an event or target moved to another
  campaign or person, or a person changed department.

Every writer calls :func:`refresh` in its transaction, after ``classify``: the sends it
touched (events whose place in the change sequence is above the one from before the
write, the sends it names, the stale ones) are computed again from their events, and the
sums move by the difference between the old and the new send rows, so a small write
into a large database touches only what it changed. The statements are the same text on
both stores (``pg/summaries.py`` runs them on PostgreSQL).
"""

from __future__ import annotations

import sqlite3

from .aggregates import COUNT_NAMES
from .automation import and_kept
from .vocabulary import AUTOMATION_FILTERS, EVENT_TYPES


def filter_key(without_captcha: bool, automation: str) -> str:
    """The summaries' name of a pair of filters (``include``,
    ``exclude_automated_without_captcha``, ...)."""
    return f"{automation}_without_captcha" if without_captcha else automation


# Each pair of the campaign reports' filters, by its key; the first three (captcha
# events kept) are also the directory's values of filter[automation].
FILTERS = {
    filter_key(without, automation): (without, automation)
    for without in (False, True)
    for automation in AUTOMATION_FILTERS
}
MEDIAN_KINDS = ("click", "report")
VERDICT_COLUMNS = {"automated": "automated_events", "suspected": "suspected_events"}


def first_column(kind: str, key: str) -> str:
    """The send row's column: the first instant of an event of ``kind`` under filter ``key``."""
    return f"{kind}_{key}"


FIRSTS = [first_column(kind, key) for key in FILTERS for kind in EVENT_TYPES]
LASTS = [f"last_{automation}" for automation in AUTOMATION_FILTERS]
SEND_COLUMNS = ("campaign_id", "employee_id", "department", *FIRSTS, *LASTS,
                *VERDICT_COLUMNS.values())  # fmt: skip
FUNNEL_COUNTS = ("targets", *COUNT_NAMES.values(), *VERDICT_COLUMNS.values())


def tables(integer: str, text: str) -> str:
    """The summaries' tables, in either store's types (``integer``, ``text``)."""
    instants = ",\n    ".join(f"{column} {text}" for column in (*FIRSTS, *LASTS))
    counts = ", ".join(f"{column} {integer} NOT NULL" for column in FUNNEL_COUNTS)
    phishing = ", ".join(f"{name} {integer} NOT NULL" for name in COUNT_NAMES.values())
    return f"""
CREATE TABLE IF NOT EXISTS send_firsts (
    campaign_id {integer} NOT NULL,
    employee_id {integer} NOT NULL,
    department  {text} NOT NULL,
    {instants},
    automated_events {integer} NOT NULL,
    suspected_events {integer} NOT NULL,
    PRIMARY KEY (campaign_id, employee_id)
);
CREATE INDEX IF NOT EXISTS send_firsts_by_employee ON send_firsts (employee_id);
CREATE TABLE IF NOT EXISTS campaign_funnels (
    campaign_id {integer} NOT NULL,
    filters     {text} NOT NULL,
    department  {text} NOT NULL,
    {counts},
    PRIMARY KEY (campaign_id, filters, department)
);
CREATE TABLE IF NOT EXISTS campaign_first_instants (
    campaign_id {integer} NOT NULL,
    filters     {text} NOT NULL,
    kind        {text} NOT NULL,
    instant     {text} NOT NULL,
    people      {integer} NOT NULL,
    PRIMARY KEY (campaign_id, filters, kind, instant)
);
CREATE TABLE IF NOT EXISTS campaign_first_hours (
    campaign_id {integer} NOT NULL,
    filters     {text} NOT NULL,
    kind        {text} NOT NULL,
    hour        {text} NOT NULL,
    people      {integer} NOT NULL,
    PRIMARY KEY (campaign_id, filters, kind, hour)
);
CREATE TABLE IF NOT EXISTS campaign_medians (
    campaign_id {integer} NOT NULL,
    filters     {text} NOT NULL,
    kind        {text} NOT NULL,
    instant     {text} NOT NULL,
    PRIMARY KEY (campaign_id, filters, kind)
);
CREATE TABLE IF NOT EXISTS employee_phishing (
    employee_id {integer} NOT NULL,
    automation  {text} NOT NULL,
    campaigns   {integer} NOT NULL,
    {phishing},
    last_event_at {text},
    PRIMARY KEY (employee_id, automation)
);
CREATE TABLE IF NOT EXISTS directory_totals (
    company_id  {integer} NOT NULL,
    automation  {text} NOT NULL,
    clicked     {integer} NOT NULL,
    failed      {integer} NOT NULL,
    people      {integer} NOT NULL,
    PRIMARY KEY (company_id, automation, clicked, failed)
);
CREATE TABLE IF NOT EXISTS stale_sends (
    campaign_id {integer} NOT NULL,
    employee_id {integer} NOT NULL,
    PRIMARY KEY (campaign_id, employee_id)
);
"""


# The SQLite tables (WITHOUT ROWID: each is read by its key) and triggers marking the
# sends a moved row or a changed department leaves stale.
SCHEMA = tables("INTEGER", "TEXT").replace("\n);", "\n) WITHOUT ROWID;")
# table, the change, its condition, the sends it marks stale (columns c and e)
MOVED = (
    "SELECT OLD.campaign_id AS c, OLD.employee_id AS e"
    " UNION SELECT NEW.campaign_id, NEW.employee_id"
)
STALE = (
    (
        "campaign_events",
        "UPDATE OF campaign_id, employee_id",
        "OLD.campaign_id IS NOT NEW.campaign_id OR OLD.employee_id IS NOT NEW.employee_id",
        MOVED,
    ),
    (
        "campaign_targets",
        "UPDATE OF campaign_id, employee_id",
        "OLD.campaign_id IS NOT NEW.campaign_id OR OLD.employee_id IS NOT NEW.employee_id",
        MOVED,
    ),
    (
        "employees",
        "UPDATE OF department",
        "OLD.department IS NOT NEW.department",
        "SELECT campaign_id AS c, NEW.id AS e FROM campaign_targets WHERE employee_id = NEW.id",
    ),
)


def mark_stale(sends: str) -> str:
    """The trigger's statement: the sends not marked yet. (Not INSERT OR IGNORE: inside a
    trigger SQLite applies the outer statement's conflict rule, an upsert's included.)"""
    return (
        f"INSERT INTO stale_sends (campaign_id, employee_id) SELECT c, e FROM ({sends}) AS x"
        " WHERE NOT EXISTS (SELECT 1 FROM stale_sends s WHERE s.campaign_id = x.c"
        " AND s.employee_id = x.e)"
    )


TRIGGERS = "".join(
    f"CREATE TRIGGER IF NOT EXISTS {table}_stale_sends\nAFTER {event} ON {table}\n"
    f"WHEN {when}\nBEGIN {mark_stale(sends)};\nEND;\n"
    for table, event, when, sends in STALE
)

# --- The refresh: the same statements on both stores (``?`` is the one parameter). ---
TEMP_TABLES = ("touched", "old", "new", "funnels", "instants", "hours")


def _firsts_of_events() -> str:
    """The aggregates of one send's events ``ev``: :data:`SEND_COLUMNS` after the keys."""
    firsts = [
        f"min(CASE WHEN ev.type = '{kind}'{' AND ev.with_captcha = 0' if without else ''}"
        f"{and_kept(automation)} THEN ev.timestamp END) AS {first_column(kind, key)}"
        for key, (without, automation) in FILTERS.items()
        for kind in EVENT_TYPES
    ]
    lasts = [
        f"max(CASE WHEN ev.id IS NOT NULL{and_kept(automation)} THEN ev.timestamp END)"
        f" AS last_{automation}"
        for automation in AUTOMATION_FILTERS
    ]
    verdicts = [
        f"count(CASE WHEN ev.verdict = '{verdict}' THEN 1 END) AS {column}"
        for verdict, column in VERDICT_COLUMNS.items()
    ]
    return ", ".join([*firsts, *lasts, *verdicts])


# The sends touched: an event written after ``?`` (new, changed or given a new verdict:
# the range of the change sequence's index; no DISTINCT, which SQLite would plan as a
# scan of every event), and the stale ones; the writer's own by :func:`touched_from`.
TOUCHED_BY_EVENTS = (
    "INSERT INTO summary_touched SELECT campaign_id, employee_id"
    " FROM campaign_events WHERE seq > ? ON CONFLICT DO NOTHING"
)


def touched_from(sends: str) -> str:
    """Add the sends the query ``sends`` selects (campaign_id, employee_id)."""
    return (
        f"INSERT INTO summary_touched SELECT * FROM ({sends}) AS x WHERE true"
        " ON CONFLICT DO NOTHING"
    )


TOUCHED_STALE = touched_from("SELECT campaign_id, employee_id FROM stale_sends")


KEYS = "s.campaign_id = t.campaign_id AND s.employee_id = t.employee_id"
OLD_ROWS = f"SELECT s.* FROM summary_touched t JOIN send_firsts s ON {KEYS}"
# The touched sends computed again: every target among them, with its events (each
# type's range of the campaign's index), its person's department.
NEW_ROWS = (
    f"SELECT t.campaign_id, t.employee_id, e.department, {_firsts_of_events()}"
    " FROM summary_touched t"
    " JOIN campaign_targets g ON g.campaign_id = t.campaign_id AND g.employee_id = t.employee_id"
    " JOIN employees e ON e.id = t.employee_id"
    " LEFT JOIN campaign_events ev ON ev.campaign_id = t.campaign_id"
    f" AND ev.type IN ({', '.join(repr(kind) for kind in EVENT_TYPES)})"
    " AND ev.employee_id = t.employee_id"
    " GROUP BY t.campaign_id, t.employee_id, e.department"
)
DELETE_SENDS = (
    "DELETE FROM send_firsts WHERE (campaign_id, employee_id) IN"
    " (SELECT campaign_id, employee_id FROM summary_touched)"
)
INSERT_SENDS = f"INSERT INTO send_firsts ({', '.join(SEND_COLUMNS)}) SELECT * FROM summary_new"


def _department_sums(table: str, sign: str) -> str:
    """The send rows of ``table`` summed per (campaign, department), every filter's
    counts in one pass (a column per filter and type), signed with ``sign``."""
    sums = [
        f"{sign}count(*) AS targets",
        *(f"{sign}count({column}) AS {column}" for column in FIRSTS),
        *(f"{sign}sum({column}) AS {column}" for column in VERDICT_COLUMNS.values()),
    ]
    return (
        f"SELECT campaign_id, department, {', '.join(sums)} FROM {table}"
        " GROUP BY campaign_id, department"
    )


def _funnel_rows(sums: str) -> list[str]:
    """One row per (campaign, department, filter) of the department sums ``sums``."""
    verdicts = ", ".join(VERDICT_COLUMNS.values())
    return [
        f"SELECT campaign_id, '{key}' AS filters, department, targets, "
        + ", ".join(f"{first_column(kind, key)} AS {name}" for kind, name in COUNT_NAMES.items())
        + f", {verdicts} FROM {sums}"
        for key in FILTERS
    ]


def _instant_rows(table: str, sign: str) -> list[str]:
    """One row per (send, filter, kind) of ``table`` with such a first event, signed."""
    return [
        f"SELECT campaign_id, '{key}' AS filters, '{kind}' AS kind,"
        f" {first_column(kind, key)} AS instant, {sign}1 AS people FROM {table}"
        f" WHERE {first_column(kind, key)} IS NOT NULL"
        for key in FILTERS
        for kind in MEDIAN_KINDS
    ]


def _delta(keys: tuple[str, ...], sums: tuple[str, ...], rows: list[str]) -> str:
    """The summed difference per key of the signed ``rows`` (old minus, new plus)."""
    totals = ", ".join(f"sum({column}) AS {column}" for column in sums)
    return (
        f"SELECT {', '.join(keys)}, {totals} FROM ({' UNION ALL '.join(rows)}) AS d"
        f" GROUP BY {', '.join(keys)}"
    )


def _apply(table: str, delta: str, keys: tuple[str, ...], sums: tuple[str, ...]) -> list[str]:
    """Add the delta table's sums to ``table``, then drop the rows left empty (their
    first sum is 0)."""
    columns = ", ".join((*keys, *sums))
    moved = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in sums)
    named = ", ".join(keys)
    return [
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM summary_{delta} WHERE true"
        f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {moved}",
        f"DELETE FROM {table} WHERE {sums[0]} = 0"
        f" AND ({named}) IN (SELECT {named} FROM summary_{delta})",
    ]


FUNNEL_KEYS = ("campaign_id", "filters", "department")
INSTANT_KEYS = ("campaign_id", "filters", "kind", "instant")
FUNNEL_DELTA = (
    f"WITH sums_new AS MATERIALIZED ({_department_sums('summary_new', '')}),"
    f" sums_old AS MATERIALIZED ({_department_sums('summary_old', '-')}) "
    + _delta(FUNNEL_KEYS, FUNNEL_COUNTS, [*_funnel_rows("sums_new"), *_funnel_rows("sums_old")])
)
INSTANT_DELTA = _delta(
    INSTANT_KEYS,
    ("people",),
    [*_instant_rows("summary_new", ""), *_instant_rows("summary_old", "-")],
)
HOUR = "substr(instant, 1, 13)"  # YYYY-MM-DDTHH
HOUR_KEYS = ("campaign_id", "filters", "kind", "hour")
HOUR_DELTA = (
    f"SELECT campaign_id, filters, kind, {HOUR} AS hour, sum(people) AS people"
    f" FROM summary_instants GROUP BY campaign_id, filters, kind, {HOUR}"
)
APPLY = [
    *_apply("campaign_funnels", "funnels", FUNNEL_KEYS, FUNNEL_COUNTS),
    *_apply("campaign_first_instants", "instants", INSTANT_KEYS, ("people",)),
    *_apply("campaign_first_hours", "hours", HOUR_KEYS, ("people",)),
]


def _median_instant() -> str:
    """The lower-middle person's first instant in the histogram that ``k`` names
    (``k.campaign_id``, ``k.filters``, ``k.kind``) of ``k.n`` people: the first hour whose
    running total of people reaches (n + 1) / 2, then, counting on from the hours before
    it, the first instant of that hour whose total does."""
    of = "{0}.campaign_id = k.campaign_id AND {0}.filters = k.filters AND {0}.kind = k.kind"
    rank = "(k.n + 1) / 2"
    hour = (
        "SELECT x.hour, x.upto - x.people AS before FROM (SELECT b.hour, b.people,"
        " sum(b.people) OVER (ORDER BY b.hour) AS upto FROM campaign_first_hours b"
        f" WHERE {of.format('b')}) x WHERE x.upto >= {rank} ORDER BY x.hour LIMIT 1"
    )
    return (
        "(SELECT min(m.instant) FROM (SELECT h.instant,"
        " hr.before + sum(h.people) OVER (ORDER BY h.instant) AS upto"
        f" FROM ({hour}) hr JOIN campaign_first_instants h ON {of.format('h')}"
        f" AND h.instant > hr.hour AND h.instant < hr.hour || '~') m WHERE m.upto >= {rank})"
    )


def medians_of(histograms: str) -> str:
    """Insert the medians of the histograms that the table ``histograms`` names (rows of
    campaign_id, filters, kind); an emptied histogram gets none. Each histogram's people
    are counted once (MATERIALIZED), not again for each row its walk reads."""
    people = (
        "SELECT CAST(sum(a.people) AS BIGINT) FROM campaign_first_hours a"  # numeric on PG
        " WHERE a.campaign_id = t.campaign_id AND a.filters = t.filters AND a.kind = t.kind"
    )
    return (
        "INSERT INTO campaign_medians (campaign_id, filters, kind, instant)"
        " WITH k AS MATERIALIZED (SELECT t.campaign_id, t.filters, t.kind,"
        f" ({people}) AS n FROM (SELECT DISTINCT campaign_id, filters, kind"
        f" FROM {histograms}) t)"
        f" SELECT k.campaign_id, k.filters, k.kind, {_median_instant()} FROM k WHERE k.n > 0"
    )


MEDIAN_KEYS = "campaign_id, filters, kind"
MEDIANS = [
    f"DELETE FROM campaign_medians WHERE ({MEDIAN_KEYS}) IN"
    f" (SELECT {MEDIAN_KEYS} FROM summary_instants)",
    medians_of("summary_instants"),
]
MEDIANS_OF_EVERY_CAMPAIGN = medians_of("campaign_first_hours")  # schema step 8 to 9

# The directory's block of every person with a touched send, from all their send rows.
TOUCHED_PEOPLE = "SELECT DISTINCT employee_id FROM summary_touched"
DELETE_PEOPLE = f"DELETE FROM employee_phishing WHERE employee_id IN ({TOUCHED_PEOPLE})"
INSERT_PEOPLE = "INSERT INTO employee_phishing " + " UNION ALL ".join(
    f"SELECT employee_id, '{automation}', count(*), "
    + ", ".join(f"count({first_column(kind, automation)})" for kind in EVENT_TYPES)
    + f", max(last_{automation}) FROM send_firsts WHERE employee_id IN ({TOUCHED_PEOPLE})"
    " GROUP BY employee_id"
    for automation in AUTOMATION_FILTERS
)


def _directory_totals(people: str, sign: str = "") -> str:
    """Add (``sign`` ``-``: take away) the blocks of ``people`` to the directory totals."""
    return (
        "INSERT INTO directory_totals (company_id, automation, clicked, failed, people)"
        f" SELECT e.company_id, p.automation, p.clicked, p.failed, {sign}count(*)"
        f" FROM employee_phishing p JOIN employees e ON e.id = p.employee_id WHERE {people}"
        " GROUP BY e.company_id, p.automation, p.clicked, p.failed"
        " ON CONFLICT (company_id, automation, clicked, failed)"
        " DO UPDATE SET people = directory_totals.people + excluded.people"
    )


TOUCHED_BLOCKS = f"p.employee_id IN ({TOUCHED_PEOPLE})"
DIRECTORY_TOTALS_OF_EVERYONE = _directory_totals("true")  # schema step 8 to 9

# After the temporary tables are filled (the store's own CREATE ... AS), in this order.
WRITES = [
    DELETE_SENDS,
    INSERT_SENDS,
    *APPLY,
    *MEDIANS,
    _directory_totals(TOUCHED_BLOCKS, "-"),  # the touched people's blocks leave the totals
    DELETE_PEOPLE,
    INSERT_PEOPLE,
    _directory_totals(TOUCHED_BLOCKS),  # and come back as they are now
    "DELETE FROM directory_totals WHERE people = 0",
    "DELETE FROM stale_sends",
]
# Each temporary table and the query that fills it, in order.
FILLS = {
    "old": OLD_ROWS,
    "new": NEW_ROWS,
    "funnels": FUNNEL_DELTA,
    "instants": INSTANT_DELTA,
    "hours": HOUR_DELTA,
}
EVERY_SEND = "SELECT campaign_id, employee_id FROM campaign_targets"


def fill(conn: sqlite3.Connection) -> None:
    """Compute every send's summaries (an upgrade's last step, after any verdicts)."""
    seq = conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()[0]
    refresh(conn, EVERY_SEND, int(seq))


# Every table the summaries keep: emptied before they are made again from the rows.
SUMMARY_TABLES = (
    "send_firsts", "campaign_funnels", "campaign_first_instants", "campaign_first_hours",
    "campaign_medians", "employee_phishing", "directory_totals", "stale_sends",
)  # fmt: skip


def rebuild(conn: sqlite3.Connection) -> None:
    """Make every summary again from the rows alone, when ids moved under them (a send
    that no longer exists is never a touched one, so its rows would stay)."""
    for table in SUMMARY_TABLES:
        conn.execute(f"DELETE FROM {table}")
    fill(conn)


def refresh(conn: sqlite3.Connection, sends: str, written_after: int) -> None:
    """Bring the summaries up to date with the write in the caller's transaction:
    the sends the query ``sends`` selects ('' for none), those of events written after
    ``written_after`` in the change sequence, and the stale ones."""
    conn.execute(
        "CREATE TEMP TABLE summary_touched (campaign_id INTEGER NOT NULL,"
        " employee_id INTEGER NOT NULL, PRIMARY KEY (campaign_id, employee_id)) WITHOUT ROWID"
    )
    try:
        conn.execute(TOUCHED_BY_EVENTS, (written_after,))
        if sends:
            conn.execute(touched_from(sends))
        conn.execute(TOUCHED_STALE)
        for name, query in FILLS.items():
            conn.execute(f"CREATE TEMP TABLE summary_{name} AS {query}")
        for statement in WRITES:
            conn.execute(statement)
    finally:
        for name in TEMP_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS temp.summary_{name}")
