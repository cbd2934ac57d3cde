"""The training summaries: each course's and each employee's inscriptions counted by
status, the courses' inscriptions by due date, by start date, and by the person's
department and country with the start date, and the section results by value, kept
by the database as the rows change.

The courses page, the directory's training block and the totals of the inscriptions'
common filters read these few rows instead of counting a company's inscriptions on
every request. Every write of an inscription or a section result moves the counts of
what it changed, in the writer's own statement (triggers: SQLite's below, PostgreSQL's
in :mod:`app.data.pg.training`), so every writer keeps them, whoever it is, and a small
load into a large database touches a few summary rows. The counts are integers: they
never drift from a recount, which is what the upgrade does once (:data:`FILL`).

A summary row whose counts have all come back to 0 stays (its key was seen once).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .vocabulary import INSCRIPTION_STATUSES


@dataclass(frozen=True)
class Summary:
    """One summary table: its key columns, its counts (SQL of a source row ``d`` whose
    ``sign`` is 1 for a row that came and -1 for one that went), and which rows count."""

    table: str
    source: str  # the table whose rows are counted
    key: tuple[str, ...]
    counts: tuple[tuple[str, str], ...]
    where: str = "true"
    status: bool = True  # whether the counts read the row's status

    @property
    def columns(self) -> tuple[str, ...]:
        """The source's columns the summary reads."""
        return (*self.key, "status") if self.status else self.key

    def upsert(self, rows: str) -> str:
        """Add the signed ``rows`` (``key..., status?, sign``) to the summary, grouped."""
        keys = ", ".join(self.key)
        names = ", ".join(name for name, _ in self.counts)
        sums = ", ".join(f"sum({sql})" for _, sql in self.counts)
        moved = " OR ".join(f"sum({sql}) <> 0" for _, sql in self.counts)
        added = ", ".join(f"{n} = {self.table}.{n} + excluded.{n}" for n, _ in self.counts)
        return (
            f"INSERT INTO {self.table} ({keys}, {names}) SELECT {keys}, {sums}"
            f" FROM ({rows}) d WHERE {self.where} GROUP BY {keys} HAVING {moved}"
            f" ON CONFLICT ({keys}) DO UPDATE SET {added}"
        )

    def add(self, row: str, sign: int) -> str:
        """Add one row (a trigger's ``NEW`` or ``OLD``) with ``sign``: no grouping to do."""

        def of_row(sql: str) -> str:
            return re.sub(r"\bd\.", f"{row}.", sql.replace("d.sign", str(sign)))

        keys = ", ".join(self.key)
        names = ", ".join(name for name, _ in self.counts)
        values = ", ".join(
            [*(f"{row}.{k}" for k in self.key), *(of_row(c) for _, c in self.counts)]
        )
        added = ", ".join(f"{n} = {self.table}.{n} + excluded.{n}" for n, _ in self.counts)
        return (
            f"INSERT INTO {self.table} ({keys}, {names}) SELECT {values} WHERE {of_row(self.where)}"
            f" ON CONFLICT ({keys}) DO UPDATE SET {added}"
        )

    def signed(self, row: str, sign: int) -> str:
        """``SELECT`` of the columns of ``row`` (``NEW``, ``OLD`` or a table) with ``sign``."""
        return ", ".join(f"{row}.{c} AS {c}" for c in self.columns) + f", {sign} AS sign"


def _by_status() -> tuple[tuple[str, str], ...]:
    return (
        ("inscriptions", "d.sign"),
        *(
            (status, f"CASE WHEN d.status = '{status}' THEN d.sign ELSE 0 END")
            for status in INSCRIPTION_STATUSES
        ),
    )


