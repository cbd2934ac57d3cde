"""PostgreSQL's twin of ``app/data/automation.py``: the same rules, the same verdicts.

The rules' statements (the masks, bursts, shared addresses, the changed verdicts) are
SQLite's own text; only the tables' creation differs (epoch seconds, ON COMMIT DROP).
Agents and addresses are matched by the same Python on both stores.
"""

from __future__ import annotations

from collections import Counter

import asyncpg

from ..automation import BURSTS, NEW_VERDICTS, RULES_KEY, SHARED, TABLES, Rules, mask_sql

_EVENTS = (
    "CREATE TEMP TABLE automation_events ON COMMIT DROP AS SELECT e.id, e.campaign_id,"
    " e.employee_id, e.type, e.with_captcha, e.ip, e.user_agent, e.seq, e.verdict, e.reasons,"
    " extract(epoch FROM e.timestamp::timestamp)::bigint AS t,"
    " extract(epoch FROM g.sent_at::timestamp)::bigint AS sent"
    " FROM automation_scope AS s JOIN campaign_events AS e ON e.campaign_id = s.id"
    " LEFT JOIN campaign_targets AS g"
    " ON g.campaign_id = e.campaign_id AND g.employee_id = e.employee_id"
)
_CLICKS = "CREATE INDEX ON automation_events (campaign_id, ip, t) WHERE type = 'click'"
_FLAGS = (
    "CREATE TEMP TABLE automation_flags ON COMMIT DROP AS SELECT ev.id, ev.seq,"
    f" ev.verdict AS old, ev.reasons AS old_reasons, {mask_sql('$1::bigint')} AS mask"
    " FROM automation_events AS ev"
)
_MOVE = (
    "UPDATE campaign_events SET verdict = n.verdict, reasons = n.reasons,"
    " seq = CASE WHEN n.seq > $1 THEN n.seq ELSE (SELECT value::bigint FROM meta"
    " WHERE key = 'change_seq') + n.place END"
    " FROM (SELECT id, seq, verdict, reasons, row_number() OVER"
    " (PARTITION BY seq > $1 ORDER BY id) AS place FROM automation_new) AS n"
    " WHERE n.id = campaign_events.id"
)


async def classify(
    conn: asyncpg.Connection, rules: Rules, campaigns: str, written_after: int
) -> Counter[tuple[str, str]]:
    """SQLite's ``classify``, inside the caller's transaction on PostgreSQL."""
    await conn.execute("CREATE TEMP TABLE automation_scope (id BIGINT PRIMARY KEY) ON COMMIT DROP")
    try:
        await conn.execute(f"INSERT INTO automation_scope {campaigns} ON CONFLICT DO NOTHING")
        await _widen_to_companies(conn, rules)
        return await _decide(conn, rules, written_after)
    finally:
        for table in TABLES:
            await conn.execute(f"DROP TABLE IF EXISTS automation_{table}")


async def _widen_to_companies(conn: asyncpg.Connection, rules: Rules) -> None:
    record = rules.record()
    companies = await conn.fetch(
        "SELECT DISTINCT c.company_id FROM automation_scope AS s"
        " JOIN campaigns AS c ON c.id = s.id"
        " LEFT JOIN meta AS m ON m.key = $1 || c.company_id"
        " WHERE m.value IS DISTINCT FROM $2",
        RULES_KEY,
        record,
    )
    for (company,) in companies:
        await conn.execute(
            "INSERT INTO automation_scope SELECT id FROM campaigns WHERE company_id = $1"
            " ON CONFLICT DO NOTHING",
            company,
        )
        await conn.execute(
            "INSERT INTO meta (key, value) VALUES ($1, $2)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            f"{RULES_KEY}{company}",
            record,
        )


async def _matches(conn: asyncpg.Connection, table: str, column: str, found: list[str]) -> None:
    await conn.execute(f"CREATE TEMP TABLE {table} ({column} TEXT PRIMARY KEY) ON COMMIT DROP")
    await conn.copy_records_to_table(table, records=[(v,) for v in found], columns=(column,))


async def _decide(
    conn: asyncpg.Connection, rules: Rules, written_after: int
) -> Counter[tuple[str, str]]:
    await conn.execute(_EVENTS)
    await conn.execute(_CLICKS)
    agents = await conn.fetch(
        "SELECT DISTINCT user_agent FROM automation_events WHERE user_agent IS NOT NULL"
    )
    scanners = rules.scanner_agents(r["user_agent"] for r in agents)
    await _matches(conn, "automation_agents", "agent", scanners)
    inside: list[str] = []
    if rules.networks:
        found = await conn.fetch("SELECT DISTINCT ip FROM automation_events WHERE ip IS NOT NULL")
        inside = rules.scanner_addresses(r["ip"] for r in found)
    await _matches(conn, "automation_addresses", "ip", inside)
    await conn.execute(f"CREATE TEMP TABLE automation_bursts ON COMMIT DROP AS {BURSTS}")
    await conn.execute(f"CREATE TEMP TABLE automation_shared ON COMMIT DROP AS {SHARED}")
    await conn.execute(_FLAGS, rules.fast_seconds)
    await conn.execute(f"CREATE TEMP TABLE automation_new ON COMMIT DROP AS {NEW_VERDICTS}")
    moved: Counter[tuple[str, str]] = Counter()
    for row in await conn.fetch(
        "SELECT old, verdict, count(*) AS n FROM automation_new WHERE seq <= $1 GROUP BY 1, 2",
        written_after,
    ):
        moved[(row["old"], row["verdict"])] = row["n"]
    await conn.execute(_MOVE, written_after)
    if moved:
        await conn.execute(
            "UPDATE meta SET value = (value::bigint + $1)::text WHERE key = 'change_seq'",
            sum(moved.values()),
        )
    return moved
