"""PostgreSQL's twin of ``app/data/summaries.py``: the same tables, the same refresh.

The refresh's statements are SQLite's own text; only the temporary tables' creation
(ON COMMIT DROP) and the triggers (PL/pgSQL) differ.
"""

from __future__ import annotations

import asyncpg

from ..summaries import (
    EVERY_SEND,
    FILLS,
    STALE,
    SUMMARY_TABLES,
    TEMP_TABLES,
    TOUCHED_BY_EVENTS,
    TOUCHED_STALE,
    WRITES,
    mark_stale,
    touched_from,
)
from .sql import numbered

# SQLite's triggers marking stale sends, as PostgreSQL row triggers.
TRIGGERS = "".join(
    f"""
CREATE OR REPLACE FUNCTION {table}_stale_sends() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {mark_stale(sends)};
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER {table}_stale_sends AFTER {event} ON {table} FOR EACH ROW
    WHEN ({when.replace(" IS NOT ", " IS DISTINCT FROM ")})
    EXECUTE FUNCTION {table}_stale_sends();
"""
    for table, event, when, sends in STALE
)


async def refresh(conn: asyncpg.Connection, sends: str, written_after: int) -> None:
    """SQLite's ``refresh``, inside the caller's transaction on PostgreSQL."""
    await conn.execute(
        "CREATE TEMP TABLE summary_touched (campaign_id BIGINT NOT NULL,"
        " employee_id BIGINT NOT NULL, PRIMARY KEY (campaign_id, employee_id)) ON COMMIT DROP"
    )
    try:
        await conn.execute(numbered(TOUCHED_BY_EVENTS), written_after)
        if sends:
            await conn.execute(touched_from(sends))
        await conn.execute(TOUCHED_STALE)
        # A temporary table has no statistics: without them PostgreSQL may plan a small
        # load's few sends as a scan of every event or send row.
        await conn.execute("ANALYZE summary_touched")
        for name, query in FILLS.items():
            await conn.execute(f"CREATE TEMP TABLE summary_{name} ON COMMIT DROP AS {query}")
            await conn.execute(f"ANALYZE summary_{name}")
        for statement in WRITES:
            await conn.execute(statement)
    finally:
        for name in TEMP_TABLES:
            await conn.execute(f"DROP TABLE IF EXISTS summary_{name}")


async def fill(conn: asyncpg.Connection) -> None:
    """Compute every send's summaries (an upgrade, a copied database)."""
    seq = await conn.fetchval("SELECT value::bigint FROM meta WHERE key = 'change_seq'")
    await refresh(conn, EVERY_SEND, seq)


async def rebuild(conn: asyncpg.Connection) -> None:
    """:func:`app.data.summaries.rebuild` on PostgreSQL."""
    for table in SUMMARY_TABLES:
        await conn.execute(f"DELETE FROM {table}")
    await fill(conn)
