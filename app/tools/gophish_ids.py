"""GoPhish-derived ids under 2^53, and the in-place upgrade of ids from earlier imports.

JavaScript numbers (a browser's JSON.parse, jq, spreadsheets) count exactly up to 2^53-1;
a larger id loses digits and stops matching. Imports used to derive ids up to 2^63-1;
:func:`safe_id` brings such an id under 2^53 and leaves a smaller one as it is, so the
ids an import derives now are exactly the old ids brought down by it. An import into a
database that still holds larger employee, campaign or event ids first renumbers them by
the same rule, in the import's own transaction: the same export then maps to the same
rows, and every summary is made again from them. Two ids that would meet are refused by
the primary key, and nothing is written.
"""

from __future__ import annotations

import sqlite3

import asyncpg

from ..data import summaries
from ..data.pg import summaries as pg_summaries
from ..data.pg.sql import numbered
from ..data.pg.stats_summary import refresh as pg_refresh_stats
from ..data.schema import changed_rows, fill_summaries
from ..data.stats_summary import EVERYTHING

MAX_SAFE_ID = 2**53 - 1  # JavaScript's Number.MAX_SAFE_INTEGER


def safe_id(wide: int) -> int:
    """An id from 1 to 2^63-1 brought into 1..2^53-1; a smaller one is unchanged."""
    return (wide - 1) % MAX_SAFE_ID + 1


def _safe(column: str) -> str:
    """:func:`safe_id` in SQL (the same on SQLite and PostgreSQL)."""
    return f"(({column} - 1) % {MAX_SAFE_ID} + 1)"


def _move(table: str, columns: str, children: tuple[tuple[str, str], ...]) -> list[str]:
    """Copy each wide row under its safe id, point its children at the copy, drop it
    (a copy, as PostgreSQL checks each foreign key at once)."""
    wide = f"id > {MAX_SAFE_ID}"
    return [
        f"INSERT INTO {table} (id, {columns}) SELECT {_safe('id')}, {columns}"
        f" FROM {table} WHERE {wide}",
        *(
            f"UPDATE {child} SET {column} = {_safe(column)} WHERE {column} > {MAX_SAFE_ID}"
            for child, column in children
        ),
        f"DELETE FROM {table} WHERE {wide}",
    ]


PERSON = (
    "company_id, first_name, last_name, email, department, country,"
    " first_name_key, last_name_key, email_key, department_key, country_key"
)
ANY_WIDE = " OR ".join(
    f"EXISTS (SELECT 1 FROM {table} WHERE id > {MAX_SAFE_ID})"
    for table in ("employees", "campaigns", "campaign_events")
)
RENUMBER = [
    *_move(
        "employees",
        PERSON,
        (
            ("campaign_targets", "employee_id"),
            ("campaign_events", "employee_id"),
            ("team_members", "employee_id"),
            ("inscriptions", "employee_id"),
        ),
    ),
    *_move(
        "campaigns",
        "company_id, title, launch_date, title_key",
        (("campaign_targets", "campaign_id"), ("campaign_events", "campaign_id")),
    ),
]
# A renumbered event is a changed one: it takes the next places of the change sequence
# (in new id order), so that a feed collector is sent it again under its new id.
RENUMBER_EVENTS = (
    f"UPDATE campaign_events SET id = {_safe('id')}, seq = ? + r.n"
    f" FROM (SELECT id AS old, row_number() OVER (ORDER BY {_safe('id')}) AS n"
    f" FROM campaign_events WHERE id > {MAX_SAFE_ID}) AS r"
    " WHERE campaign_events.id = r.old"
)
CHANGE_SEQ = "SELECT value FROM meta WHERE key = 'change_seq'"
SET_CHANGE_SEQ = "UPDATE meta SET value = ? WHERE key = 'change_seq'"


def has_wide_ids(conn: sqlite3.Connection) -> bool:
    """Whether an earlier import left ids above 2^53-1."""
    return bool(conn.execute(f"SELECT {ANY_WIDE}").fetchone()[0])


def renumber(conn: sqlite3.Connection) -> None:
    """Bring every wide id under 2^53 (inside the import's write transaction), then make
    every summary again: theirs were kept under the old ids, which no write names again."""
    for statement in RENUMBER:
        conn.execute(statement)
    seq = int(conn.execute(CHANGE_SEQ).fetchone()[0])
    conn.execute(RENUMBER_EVENTS, (seq,))
    moved = changed_rows(conn)
    conn.execute(SET_CHANGE_SEQ, (str(seq + moved),))
    summaries.rebuild(conn)
    fill_summaries(conn)


async def has_wide_ids_pg(conn: asyncpg.Connection) -> bool:
    """:func:`has_wide_ids` on PostgreSQL."""
    return bool(await conn.fetchval(f"SELECT {ANY_WIDE}"))


async def renumber_pg(conn: asyncpg.Connection) -> None:
    """:func:`renumber` on PostgreSQL."""
    for statement in RENUMBER:
        await conn.execute(statement)
    seq = int(await conn.fetchval(CHANGE_SEQ))
    status = await conn.execute(numbered(RENUMBER_EVENTS), seq)
    moved = int(status.split()[-1])
    await conn.execute(numbered(SET_CHANGE_SEQ), str(seq + moved))
    await pg_summaries.rebuild(conn)
    await pg_refresh_stats(conn, seq + moved, EVERYTHING)
