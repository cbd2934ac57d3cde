"""PostgreSQL's twin of ``app/data/automation.py``: the same rules, the same verdicts.

The statements follow SQLite's one for one; only the dialect differs (epoch seconds,
the agents as an array, ASCII lower case by ``translate``, as SQLite's ``lower``).
"""

from __future__ import annotations

from collections import Counter

import asyncpg

from ..automation import (
    BURST_CLICKS,
    BURST_SECONDS,
    RULES_KEY,
    SCANNER_AGENTS,
    SHARED_EMPLOYEES,
    SHARED_SECONDS,
    Rules,
    verdict_sql,
)

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
BURSTS = (
    "SELECT id FROM (SELECT id, max(n) OVER (PARTITION BY campaign_id, employee_id ORDER BY t"
    f" RANGE BETWEEN {BURST_SECONDS} PRECEDING AND CURRENT ROW) AS m FROM (SELECT id,"
    " campaign_id, employee_id, t, count(*) OVER (PARTITION BY campaign_id, employee_id"
    f" ORDER BY t RANGE BETWEEN CURRENT ROW AND {BURST_SECONDS} FOLLOWING) AS n"
    " FROM automation_events WHERE type = 'click') AS w) AS b"
    f" WHERE m >= {BURST_CLICKS}"
)
SHARED = (
    "SELECT DISTINCT c.id FROM (SELECT a.campaign_id, a.ip, a.t FROM automation_events AS a"
    " JOIN automation_events AS b ON b.type = 'click' AND b.campaign_id = a.campaign_id"
    f" AND b.ip = a.ip AND b.t BETWEEN a.t AND a.t + {SHARED_SECONDS}"
    " WHERE a.type = 'click' AND a.ip IS NOT NULL GROUP BY a.campaign_id, a.ip, a.t"
    f" HAVING count(DISTINCT b.employee_id) >= {SHARED_EMPLOYEES}) AS w"
    " JOIN automation_events AS c ON c.type = 'click' AND c.campaign_id = w.campaign_id"
    f" AND c.ip = w.ip AND c.t BETWEEN w.t AND w.t + {SHARED_SECONDS}"
)
_UPPER, _LOWER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"
_RULED = "ev.type <> 'report' AND ev.with_captcha = 0 AND "
FLAGS = {
    "fast_after_sent": _RULED + "$1 > 0 AND ev.sent IS NOT NULL AND ev.t - ev.sent < $1",
    "scanner_agent": _RULED + "ev.user_agent IS NOT NULL AND (trim(ev.user_agent) = ''"
    " OR EXISTS (SELECT 1 FROM unnest($2::text[]) AS p"
    f" WHERE strpos(translate(ev.user_agent, '{_UPPER}', '{_LOWER}'), p) > 0))",
    "scanner_network": _RULED + "ev.ip IN (SELECT ip FROM automation_addresses)",
    "burst": _RULED + "ev.id IN (SELECT id FROM automation_bursts)",
    "shared_address": _RULED + "ev.id IN (SELECT id FROM automation_shared)",
}
_VERDICT, _REASONS = verdict_sql({r: f"({c})" for r, c in FLAGS.items()})
NEW_VERDICTS = (
    "CREATE TEMP TABLE automation_new ON COMMIT DROP AS SELECT id, seq, old_verdict AS old,"
    " verdict, reasons FROM (SELECT ev.id, ev.seq, ev.verdict AS old_verdict,"
    f" ev.reasons AS old_reasons, {_VERDICT} AS verdict, {_REASONS} AS reasons"
    " FROM automation_events AS ev) AS x"
    " WHERE verdict IS DISTINCT FROM old_verdict OR reasons IS DISTINCT FROM old_reasons"
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
        for table in ("scope", "events", "addresses", "bursts", "shared", "new"):
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


async def _decide(
    conn: asyncpg.Connection, rules: Rules, written_after: int
) -> Counter[tuple[str, str]]:
    await conn.execute(_EVENTS)
    await conn.execute(_CLICKS)
    await conn.execute(
        "CREATE TEMP TABLE automation_addresses (ip TEXT PRIMARY KEY) ON COMMIT DROP"
    )
    if rules.networks:
        found = await conn.fetch("SELECT DISTINCT ip FROM automation_events WHERE ip IS NOT NULL")
        inside = rules.scanner_addresses(r["ip"] for r in found)
        await conn.executemany(
            "INSERT INTO automation_addresses VALUES ($1)", [(a,) for a in inside]
        )
    await conn.execute(f"CREATE TEMP TABLE automation_bursts ON COMMIT DROP AS {BURSTS}")
    await conn.execute(f"CREATE TEMP TABLE automation_shared ON COMMIT DROP AS {SHARED}")
    await conn.execute(NEW_VERDICTS, rules.fast_seconds, list(SCANNER_AGENTS))
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
