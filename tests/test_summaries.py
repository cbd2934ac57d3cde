"""The summaries the writers keep for the reports (docs/data.md, Summaries), on both stores.

After every write (random batches through the real loader: new events, events moved to
another person or campaign, targets with their sent_at, people changing department; then
a reclassification with other settings) every row of every summary equals what a
recomputation from the raw rows says, and no other row is there. The upgrade from
version 7 fills them for the stored data.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.data.automation import Rules
from app.data.pg.schema import ensure_schema
from app.data.schema import SCHEMA_VERSION, upgrade_if_older
from app.data.summaries import filter_key
from app.tools.reclassify import reclassify, reclassify_pg

from .support.factories import PG_UNDO_VERSION_11, UNDO_VERSION_11, query
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()

TYPES = ("open", "click", "report", "fail")
COUNTS = ("opened", "clicked", "reported", "failed")
AUTOMATION = {"include": (), "exclude_automated": ("automated",)}
AUTOMATION["exclude_suspected"] = ("automated", "suspected")
FILTERS = {
    filter_key(without, automation): (without, dropped)
    for without in (False, True)
    for automation, dropped in AUTOMATION.items()
}
COMPANY = 900
DEPARTMENTS = ("Sales", "R&D", "Ärzte", "")
AGENTS = (None, "Mozilla/5.0 (Windows NT 10.0)", "curl/8.0")
ADDRESSES = (None, "203.0.113.7", "203.0.113.8", "198.51.100.1")
RAW = {
    "events": "SELECT id, campaign_id, employee_id, type, timestamp, with_captcha, verdict"
    " FROM campaign_events",
    "targets": "SELECT campaign_id, employee_id FROM campaign_targets",
    "departments": "SELECT id, department FROM employees",
    "companies": "SELECT id, company_id FROM employees",
}


def instant(second: int) -> str:
    return f"2026-05-01T09:{second // 60:02d}:{second % 60:02d}Z"


class Batches:
    """Random loads into one company: each knows the people and campaigns made so far."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.people: list[int] = []
        self.campaigns: list[int] = []
        self.events: list[dict[str, Any]] = []
        self.next_id = 10**7

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def event(self, event_id: int) -> dict[str, Any]:
        rnd = self.rnd
        return {
            "id": event_id,
            "campaign_id": rnd.choice(self.campaigns),
            "employee_id": rnd.choice(self.people),
            "type": rnd.choice(TYPES),
            "timestamp": instant(rnd.randrange(0, 600)),
            "with_captcha": rnd.random() < 0.2,
            "ip": rnd.choice(ADDRESSES),
            "user_agent": rnd.choice(AGENTS),
        }

    def next(self) -> dict[str, Any]:
        """A fixture: new people and campaigns, new events, changed and moved ones,
        targets (some sent seconds before their events), departments changed."""
        rnd = self.rnd
        first = not self.people
        people = [self.new_id() for _ in range(rnd.randrange(3 if first else 0, 8))]
        campaigns = [self.new_id() for _ in range(rnd.randrange(2 if first else 0, 3))]
        self.people += people
        self.campaigns += campaigns
        changed = rnd.sample(self.events, min(len(self.events), rnd.randrange(0, 6)))
        events = [self.event(e["id"]) for e in changed]
        events += [self.event(self.new_id()) for _ in range(rnd.randrange(5, 40))]
        self.events = [e for e in self.events if e not in changed] + events
        earlier = self.people[: len(self.people) - len(people)]
        moved = rnd.sample(earlier, min(len(earlier), rnd.randrange(0, 4)))
        targets = [
            {"campaign_id": rnd.choice(self.campaigns), "employee_id": rnd.choice(self.people),
             "sent_at": rnd.choice((None, instant(rnd.randrange(0, 600))))}
            for _ in range(rnd.randrange(0, 10))
        ]  # fmt: skip
        unique = {(t["campaign_id"], t["employee_id"]): t for t in targets}
        return {
            "companies": [{"id": COMPANY, "name": "Summaries"}] if first else [],
            "employees": [
                {
                    "id": i,
                    "company_id": COMPANY,
                    "first_name": "P",
                    "last_name": str(i),
                    "email": f"p{i}@example.com",
                    "department": rnd.choice(DEPARTMENTS),
                    "country": "Spain",
                }
                for i in [*people, *moved]
            ],
            "campaigns": [
                {
                    "id": i,
                    "company_id": COMPANY,
                    "title": f"C {i}",
                    "launch_date": instant(rnd.randrange(0, 120)),
                }
                for i in campaigns
            ],
            "campaign_targets": list(unique.values()),
            "campaign_events": events,
        }


