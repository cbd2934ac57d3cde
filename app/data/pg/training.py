"""The training summaries on PostgreSQL (SQLite's :mod:`app.data.training`): the same
tables, kept by statement triggers that add each statement's rows at once.

A statement trigger sees every row the statement wrote in its transition tables
(``came``, ``went``), so a load's ``INSERT ... SELECT`` or ``COPY`` of a million rows
moves the summaries in one grouped statement each, not a million small ones.
"""

from __future__ import annotations

import asyncpg

from ..training import (
    FILL_COUNTS,
    PEOPLE_KEY,
    SUMMARIES,
    TOTALS_KEY,
    fill_people,
    people_moved,
    people_rows,
)

TEXT = 'TEXT COLLATE "C"'  # as every text column (app/data/pg/schema.py)

# --- Schema version 7 to 8 (PostgreSQL): the training summaries, their triggers. ---
_COUNTS = "inscriptions INTEGER NOT NULL, not_started INTEGER NOT NULL,"
TABLES = f"""
CREATE TABLE IF NOT EXISTS training_courses (
    course_id BIGINT PRIMARY KEY, {_COUNTS}
    in_progress INTEGER NOT NULL, completed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS training_employees (
    employee_id BIGINT PRIMARY KEY, {_COUNTS}
    in_progress INTEGER NOT NULL, completed INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS training_due (
    course_id BIGINT NOT NULL, due_date {TEXT} NOT NULL,
    inscriptions INTEGER NOT NULL, open INTEGER NOT NULL,
    PRIMARY KEY (course_id, due_date)
);
CREATE TABLE IF NOT EXISTS training_starts (
    course_id BIGINT NOT NULL, start_date {TEXT} NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (course_id, start_date)
);
CREATE TABLE IF NOT EXISTS training_results (
    section_id BIGINT NOT NULL, result NUMERIC NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (section_id, result)
);
"""

# Each event's transition tables, and the rows of each with their sign.
_EVENTS = {
    "INSERT": ("REFERENCING NEW TABLE AS came", (("came", 1),)),
    "UPDATE": ("REFERENCING OLD TABLE AS went NEW TABLE AS came", (("went", -1), ("came", 1))),
    "DELETE": ("REFERENCING OLD TABLE AS went", (("went", -1),)),
}


def _statement_trigger(name: str, on: str, event: str, statements: list[str]) -> str:
    """A statement trigger on ``on`` that runs ``statements`` (they read its transition
    tables, ``came`` and ``went``)."""
    referencing, _ = _EVENTS[event]
    body = "".join(f"    {statement};\n" for statement in statements)
    return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{body}    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER {name} AFTER {event} ON {on} {referencing}
    FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""


def _trigger(source: str, event: str) -> str:
    """A statement trigger on ``source`` adding its rows to each of its summaries."""
    _, tables = _EVENTS[event]
    statements = [
        s.upsert(" UNION ALL ".join(f"SELECT {s.signed('r', n)} FROM {t} r" for t, n in tables))
        for s in SUMMARIES
        if s.source == source
    ]
    return _statement_trigger(f"{source}_training_{event.lower()}", source, event, statements)


TRIGGERS = "".join(
    _trigger(source, event)
    for source in ("inscriptions", "section_results")
    for event in ("INSERT", "UPDATE", "DELETE")
)


# --- Schema version 11 to 12 (PostgreSQL): the inscriptions by the person's department
# and country (app/data/training.py), kept by statement triggers. ---
#
# Their keys hold a department and a country of up to 500 characters each: up to 4,000
# bytes of UTF-8, past the 2,704 a btree entry may hold (the load failed with "index row
# size exceeds btree version 4 maximum"), so the unique index holds the texts' md5, and
# the upserts name that index's columns (:func:`hashed`). A database made before keeps
# its primary keys until a writer replaces them (:data:`HASHED_PEOPLE_KEYS`).
def hashed(key: str) -> str:
    """A summary's key with its two texts as their md5: the unique index's columns."""
    for text in ("department_key", "country_key"):
        key = key.replace(text, f"md5({text})")
    return key