SUMMARIES = (
    # Each course's and each employee's inscriptions, by status.
    Summary("training_courses", "inscriptions", ("course_id",), _by_status()),
    Summary("training_employees", "inscriptions", ("employee_id",), _by_status()),
    # Each course's inscriptions by due date, and those not completed (``overdue`` is
    # the sum of ``open`` before today's date): the due-date filters' totals too.
    Summary(
        "training_due",
        "inscriptions",
        ("course_id", "due_date"),
        (
            ("inscriptions", "d.sign"),
            ("open", "CASE WHEN d.status <> 'completed' THEN d.sign ELSE 0 END"),
        ),
        "d.due_date IS NOT NULL",
    ),
    # Each course's inscriptions by start date: the start-date filters' totals.
    Summary(
        "training_starts",
        "inscriptions",
        ("course_id", "start_date"),
        (("n", "d.sign"),),
        status=False,
    ),
    # Each section's results by value: a course's average result (integer counts, so
    # the sum of the values is the same as over the rows themselves).
    Summary(
        "training_results",
        "section_results",
        ("section_id", "result"),
        (("n", "d.sign"),),
        "d.result IS NOT NULL",
        status=False,
    ),
)

# --- Schema version 7 to 8 (SQLite): the training summaries, their triggers, filled. ---
TABLES = """
CREATE TABLE IF NOT EXISTS training_courses (
    course_id   INTEGER PRIMARY KEY,
    inscriptions INTEGER NOT NULL, not_started INTEGER NOT NULL,
    in_progress INTEGER NOT NULL, completed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS training_employees (
    employee_id INTEGER PRIMARY KEY,
    inscriptions INTEGER NOT NULL, not_started INTEGER NOT NULL,
    in_progress INTEGER NOT NULL, completed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS training_due (
    course_id INTEGER NOT NULL, due_date TEXT NOT NULL,
    inscriptions INTEGER NOT NULL, open INTEGER NOT NULL,
    PRIMARY KEY (course_id, due_date)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS training_starts (
    course_id INTEGER NOT NULL, start_date TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (course_id, start_date)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS training_results (
    section_id INTEGER NOT NULL, result REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (section_id, result)
) WITHOUT ROWID;
"""


def _trigger(source: str, event: str) -> str:
    """A row trigger on ``source`` adding the row that went (-1) and the one that came (+1)
    to each of its summaries."""
    summaries = [s for s in SUMMARIES if s.source == source]
    watched = sorted({c for s in summaries for c in s.columns})
    changed = " OR ".join(f"OLD.{c} IS NOT NEW.{c}" for c in watched)
    when = f"\nWHEN {changed}" if event == "UPDATE" else ""
    rows = {"INSERT": (("NEW", 1),), "UPDATE": (("OLD", -1), ("NEW", 1)), "DELETE": (("OLD", -1),)}
    body = "".join(f"    {s.add(row, sign)};\n" for s in summaries for row, sign in rows[event])
    name = f"{source}_training_{event.lower()}"
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name}\nAFTER {event} ON {source}{when}\nBEGIN\n{body}END;\n"
    )


TRIGGERS = "".join(
    _trigger(source, event)
    for source in ("inscriptions", "section_results")
    for event in ("INSERT", "UPDATE", "DELETE")
)


# --- Schema version 11 to 12: each course's inscriptions by the person's department and
# country and by start date: the totals of the inscriptions' department and country
# filters (with the courses and the start dates). Kept by the inscriptions' triggers and
# by the employees' (a person whose department or country changes takes their
# inscriptions along); SQLite's row triggers here, PostgreSQL's statement triggers in
# app/data/pg/training.py. ---
PEOPLE_KEY = "course_id, department_key, country_key, start_date"
# Version 13: the same counts without the start date (training_people_totals), so that a
# total by department or country alone sums a row per course and country, not one per
# start date too (on the large set, tens of thousands of rows for a department).
TOTALS_KEY = "course_id, department_key, country_key"
PEOPLE_TABLE = f"""
CREATE TABLE IF NOT EXISTS training_people (
    course_id INTEGER NOT NULL, department_key TEXT NOT NULL, country_key TEXT NOT NULL,
    start_date TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY ({PEOPLE_KEY})
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS training_people_totals (
    course_id INTEGER NOT NULL, department_key TEXT NOT NULL, country_key TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY ({TOTALS_KEY})
) WITHOUT ROWID;
"""
PEOPLE_SUMMARIES = (("training_people", PEOPLE_KEY), ("training_people_totals", TOTALS_KEY))