async def read(store: Store, sql: str) -> set[tuple[Any, ...]]:
    """Every row of ``sql`` on the store, as a set."""
    if not store.url:
        return set(query(store.sqlite_path, sql))
    conn = await asyncpg.connect(store.url)
    try:
        return {tuple(row) for row in await conn.fetch(sql)}
    finally:
        await conn.close()


def send_rows(raw: dict[str, set[tuple[Any, ...]]]) -> dict[tuple[int, int], dict[str, Any]]:
    """Each send's figures, recomputed from the events, targets and people."""
    department = dict(raw["departments"])
    events = defaultdict(list)
    for _, campaign, person, kind, at, captcha, verdict in raw["events"]:
        events[campaign, person].append((kind, at, captcha, verdict))
    sends = {}
    for campaign, person in raw["targets"]:
        mine = events[campaign, person]
        row: dict[str, Any] = {"department": department[person]}
        for key, (without, dropped) in FILTERS.items():
            for kind in TYPES:
                found = [
                    at for k, at, captcha, verdict in mine
                    if k == kind and not (without and captcha) and verdict not in dropped
                ]  # fmt: skip
                row[f"{kind}_{key}"] = min(found, default=None)
        for automation, dropped in AUTOMATION.items():
            kept = [at for _, at, _, verdict in mine if verdict not in dropped]
            row[f"last_{automation}"] = max(kept, default=None)
        for verdict in ("automated", "suspected"):
            row[f"{verdict}_events"] = sum(1 for *_, v in mine if v == verdict)
        sends[campaign, person] = row
    return sends