# The inscriptions' totals look rows up by department or country (app/data/inscriptions.py),
# which the md5 index cannot serve: hash indexes (no size limit) do, as fast as the primary
# key's prefix did.
HASHED_INDEXES = f"""
CREATE UNIQUE INDEX IF NOT EXISTS training_people_hashed_key
    ON training_people ({hashed(PEOPLE_KEY)});
CREATE UNIQUE INDEX IF NOT EXISTS training_people_totals_hashed_key
    ON training_people_totals ({hashed(TOTALS_KEY)});
CREATE INDEX IF NOT EXISTS training_people_by_department
    ON training_people USING hash (department_key);
CREATE INDEX IF NOT EXISTS training_people_by_country ON training_people USING hash (country_key);
"""
PEOPLE_TABLE = f"""
CREATE TABLE IF NOT EXISTS training_people (
    course_id BIGINT NOT NULL, department_key {TEXT} NOT NULL, country_key {TEXT} NOT NULL,
    start_date {TEXT} NOT NULL, n INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS training_people_totals (
    course_id BIGINT NOT NULL, department_key {TEXT} NOT NULL, country_key {TEXT} NOT NULL,
    n INTEGER NOT NULL
);
{HASHED_INDEXES}"""
FILL_PEOPLE = fill_people(hashed)
FILL = (*FILL_COUNTS, *FILL_PEOPLE)


def _inscriptions_moved(tables: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    return people_moved(
        " UNION ALL ".join(
            f"SELECT {people_rows('r', 'e', sign)} FROM {table} r"
            " JOIN employees e ON e.id = r.employee_id"
            for table, sign in tables
        ),
        hashed,
    )


# Only the people whose department or country changed take their inscriptions along.
_PEOPLE_MOVED = people_moved(
    " UNION ALL ".join(
        f"SELECT {people_rows('i', side, sign)} FROM went w JOIN came c ON c.id = w.id"
        " JOIN inscriptions i ON i.employee_id = w.id"
        " WHERE (w.department_key, w.country_key)"
        " IS DISTINCT FROM (c.department_key, c.country_key)"
        for side, sign in (("w", -1), ("c", 1))
    ),
    hashed,
)


PEOPLE_TRIGGERS = "".join(
    _statement_trigger(
        f"inscriptions_people_{event.lower()}",
        "inscriptions",
        event,
        list(_inscriptions_moved(_EVENTS[event][1])),
    )
    for event in ("INSERT", "UPDATE", "DELETE")
) + _statement_trigger("employees_people_update", "employees", "UPDATE", list(_PEOPLE_MOVED))
PEOPLE_SCHEMA = PEOPLE_TABLE + PEOPLE_TRIGGERS
# A database whose summaries still have their primary keys (made before the hashed
# index): the index replaces them, and the triggers are made again with its columns.
OLD_PEOPLE_KEYS = (
    "SELECT count(*) FROM pg_constraint WHERE conname IN"
    " ('training_people_pkey', 'training_people_totals_pkey')"
)
HASHED_PEOPLE_KEYS = f"""
ALTER TABLE IF EXISTS training_people DROP CONSTRAINT IF EXISTS training_people_pkey;
ALTER TABLE IF EXISTS training_people_totals
    DROP CONSTRAINT IF EXISTS training_people_totals_pkey;
{HASHED_INDEXES}{PEOPLE_TRIGGERS}"""


async def hash_people_keys(conn: asyncpg.Connection) -> None:
    """Give an older database's people summaries the hashed unique index, once."""
    if await conn.fetchval(OLD_PEOPLE_KEYS):
        await conn.execute(HASHED_PEOPLE_KEYS)


async def migrate_11_to_12(conn: asyncpg.Connection) -> None:
    """The inscriptions by department and country (and, version 13, their totals without
    the start date), counted once; the triggers, made again, keep them."""
    await conn.execute(PEOPLE_SCHEMA)
    for statement in FILL_PEOPLE:
        await conn.execute(statement)


# --- end of 11 to 12 ---
SCHEMA_8 = TABLES + TRIGGERS + PEOPLE_SCHEMA


async def migrate_7_to_8(conn: asyncpg.Connection) -> None:
    """The summaries, counted once from the stored rows; the triggers keep them."""
    await conn.execute(SCHEMA_8)
    for statement in FILL:
        await conn.execute(statement)


# --- end of 7 to 8 ---
