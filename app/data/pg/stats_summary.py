"""PostgreSQL's stats summaries: SQLite's tables and statements (app/data/stats_summary.py),
run by PostgreSQL's writers in their transaction."""

from __future__ import annotations

import asyncpg

from ..stats_summary import (
    ADD_MEDIAN_HOUR,
    ADD_PEOPLE,
    APPLY,
    DAYS_OF,
    EMPTIED,
    HOUR_HISTOGRAMS,
    HOUR_SECONDS_OF_MEDIANS,
    MEDIAN_HOURS,
    MOVED,
    NEXT_MEDIAN_HOURS,
    PEOPLE_ROWS,
    SET_MEDIANS,
    TABLES,
    TAKEN_AWAY,
    TOUCH,
    TRAINING_TAKEN,
    PeopleMoves,
    Touched,
    before_days,
    day_periods,
    drops,
    hours_to_read,
    median_hours,
    medians,
    periods_by_day,
    scratch,
)
from .sql import numbered

_TEXT = 'TEXT COLLATE "C"'  # the schema's text (pg/schema.py): groups sort by code point
PG_TABLES = (
    (TABLES + MOVED).format(int="BIGINT", text=_TEXT, real="NUMERIC", without_rowid="")
    + """
CREATE OR REPLACE FUNCTION stats_event_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO stats_moved_sends VALUES (OLD.campaign_id, OLD.employee_id)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER stats_event_moved AFTER UPDATE OF campaign_id, employee_id
ON campaign_events FOR EACH ROW
WHEN (OLD.campaign_id <> NEW.campaign_id OR OLD.employee_id <> NEW.employee_id)
EXECUTE FUNCTION stats_event_moved();
"""
)


async def refresh(conn: asyncpg.Connection, seq: int, touched: Touched) -> None:
    """Bring the stats' summaries up to date with the write in progress (inside its
    transaction): what ``touched`` names and the events above ``seq``."""
    for statement in scratch("BIGINT", _TEXT):
        await conn.execute(statement)
    for statement in before_days(touched):
        if statement.startswith(TOUCH):
            await conn.execute(numbered(statement), seq)
        else:
            await conn.execute(statement)
    periods = day_periods(day for (day,) in await conn.fetch(DAYS_OF))
    await conn.executemany("INSERT INTO sumstats_days VALUES ($1, $2, $3)", periods)
    moves = PeopleMoves(periods_by_day(periods))
    async for row in conn.cursor(PEOPLE_ROWS, prefetch=10_000):
        moves.add(row)
    await conn.executemany(numbered(ADD_PEOPLE), moves.rows())
    for statement in APPLY:
        await conn.execute(statement)
    await conn.execute(MEDIAN_HOURS)
    for at in median_hours(await conn.fetch(HOUR_HISTOGRAMS)):
        await conn.execute(NEXT_MEDIAN_HOURS)
        await conn.executemany(numbered(ADD_MEDIAN_HOUR), hours_to_read(at))
        seconds = await conn.fetch(HOUR_SECONDS_OF_MEDIANS)
        await conn.executemany(numbered(SET_MEDIANS), list(medians(at, seconds)))
    if await conn.fetchval(TAKEN_AWAY):
        await conn.execute(TRAINING_TAKEN)
        for select, delete in EMPTIED:
            rows = [tuple(r) for r in await conn.fetch(select)]
            await conn.executemany(numbered(delete), rows)
    for statement in drops():
        await conn.execute(statement)
