"""Automated clicks: each event's verdict and reasons, decided by the writers at load time.

The rules read only stored rows (the event, its target's ``sent_at``, its neighbours in
the campaign), so every writer and both stores give the same verdicts for the same data.
The settings are the writers' (environment), recorded per company in ``meta`` next to the
verdicts they made: a server only reads them. This module holds the rules' settings and
the SQLite statements; ``pg/automation.py`` holds PostgreSQL's twin.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .vocabulary import AUTOMATION_FILTERS

VERDICTS = ("human", "suspected", "automated")
# The reasons, in the fixed order a verdict lists them; the first three make it automated.
REASONS = ("fast_after_sent", "scanner_agent", "scanner_network", "burst", "shared_address")
BURST_CLICKS, BURST_SECONDS = 4, 3
SHARED_EMPLOYEES, SHARED_SECONDS = 3, 60
DEFAULT_FAST_SECONDS = 10
# Parts of a user agent (compared in ASCII lower case) that no person's mail client or
# browser sends: HTTP libraries and tools, self-declared robots, headless browsers, and
# Windows versions dead for over a decade (what link scanners still claim to be).
SCANNER_AGENTS = (
    "python-requests", "python-urllib", "python-httpx", "aiohttp", "curl/", "wget/",
    "libwww-perl", "go-http-client", "java/", "okhttp", "apache-httpclient", "axios/",
    "node-fetch", "powershell", "bot", "crawler", "spider", "headlesschrome", "phantomjs",
    "slimerjs", "windows nt 4.0", "windows nt 5.", "windows nt 6.0", "windows 98", "windows 95",
)  # fmt: skip
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
RULES_KEY = "automation_rules:"  # meta key prefix; the company id follows
FAST_ENV, NETWORKS_ENV = "REPORTING_BOT_FAST_SECONDS", "REPORTING_BOT_NETWORKS"


# The verdicts each value of filter[automation] leaves out of every answer.
EXCLUDED = dict(
    zip(AUTOMATION_FILTERS, ((), ("automated",), ("suspected", "automated")), strict=True)
)


def kept_events(automation: str) -> str:
    """The condition on events ``ev`` keeping those ``filter[automation]`` keeps ('': all).

    A server only reads the stored verdicts: the filter is one more condition on an
    event, as ``filter[with_captcha]=false`` is.
    """
    verdicts = ", ".join(f"'{v}'" for v in EXCLUDED[automation])
    return f"ev.verdict NOT IN ({verdicts})" if verdicts else ""


def and_kept(automation: str) -> str:
    """``kept_events`` as a further condition of a WHERE (' AND ...'; '' for all)."""
    kept = kept_events(automation)
    return f" AND {kept}" if kept else ""


class RulesError(ValueError):
    """A setting of the rules that cannot be used (one line, naming the variable)."""


@dataclass(frozen=True)
class Rules:
    """The settings the verdicts are made with."""

    fast_seconds: int = DEFAULT_FAST_SECONDS
    networks: tuple[str, ...] = ()

    def record(self) -> str:
        """The settings as stored beside the verdicts (canonical JSON: equal rules, equal text)."""
        return json.dumps(
            {"fast_seconds": self.fast_seconds, "networks": list(self.networks),
             "agents": list(SCANNER_AGENTS)},
            separators=(",", ":"),
        )  # fmt: skip

    @staticmethod
    def scanner_agents(agents: Iterable[str]) -> list[str]:
        """The user agents (as stored) that are blank or hold a scanner's part, compared
        with ASCII letters lowered (as written, other letters are not folded)."""
        return [
            text
            for text in agents
            if not text.strip(" ") or any(p in text.translate(_ASCII_LOWER) for p in SCANNER_AGENTS)
        ]

    def scanner_addresses(self, addresses: Iterable[str]) -> list[str]:
        """The addresses (as stored) inside one of the networks; text that is no IP address
        (a proxy's notation) is inside none."""
        nets = [ipaddress.ip_network(n) for n in self.networks]
        found = []
        for text in addresses:
            try:
                address = ipaddress.ip_address(text)
            except ValueError:
                continue
            mapped = getattr(address, "ipv4_mapped", None)
            if any(address in n or (mapped is not None and mapped in n) for n in nets):
                found.append(text)
        return found


def rules_from_env(environ: Mapping[str, str] | None = None) -> Rules:
    """The writers' settings: REPORTING_BOT_FAST_SECONDS (default 10, 0 turns the rule off)
    and REPORTING_BOT_NETWORKS (CIDRs separated by commas or blanks, none by default)."""
    env = os.environ if environ is None else environ
    fast_text = env.get(FAST_ENV, "").strip() or str(DEFAULT_FAST_SECONDS)
    if not (fast_text.isascii() and fast_text.isdigit()) or int(fast_text) > 86_400:
        raise RulesError(f"{FAST_ENV}: {fast_text!r} is not a number of seconds from 0 to 86400")
    networks = []
    for part in env.get(NETWORKS_ENV, "").replace(",", " ").split():
        try:
            networks.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError:
            raise RulesError(f"{NETWORKS_ENV}: {part!r} is not a network (CIDR)") from None
    return Rules(int(fast_text), tuple(sorted(set(networks))))


def _bit(condition: str, value: int) -> str:
    return f"CASE WHEN {condition} THEN {value} ELSE 0 END"


def mask_sql(fast: str) -> str:
    """Each reason's rule as one bit of an integer (bit n: ``REASONS[n]``), from a row
    ``ev`` of the scope's events and the small tables of matches; ``fast`` is the
    parameter holding the fast seconds. The same text on both stores."""
    rules = (
        f"{fast} > 0 AND ev.sent IS NOT NULL AND ev.t - ev.sent < {fast}",
        "ev.user_agent IN (SELECT agent FROM automation_agents)",
        "ev.ip IN (SELECT ip FROM automation_addresses)",
        "ev.id IN (SELECT id FROM automation_bursts)",
        "ev.id IN (SELECT id FROM automation_shared)",
    )
    bits = " + ".join(_bit(rule, 1 << n) for n, rule in enumerate(rules))
    return f"CASE WHEN ev.type <> 'report' AND ev.with_captcha = 0 THEN {bits} ELSE 0 END"


def _verdict_of_mask() -> tuple[str, str]:
    """The verdict and reasons (a JSON array, as text) of a row's ``mask``."""
    verdict = (
        "CASE WHEN (mask & 7) <> 0 THEN 'automated' WHEN mask <> 0 THEN 'suspected'"
        " ELSE 'human' END"
    )
    parts = " || ".join(
        f"CASE WHEN (mask & {1 << n}) <> 0 THEN '\"{r}\",' ELSE '' END"
        for n, r in enumerate(REASONS)
    )
    return verdict, f"'[' || rtrim({parts}, ',') || ']'"


_VERDICT, _REASONS = _verdict_of_mask()
# The events whose verdict or reasons differ from the stored ones (most have no reason
# and are human already: the first test drops them).
NEW_VERDICTS = (
    "SELECT id, seq, old, verdict, reasons FROM (SELECT id, seq, old, old_reasons,"
    f" {_VERDICT} AS verdict, {_REASONS} AS reasons FROM automation_flags"
    " WHERE mask <> 0 OR old <> 'human' OR old_reasons <> '[]') AS x"
    " WHERE verdict <> old OR reasons <> old_reasons"
)
# burst: a window of BURST_SECONDS starting at each click counts the employee's clicks;
# a click is in a burst when a window holding it counts BURST_CLICKS or more.
BURSTS = (
    "SELECT id FROM (SELECT id, max(n) OVER (PARTITION BY campaign_id, employee_id ORDER BY t"
    f" RANGE BETWEEN {BURST_SECONDS} PRECEDING AND CURRENT ROW) AS m FROM (SELECT id,"
    " campaign_id, employee_id, t, count(*) OVER (PARTITION BY campaign_id, employee_id"
    f" ORDER BY t RANGE BETWEEN CURRENT ROW AND {BURST_SECONDS} FOLLOWING) AS n"
    " FROM automation_events WHERE type = 'click') AS w) AS b"
    f" WHERE m >= {BURST_CLICKS}"
)
# shared_address: the same for one address's clicks, counting different employees.
SHARED = (
    "SELECT DISTINCT c.id FROM (SELECT a.campaign_id, a.ip, a.t FROM automation_events AS a"
    " JOIN automation_events AS b ON b.type = 'click' AND b.campaign_id = a.campaign_id"
    f" AND b.ip = a.ip AND b.t BETWEEN a.t AND a.t + {SHARED_SECONDS}"
    " WHERE a.type = 'click' AND a.ip IS NOT NULL GROUP BY a.campaign_id, a.ip, a.t"
    f" HAVING count(DISTINCT b.employee_id) >= {SHARED_EMPLOYEES}) AS w"
    " JOIN automation_events AS c ON c.type = 'click' AND c.campaign_id = w.campaign_id"
    f" AND c.ip = w.ip AND c.t BETWEEN w.t AND w.t + {SHARED_SECONDS}"
)
TABLES = ("scope", "events", "agents", "addresses", "bursts", "shared", "flags", "new")

# SQLite's statements: the scope's events with their times in seconds (and the target's
# sent_at), the clicks' index, each event's mask.
_EVENTS = (
    "CREATE TEMP TABLE automation_events AS SELECT e.id, e.campaign_id, e.employee_id, e.type,"
    " e.with_captcha, e.ip, e.user_agent, e.seq, e.verdict, e.reasons,"
    " unixepoch(e.timestamp) AS t, unixepoch(g.sent_at) AS sent"
    " FROM temp.automation_scope AS s CROSS JOIN main.campaign_events AS e"
    " LEFT JOIN main.campaign_targets AS g"
    " ON g.campaign_id = e.campaign_id AND g.employee_id = e.employee_id"
    " WHERE e.campaign_id = s.id"
)
_CLICKS = (
    "CREATE INDEX temp.automation_clicks ON automation_events (campaign_id, ip, t)"
    " WHERE type = 'click'"
)
_FLAGS = (
    "CREATE TEMP TABLE automation_flags AS SELECT ev.id, ev.seq, ev.verdict AS old,"
    f" ev.reasons AS old_reasons, {mask_sql(':fast')} AS mask FROM automation_events AS ev"
)


def classify(
    conn: sqlite3.Connection, rules: Rules, campaigns: str, written_after: int
) -> Counter[tuple[str, str]]:
    """Decide the verdicts of every event of the campaigns the query ``campaigns`` selects
    (ids), inside the caller's write transaction.

    A company whose recorded settings differ from ``rules`` is decided whole, and its
    settings recorded. Events of this write (``seq`` above ``written_after``) keep their
    place in the change sequence; any other event whose verdict changes takes the next
    one, in id order. Returns how many earlier events moved, per (old, new) verdict.
    """
    conn.execute("CREATE TEMP TABLE automation_scope (id INTEGER PRIMARY KEY)")
    try:
        conn.execute(f"INSERT OR IGNORE INTO temp.automation_scope {campaigns}")
        _widen_to_companies(conn, rules)
        return _decide(conn, rules, written_after)
    finally:
        for table in TABLES:
            conn.execute(f"DROP TABLE IF EXISTS temp.automation_{table}")


def _widen_to_companies(conn: sqlite3.Connection, rules: Rules) -> None:
    """Companies decided with other settings (or never) are decided whole, and recorded."""
    record = rules.record()
    companies = [c for (c,) in conn.execute(
        "SELECT DISTINCT c.company_id FROM temp.automation_scope AS s"
        " JOIN main.campaigns AS c ON c.id = s.id"
        " LEFT JOIN main.meta AS m ON m.key = ? || c.company_id"
        " WHERE m.value IS NOT ?", (RULES_KEY, record),
    )]  # fmt: skip
    for company in companies:
        conn.execute(
            "INSERT OR IGNORE INTO temp.automation_scope"
            " SELECT id FROM main.campaigns WHERE company_id = ?",
            (company,),
        )
        conn.execute(
            "INSERT INTO main.meta (key, value) VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (f"{RULES_KEY}{company}", record),
        )


def _decide(conn: sqlite3.Connection, rules: Rules, written_after: int) -> Counter[tuple[str, str]]:
    conn.execute(_EVENTS)
    conn.execute(_CLICKS)
    conn.execute("CREATE TEMP TABLE automation_agents (agent TEXT PRIMARY KEY)")
    found = conn.execute(
        "SELECT DISTINCT user_agent FROM automation_events WHERE user_agent IS NOT NULL"
    )
    scanners = rules.scanner_agents(a for (a,) in found)
    conn.executemany("INSERT INTO automation_agents VALUES (?)", ((a,) for a in scanners))
    conn.execute("CREATE TEMP TABLE automation_addresses (ip TEXT PRIMARY KEY)")
    if rules.networks:
        found = conn.execute("SELECT DISTINCT ip FROM automation_events WHERE ip IS NOT NULL")
        inside = rules.scanner_addresses(ip for (ip,) in found)
        conn.executemany("INSERT INTO automation_addresses VALUES (?)", ((a,) for a in inside))
    conn.execute(f"CREATE TEMP TABLE automation_bursts AS {BURSTS}")
    conn.execute(f"CREATE TEMP TABLE automation_shared AS {SHARED}")
    conn.execute(_FLAGS, {"fast": rules.fast_seconds})
    conn.execute(f"CREATE TEMP TABLE automation_new AS {NEW_VERDICTS}")
    moved: Counter[tuple[str, str]] = Counter()
    for old, new, n in conn.execute(
        "SELECT old, verdict, count(*) FROM automation_new WHERE seq <= ? GROUP BY 1, 2",
        (written_after,),
    ):
        moved[(old, new)] = n
    # Earlier events whose verdict changed take the next places, in id order.
    conn.execute(
        "UPDATE main.campaign_events SET verdict = n.verdict, reasons = n.reasons,"
        " seq = CASE WHEN n.seq > ? THEN n.seq ELSE (SELECT CAST(value AS INTEGER)"
        " FROM main.meta WHERE key = 'change_seq') + n.place END"
        " FROM (SELECT id, seq, verdict, reasons, row_number() OVER"
        " (PARTITION BY seq > ? ORDER BY id) AS place FROM automation_new) AS n"
        " WHERE n.id = campaign_events.id",
        (written_after, written_after),
    )
    if moved:
        conn.execute(
            "UPDATE main.meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'change_seq'",
            (sum(moved.values()),),
        )
    return moved