def expected(raw: dict[str, set[tuple[Any, ...]]]) -> dict[str, set[tuple[Any, ...]]]:
    """Every summary's rows, recomputed from the raw rows."""
    sends = send_rows(raw)
    funnels: dict[tuple[Any, ...], Counter[str]] = defaultdict(Counter)
    instants: Counter[tuple[Any, ...]] = Counter()
    people: dict[tuple[Any, ...], dict[str, Any]] = {}
    for (campaign, person), row in sends.items():
        for key in FILTERS:
            sums = funnels[campaign, key, row["department"]]
            sums["targets"] += 1
            for kind, name in zip(TYPES, COUNTS, strict=True):
                sums[name] += row[f"{kind}_{key}"] is not None
            for verdict in ("automated", "suspected"):
                sums[f"{verdict}_events"] += row[f"{verdict}_events"]
            for kind in ("click", "report"):
                if row[f"{kind}_{key}"] is not None:
                    instants[campaign, key, kind, row[f"{kind}_{key}"]] += 1
        for automation in AUTOMATION:
            block = people.setdefault(
                (person, automation), {"campaigns": 0, **dict.fromkeys(COUNTS, 0), "last": None}
            )
            block["campaigns"] += 1
            for kind, name in zip(TYPES, COUNTS, strict=True):
                block[name] += row[f"{kind}_{automation}"] is not None
            last = row[f"last_{automation}"]
            if last is not None and (block["last"] is None or last > block["last"]):
                block["last"] = last
    hours: Counter[tuple[Any, ...]] = Counter()
    histograms: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    for (campaign, key, kind, at), n in instants.items():
        hours[campaign, key, kind, at[:13]] += n
        histograms[campaign, key, kind] += [at] * n
    columns = list(next(iter(sends.values())))  # the sample's sends come first
    funnel_names = ("targets", *COUNTS, "automated_events", "suspected_events")
    return {
        f"SELECT campaign_id, employee_id, {', '.join(columns)} FROM send_firsts": {
            (c, e, *row.values()) for (c, e), row in sends.items()
        },
        f"SELECT campaign_id, filters, department, {', '.join(funnel_names)}"
        " FROM campaign_funnels": {
            (*key, *(sums[name] for name in funnel_names)) for key, sums in funnels.items()
        },
        "SELECT campaign_id, filters, kind, instant, people FROM campaign_first_instants": {
            (*key, n) for key, n in instants.items()
        },
        "SELECT campaign_id, filters, kind, hour, people FROM campaign_first_hours": {
            (*key, n) for key, n in hours.items()
        },
        # The lower middle of each histogram's first instants: the ((n + 1) // 2)-th.
        "SELECT campaign_id, filters, kind, instant FROM campaign_medians": {
            (*key, sorted(every)[(len(every) + 1) // 2 - 1]) for key, every in histograms.items()
        },
        "SELECT employee_id, automation, campaigns, opened, clicked, reported, failed,"
        " last_event_at FROM employee_phishing": {
            (*key, *block.values()) for key, block in people.items()
        },
        "SELECT company_id, automation, clicked, failed, people FROM directory_totals": {
            (*key, n) for key, n in directory_totals(raw, people).items()
        },
        "SELECT campaign_id, employee_id FROM stale_sends": set(),
    }


def directory_totals(
    raw: dict[str, set[tuple[Any, ...]]], people: dict[tuple[Any, ...], dict[str, Any]]
) -> Counter[tuple[Any, ...]]:
    """How many people of each company have each (clicked, failed) block."""
    company = dict(raw["companies"])
    totals: Counter[tuple[Any, ...]] = Counter()
    for (person, automation), block in people.items():
        totals[company[person], automation, block["clicked"], block["failed"]] += 1
    return totals


async def assert_summaries_hold(store: Store) -> None:
    raw = {name: await read(store, sql) for name, sql in RAW.items()}
    for sql, rows in expected(raw).items():
        found = await read(store, sql)
        assert found == rows, (sql, sorted(found - rows, key=str), sorted(rows - found, key=str))


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_summary_equals_its_recomputation_after_each_write(
    store: Store, tmp_path: Path, seed: int
) -> None:
    await assert_summaries_hold(store)  # the sample, as loaded
    batches = Batches(seed)
    for n in range(5):
        fixture = tmp_path / f"batch{n}.json"
        fixture.write_text(json.dumps(batches.next(), ensure_ascii=False), encoding="utf-8")
        await store.load([fixture])
        await assert_summaries_hold(store)
    quick = Rules(fast_seconds=0)  # other settings: verdicts move, the summaries follow
    if store.url:
        moved = await reclassify_pg(store.url, None, quick)
    else:
        moved = await asyncio.to_thread(reclassify, str(store.sqlite_path), None, quick)
    assert moved
    await assert_summaries_hold(store)


# What versions 8 and 9 added: the summaries' tables (and triggers); the medians' and
# the directory totals' tables.
SINCE = {
    7: [
        f"DROP TABLE {table}"
        for table in (
            "send_firsts", "campaign_funnels", "campaign_first_instants", "campaign_first_hours",
            "campaign_medians", "employee_phishing", "directory_totals", "stale_sends",
        )
    ],
    8: ["DROP TABLE campaign_medians", "DROP TABLE directory_totals"],
}  # fmt: skip
UNDO = {7: ([], []), 8: (UNDO_VERSION_11, PG_UNDO_VERSION_11)}  # what 8 to 10 kept


@pytest.mark.parametrize("version", list(SINCE))
async def test_the_upgrade_fills_the_summaries(store: Store, version: int) -> None:
    if store.url:
        conn = await asyncpg.connect(store.url)
        try:
            for statement in SINCE[version]:
                await conn.execute(f"{statement} CASCADE")
            for statement in UNDO[version][1]:
                await conn.execute(statement)
            await conn.execute(
                "UPDATE meta SET value = $1 WHERE key = 'schema_version'", str(version)
            )
            assert await ensure_schema(conn)
            stored = await conn.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
            assert stored == str(SCHEMA_VERSION)
        finally:
            await conn.close()
    else:
        conn = sqlite3.connect(store.sqlite_path, isolation_level=None)
        for statement in [*SINCE[version], *UNDO[version][0]]:
            conn.execute(statement)
        triggers = (
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%stale_sends'"
        )
        for (trigger,) in conn.execute(triggers).fetchall() if version == 7 else []:
            conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()
        assert upgrade_if_older(store.sqlite_path)
        assert query(store.sqlite_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert await read(store, "SELECT count(*) FROM employee_phishing") != {(0,)}
    await assert_summaries_hold(store)