def people_moved(rows: str, conflict: Callable[[str], str] = str) -> tuple[str, ...]:
    """Add the signed ``rows`` (the key's columns, then ``sign``) to training_people and
    to its totals without the start date. ``conflict`` turns a key into the columns of
    the table's unique index (PostgreSQL's hashes the texts: app/data/pg/training.py)."""
    return tuple(
        f"INSERT INTO {table} ({key}, n) SELECT {key}, sum(sign)"
        f" FROM ({rows}) d WHERE true GROUP BY {key} HAVING sum(sign) <> 0"
        f" ON CONFLICT ({conflict(key)}) DO UPDATE SET n = {table}.n + excluded.n"
        for table, key in PEOPLE_SUMMARIES
    )


def people_rows(inscription: str, person: str, sign: int) -> str:
    """The columns of a signed row: an inscription's course and start date with a
    person's department and country."""
    return (
        f"{inscription}.course_id AS course_id, {person}.department_key AS department_key,"
        f" {person}.country_key AS country_key, {inscription}.start_date AS start_date,"
        f" {sign} AS sign"
    )


def _steps(statements: tuple[str, ...]) -> str:
    """Statements as the steps of a trigger's body."""
    return ";\n    ".join(statements)


def _inscription_moved(row: str, sign: int) -> str:
    """The trigger steps adding an inscription's row (``OLD``, ``NEW``) with ``sign``."""
    return _steps(
        people_moved(
            f"SELECT {people_rows(row, 'e', sign)} FROM employees e WHERE e.id = {row}.employee_id"
        )
    )


def _person_moved(row: str, sign: int) -> str:
    return (
        f"SELECT {people_rows('i', row, sign)} FROM inscriptions i WHERE i.employee_id = {row}.id"
    )


PEOPLE_TRIGGERS = f"""
CREATE TRIGGER IF NOT EXISTS inscriptions_people_insert AFTER INSERT ON inscriptions
BEGIN
    {_inscription_moved("NEW", 1)};
END;
CREATE TRIGGER IF NOT EXISTS inscriptions_people_update
AFTER UPDATE OF employee_id, course_id, start_date ON inscriptions
WHEN OLD.employee_id IS NOT NEW.employee_id OR OLD.course_id IS NOT NEW.course_id
    OR OLD.start_date IS NOT NEW.start_date
BEGIN
    {_inscription_moved("OLD", -1)};
    {_inscription_moved("NEW", 1)};
END;
CREATE TRIGGER IF NOT EXISTS inscriptions_people_delete AFTER DELETE ON inscriptions
BEGIN
    {_inscription_moved("OLD", -1)};
END;
CREATE TRIGGER IF NOT EXISTS employees_people_update
AFTER UPDATE OF department_key, country_key ON employees
WHEN OLD.department_key IS NOT NEW.department_key OR OLD.country_key IS NOT NEW.country_key
BEGIN
    {_steps(people_moved(f"{_person_moved('OLD', -1)} UNION ALL {_person_moved('NEW', 1)}"))};
END;
"""
PEOPLE_TRIGGER_NAMES = (
    "inscriptions_people_insert", "inscriptions_people_update", "inscriptions_people_delete",
    "employees_people_update",
)  # fmt: skip


# Counted afresh from the rows (emptied first: filling twice never doubles a count).
def fill_people(conflict: Callable[[str], str] = str) -> tuple[str, ...]:
    """The statements counting training_people and its totals afresh (see
    :func:`people_moved` for ``conflict``)."""
    return (
        *(f"DELETE FROM {table}" for table, _ in PEOPLE_SUMMARIES),
        *people_moved(
            f"SELECT {people_rows('i', 'e', 1)} FROM inscriptions i"
            " JOIN employees e ON e.id = i.employee_id",
            conflict,
        ),
    )


FILL_PEOPLE = fill_people()
# --- end of 11 to 12 ---

# Every summary counted afresh from the rows (into empty tables: the upgrade).
# Counted from scratch (emptied first: filling twice never doubles a count).
FILL_COUNTS = (
    *(f"DELETE FROM {s.table}" for s in SUMMARIES),
    *(s.upsert(f"SELECT {s.signed(s.source, 1)} FROM {s.source}") for s in SUMMARIES),
)
FILL = (*FILL_COUNTS, *FILL_PEOPLE)
MIGRATE_7_TO_8 = (*FILL,)  # after TABLES and TRIGGERS (the schema's CREATEs)
# --- end of 7 to 8 ---
