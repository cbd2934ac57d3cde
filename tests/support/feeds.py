"""Helpers for the event feed's tests (contract.md 13): a small two-company world, loads
written by the real loader, a plain-Python model of what the database holds, and a
collector that follows the feed's cursor as a SIEM would.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st

from app.config import Config
from app.main import create_app
from app.tools.loader import load_files
from app.tools.pg_loader import load_pg

from .clients import ProblemTestServer
from .factories import API, KEYS
from .stores import fresh_database, run_apart
from .verdicts import decide

FEED = f"{API}/events"
Event = dict[str, Any]  # an event as the fixture format writes it
Params = list[tuple[str, str]]

EMPLOYEES = [
    {"id": 10 + n, "company_id": company, "first_name": first, "last_name": last}
    | {"email": f"{first.lower()}.{n}@example.com", "department": dept, "country": "Spain"}
    for n, (company, first, last, dept) in enumerate(
        [
            (1, "Ana", "Núñez", "Finance"),
            (1, "=Bob", "Smith, Jr.", "-Sales"),
            (1, "Zoë", "Ångström", "R&D"),
            (2, "Kai", "Müller", "Ops"),
            (2, "Lea", "Berg", "Ops"),
        ]
    )
]
CAMPAIGNS = [
    {"id": 3, "company_id": 1, "title": "Invoice", "launch_date": "2026-03-01T08:00:00Z"},
    {"id": 1, "company_id": 1, "title": "@Parcel", "launch_date": "2026-03-02T08:00:00Z"},
    {"id": 2, "company_id": 2, "title": "Payroll", "launch_date": "2026-03-01T08:00:00Z"},
]
BASE = {
    "companies": [{"id": 1, "name": "Eins"}, {"id": 2, "name": "Zwei"}],
    "api_keys": [{"company_id": c, "label": "feed", "key": k} for c, k in KEYS.items()],
    "employees": EMPLOYEES,
    "campaigns": CAMPAIGNS,
}
COMPANY_OF_CAMPAIGN = {c["id"]: c["company_id"] for c in CAMPAIGNS}
STAFF = {c: [e["id"] for e in EMPLOYEES if e["company_id"] == c] for c in (1, 2)}


class World:
    """A database written only by the real loader, and the model of what it holds.

    A SQLite file in ``directory``, or the empty PostgreSQL database at ``database_url``
    (written by PostgreSQL's loader).
    """

    def __init__(self, directory: Path, database_url: str = "") -> None:
        self.directory = directory
        self.db = directory / "feed.sqlite3"
        self.database_url = database_url
        self.events: dict[int, Event] = {}
        self.versions: dict[int, int] = {}  # effective writes of each event so far
        self.history: dict[int, list[Event]] = {}
        self._files = itertools.count()
        self.write(BASE)

    def write(self, document: dict[str, Any]) -> None:
        """Load one fixture document with the real loader (the model is not touched)."""
        path = self.directory / f"load{next(self._files)}.json"
        path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
        if not self.database_url:
            load_files(self.db, [path])
            return
        run_apart(load_pg(self.database_url, [path]))  # synchronous, like SQLite's loader

    def settings(self) -> dict[str, Any]:
        """The app's configuration for this world's database.

        The tests read right after each load. On PostgreSQL an answer kept in memory is
        sent at the token the last notification brought, which a loaded machine may
        deliver after that first read (the docs promise 0.1 s), so these servers keep
        none: each answer is read from its own snapshot.
        """
        return {"db": str(self.db), "database_url": self.database_url, "answer_memory_mb": 0}

    def load(self, events: list[Event]) -> None:
        """One load of these events (new, changed or unchanged), then the model follows."""
        self.write({"campaign_events": events})
        self.record(events)

    def record(self, events: list[Event]) -> None:
        """Update the model after a committed load (an unchanged upsert changes nothing).

        Each event's ``automation`` is decided again over all of them, as the loader
        does: an event whose verdict a neighbour changed is changed too."""
        stored = {
            i: {k: v for k, v in e.items() if k != "automation"} for i, e in self.events.items()
        }
        now = stored | {e["id"]: dict(e) for e in events}
        automation = decide(now.values())
        for event_id, event in now.items():
            state = event | {"automation": automation[event_id]}
            if self.events.get(event_id) != state:
                self.events[event_id] = state
                self.versions[event_id] = self.versions.get(event_id, 0) + 1
                self.history.setdefault(event_id, []).append(dict(state))

    def expected(self, event: Event) -> dict[str, Any]:
        """The feed record of a modelled event: contract.md 13's fields and order."""
        campaign = next(c for c in CAMPAIGNS if c["id"] == event["campaign_id"])
        person = next(e for e in EMPLOYEES if e["id"] == event["employee_id"])
        return {
            "id": event["id"],
            "type": event["type"],
            "timestamp": event["timestamp"],
            "with_captcha": event["with_captcha"],
            "ip": event["ip"],
            "user_agent": event["user_agent"],
            "campaign": {k: campaign[k] for k in ("id", "title", "launch_date")},
            "victim": {k: person[k] for k in ("id", "first_name", "last_name", "email")}
            | {"department": person["department"]},
            "automation": event["automation"],
        }

    def visible(self, company: int, matches: Any = None) -> dict[int, dict[str, Any]]:
        """The company's events (that ``matches`` accepts) as the feed must give them now."""
        return {
            i: self.expected(e)
            for i, e in self.events.items()
            if COMPANY_OF_CAMPAIGN[e["campaign_id"]] == company and (matches is None or matches(e))
        }


def make_event(
    event_id: int,
    campaign: int,
    person: int,
    kind: str,
    minute: int,
    captcha: bool,
    ip: str | None = None,
    user_agent: str | None = None,
) -> Event:
    """An event in the fixture format (timestamps on 1 and 2 March 2026)."""
    day, minute = divmod(minute, 60 * 24)
    stamp = f"2026-03-0{1 + day % 2}T{minute // 60:02d}:{minute % 60:02d}:00Z"
    return {"id": event_id, "campaign_id": campaign, "employee_id": person, "type": kind} | {
        "timestamp": stamp,
        "with_captcha": captcha,
        "ip": ip,
        "user_agent": user_agent,
    }


@dataclass
class Collector:
    """A client that stores the feed's next cursor and asks again, as contract.md 13 says."""

    client: TestClient
    company: int = 1
    params: Params = field(default_factory=list)
    cursor: str | None = None
    received: list[dict[str, Any]] = field(default_factory=list)

    async def poll(self, limit: int) -> list[dict[str, Any]]:
        """One request after the stored cursor; keeps the answer's next cursor."""
        params = [*self.params, ("limit", str(limit))]
        params += [("cursor", self.cursor)] if self.cursor is not None else []
        response = await self.client.get(
            FEED, params=params, headers={"X-API-KEY": KEYS[self.company]}
        )
        assert response.status == 200, await response.text()
        body: list[dict[str, Any]] = await response.json()
        assert len(body) <= limit
        cursor = response.headers["X-Next-Cursor"]
        assert f"cursor={cursor}>" in response.headers["Link"]
        assert response.headers["Link"].endswith('; rel="next"')
        self.cursor = cursor
        self.received += body
        return body

    async def catch_up(self, limit: int) -> None:
        """Follow next until an answer comes back empty."""
        while await self.poll(limit):
            pass


NewWorld = Callable[[Path], AbstractContextManager[World]]


def world_maker(request: pytest.FixtureRequest, store_kind: str) -> NewWorld:
    """Worlds in the store under test: a new file, or a new empty PostgreSQL database."""
    pg_url = request.getfixturevalue("pg_url") if store_kind == "postgresql" else ""

    @contextlib.contextmanager
    def new(directory: Path) -> Iterator[World]:
        if not pg_url:
            yield World(directory)
            return
        databases = fresh_database(pg_url, template="template0")
        try:
            yield World(directory, next(databases))
        finally:
            databases.close()  # drops the database

    return new


# The feed's property tests' shared parts: what they draw, how they run, what they check.
TYPES = ("open", "click", "report", "fail")
MAX_EVENT_ID = 60  # ids are drawn from a small range: new ones often fall below read ones

SYNC = settings(
    max_examples=6,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
    database=None if os.environ.get("CI") else settings.default.database,
)

Matcher = Callable[[Event], bool]


def company_of_id(event_id: int) -> int:
    """An event never changes company (the loader refuses that): its id decides it."""
    return 1 if event_id % 3 else 2


@st.composite
def writes(draw: st.DrawFn, world_ids: st.SearchStrategy[int]) -> Event:
    """A new event, a changed one, or (same id, same content) an unchanged upsert."""
    event_id = draw(world_ids)
    company = company_of_id(event_id)
    campaign = draw(st.sampled_from([c["id"] for c in CAMPAIGNS if c["company_id"] == company]))
    return make_event(
        event_id,
        campaign,
        draw(st.sampled_from(STAFF[company])),
        draw(st.sampled_from(TYPES)),
        draw(st.integers(0, 2 * 24 * 60 - 1)),
        draw(st.booleans()),
        draw(st.sampled_from((None, "203.0.113.7", "2001:db8::5"))),
        draw(st.sampled_from((None, "Mozilla/5.0 (X11; Linux)", "=curl/8.5"))),
    )


def check_receipts(
    world: World, collector: Collector, versions: list[int], matches: Matcher
) -> None:
    """Every event matching at the end was received in its final state, no write twice."""
    last: dict[int, int] = {}
    for record, version in zip(collector.received, versions, strict=True):
        assert version > last.get(record["id"], 0), f"event {record['id']} received twice"
        last[record["id"]] = version
    final = world.visible(1, matches)
    got = {r["id"]: r for r in collector.received}
    missing = sorted(set(final) - set(got))
    assert not missing, f"events never received: {missing}"
    for event_id, record in final.items():
        assert last[event_id] == world.versions[event_id], f"event {event_id} not in latest state"
        assert got[event_id] == record


async def poll_checked(
    collector: Collector, world: World, matches: Matcher, versions: list[int], limit: int
) -> None:
    """One poll: each record is the state of this moment; its version is noted."""
    body = await collector.poll(limit)
    now = world.visible(1, matches)
    for record in body:
        assert now.get(record["id"]) == record, "not the state of this moment"
        versions.append(world.versions[record["id"]])


async def catch_up_checked(
    collector: Collector, world: World, matches: Matcher, versions: list[int]
) -> None:
    """Follow the feed to its end, then :func:`check_receipts`."""
    before = len(collector.received)
    await collector.catch_up(limit=7)
    now = world.visible(1, matches)
    for record in collector.received[before:]:
        assert now.get(record["id"]) == record
        versions.append(world.versions[record["id"]])
    note(f"received: {[r['id'] for r in collector.received]} {versions}")
    check_receipts(world, collector, versions, matches)


async def follow_plan(
    aiohttp_client: Any,
    world: World,
    params: Params,
    matches: Matcher,
    plan: list[tuple[str, Any]],
    load: Callable[[list[Event]], None],
    steps: Mapping[str, Callable[[Any], None]] | None = None,
) -> None:
    """Serve ``world`` and run ``plan`` while a collector follows the feed: each load
    through ``load`` (a "repeat" gives an earlier one again), each poll checked, the
    other kinds of step by ``steps``; then catch up and check what was received."""
    config = Config(**world.settings(), rate_burst=10**9, rate_per_second=1e9)
    client = await aiohttp_client(ProblemTestServer(create_app(config)))
    collector = Collector(client, params=params)
    versions: list[int] = []  # the version of each received record, when received
    loads: list[list[Event]] = []
    try:
        for kind, arg in plan:
            if kind == "load":
                load(arg)
                loads.append(arg)
            elif kind == "repeat" and loads:
                load(loads[arg % len(loads)])
            elif kind == "poll":
                await poll_checked(collector, world, matches, versions, arg)
            elif steps and kind in steps:
                steps[kind](arg)
        await catch_up_checked(collector, world, matches, versions)
    finally:
        await client.close()
