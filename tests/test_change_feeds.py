"""The change feeds of inscriptions and employees: the event feed's guarantee over two
more tables, on both stores.

A load that changes an inscription or one of its section results moves that inscription
to the end; a changed employee (a renamed department) or a change of their teams (a
person moved into another team, a renamed team) moves the employee; an unchanged
re-load moves nothing. A collector that follows ``next`` and keeps polling while loads
commit receives every record exactly once in its latest state, and a record changed
after it was read once more. Writes go through the real loaders, reads through the app.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from app.config import Config
from app.main import create_app

from .support.clients import MakeClient, ProblemTestServer
from .support.factories import API, KEYS
from .support.feeds import EMPLOYEES, Collector, NewWorld, World, world_maker
from .support.feeds import SYNC as FEED_SYNC
from .support.stores import on_both_stores

store_kind = on_both_stores()


@pytest.fixture
def new_world(request: pytest.FixtureRequest, store_kind: str) -> NewWorld:
    return world_maker(request, store_kind)


INSCRIPTIONS = f"{API}/course-inscriptions/changes"
EMPLOYEE_FEED = f"{API}/victimsapi/changes"
TEAMS = [
    {"id": 1, "company_id": 1, "name": "Red"},
    {"id": 2, "company_id": 1, "name": "Blue"},
    {"id": 3, "company_id": 2, "name": "Green"},
]
COURSES = [{"id": 1, "company_id": 1, "title": "Basics"}, {"id": 2, "company_id": 2, "title": "X"}]
SECTIONS = [
    {"id": s, "course_id": c, "title": f"S{s}", "section_type": "quiz", "position": s}
    for s, c in ((1, 1), (2, 1), (3, 2))
]
STAFF_1 = [e["id"] for e in EMPLOYEES if e["company_id"] == 1]
# Inscription n: employee, course; company 2's last one.
ENROLLED = {n: (STAFF_1[n % len(STAFF_1)], 1) for n in range(1, 7)} | {7: (13, 2)}
SECTIONS_OF = {1: (1, 2), 2: (3,)}
DEPARTMENTS = ("Finance", "-Sales", "R&D", "Ops")
BASE = {
    "teams": TEAMS,
    "team_members": [{"employee_id": 10, "team_id": 1}, {"employee_id": 13, "team_id": 3}],
    "courses": COURSES,
    "course_sections": SECTIONS,
    "inscriptions": [
        {"id": n, "employee_id": e, "course_id": c, "start_date": "2026-01-05"}
        | {"due_date": None, "status": "not_started"}
        for n, (e, c) in ENROLLED.items()
    ],
}


RESULT_DATE = "2026-01-09"  # every section result's completion date


def result(inscription: int, section: int, value: float) -> dict[str, Any]:
    status = "APPROVED" if value >= 50 else "DISAPPROVED"
    return {"inscription_id": inscription, "section_id": section, "completed_at": RESULT_DATE} | {
        "result": value,
        "status": status,
    }


class People:
    """The model of what the loads changed: each record's own state and its version."""

    def __init__(self, world: World) -> None:
        self.world = world
        world.write(BASE)
        self.results: dict[int, dict[int, float]] = {n: {} for n in ENROLLED}
        self.status = dict.fromkeys(ENROLLED, "not_started")
        self.completed_at: dict[int, str | None] = dict.fromkeys(ENROLLED)
        self.departments = {e["id"]: e["department"] for e in EMPLOYEES}
        self.teams = {e["id"]: set() for e in EMPLOYEES} | {10: {"Red"}, 13: {"Green"}}
        self.versions = {"i": dict.fromkeys(ENROLLED, 1), "e": {e["id"]: 1 for e in EMPLOYEES}}

    def load(self, changes: list[tuple[Any, ...]]) -> None:
        """One load of these changes through the real loader; the model follows (a record
        moves when its state after the load differs from before)."""
        before = {(f, r): self.expected(f, r) for f in ("i", "e") for r in self.versions[f]}
        document: dict[str, dict[Any, dict[str, Any]]] = {}
        for kind, record, *rest in changes:
            if kind == "result":
                section, value = rest
                row = result(record, section, value)
                document.setdefault("section_results", {})[(record, section)] = row
                self.results[record][section] = value
            elif kind == "status":
                employee, course = ENROLLED[record]
                row = {"id": record, "employee_id": employee, "course_id": course}
                row |= {"start_date": "2026-01-05", "due_date": None, "status": rest[0]}
                document.setdefault("inscriptions", {})[record] = row
                self.status[record] = rest[0]
            elif kind == "department":
                person = next(e for e in EMPLOYEES if e["id"] == record)
                document.setdefault("employees", {})[record] = person | {"department": rest[0]}
                self.departments[record] = rest[0]
            else:  # "team": into another team of the company
                team = next(t for t in TEAMS if t["id"] == rest[0])
                row = {"employee_id": record, "team_id": team["id"]}
                document.setdefault("team_members", {})[(record, team["id"])] = row
                self.teams[record].add(team["name"])
        self.world.write({table: list(rows.values()) for table, rows in document.items()})
        # A load that gives an inscription derives its completion date from the results
        # stored then (its own included); one that gives only results leaves it.
        for record in document.get("inscriptions", {}):
            done = self.status[record] == "completed" and self.results[record]
            self.completed_at[record] = RESULT_DATE if done else None
        for (feed, record), state in before.items():
            if self.expected(feed, record) != state:
                self.versions[feed][record] += 1

    def owned(self, feed: str, record: dict[str, Any]) -> Any:
        """What the feed's own rows decide of a record (what moving it is about)."""
        if feed == "i":
            results = [s["result"] for s in record["events"]]
            return record["status"], results, record["completed_at"]
        return record["department"], sorted(g["name"] for g in record["groups"])

    def expected(self, feed: str, record_id: int) -> Any:
        if feed == "i":
            sections = SECTIONS_OF[ENROLLED[record_id][1]]
            results = [self.results[record_id].get(s) for s in sections]
            return self.status[record_id], results, self.completed_at[record_id]
        return self.departments[record_id], sorted(self.teams[record_id])

    def company_1(self, feed: str) -> set[int]:
        if feed == "i":
            return {n for n, (_, course) in ENROLLED.items() if course == 1}
        return set(STAFF_1)


def change(draw: st.DrawFn) -> tuple[Any, ...]:
    kind = draw(st.sampled_from(("result", "status", "department", "team")))
    if kind in ("result", "status"):
        inscription = draw(st.sampled_from(sorted(ENROLLED)))
        if kind == "status":
            return kind, inscription, draw(st.sampled_from(("in_progress", "completed")))
        section = draw(st.sampled_from(SECTIONS_OF[ENROLLED[inscription][1]]))
        return kind, inscription, section, draw(st.sampled_from((0.0, 50.0, 87.5)))
    person = draw(st.sampled_from([e["id"] for e in EMPLOYEES]))
    if kind == "department":
        return kind, person, draw(st.sampled_from(DEPARTMENTS))
    company = next(e["company_id"] for e in EMPLOYEES if e["id"] == person)
    return (
        kind,
        person,
        draw(st.sampled_from([t["id"] for t in TEAMS if t["company_id"] == company])),
    )


changes = st.composite(change)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("load"), st.lists(changes(), min_size=1, max_size=5)),
        st.tuples(st.just("repeat"), st.integers(0, 10)),  # an earlier load again, unchanged
        st.tuples(st.just("poll"), st.integers(1, 4)),
    ),
    min_size=1,
    max_size=12,
)
SYNC = settings(FEED_SYNC, max_examples=5)
FEEDS = {"i": INSCRIPTIONS, "e": EMPLOYEE_FEED}


class FeedCollector(Collector):
    """The event feed's collector, on a change feed."""

    def __init__(self, client: Any, path: str, filters: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(client)
        self.path = path
        self.filters = filters

    async def poll(self, limit: int) -> list[dict[str, Any]]:
        params = [*self.filters, ("limit", str(limit))]
        params += [("cursor", self.cursor)] if self.cursor else []
        response = await self.client.get(
            self.path, params=params, headers={"X-API-KEY": KEYS[self.company]}
        )
        assert response.status == 200, await response.text()
        body: list[dict[str, Any]] = await response.json()
        self.cursor = response.headers["X-Next-Cursor"]
        assert response.headers["Link"].endswith('; rel="next"')
        self.received += body
        return body


async def test_an_employee_who_comes_to_match_brings_no_inscription_read_past(
    tmp_path: Path, make_client: MakeClient, new_world: NewWorld
) -> None:
    """A person filter on the inscriptions' feed (documented): a change to an employee
    moves none of their inscriptions, so a collector that read past them does not get
    them when the employee comes to match; the employees' feed brings the employee."""
    ops = (("filter[department]", "ops"),)

    def inscriptions_of(*employees: int) -> list[int]:
        return sorted(n for n, (e, _) in ENROLLED.items() if e in employees)

    with new_world(tmp_path) as world:
        people = People(world)
        client = await make_client(**world.settings())
        feeds = [FeedCollector(client, path, ops) for path in (INSCRIPTIONS, EMPLOYEE_FEED)]
        for employee in (12, 11):
            people.load([("department", employee, "Ops")])
            for feed in feeds:
                await feed.catch_up(limit=3)
        inscriptions, employees = ([r["id"] for r in f.received] for f in feeds)
        assert inscriptions == inscriptions_of(12) and employees == [12, 11]
        anew = FeedCollector(client, INSCRIPTIONS, ops)
        await anew.catch_up(limit=3)
        assert sorted(r["id"] for r in anew.received) == inscriptions_of(11, 12)


@SYNC
@given(plan=steps)
async def test_each_change_feed_gives_every_record_once_in_its_latest_state(
    aiohttp_client: Any, new_world: NewWorld, plan: list[tuple[str, Any]]
) -> None:
    """Random loads (section results, statuses, departments, team moves) between polls."""
    note(f"plan: {plan}")  # what a failure report shows of the example
    with tempfile.TemporaryDirectory() as tmp, new_world(Path(tmp)) as world:
        people = People(world)
        config = Config(**world.settings(), rate_burst=10**9, rate_per_second=1e9)
        client = await aiohttp_client(ProblemTestServer(create_app(config)))
        collectors = {feed: FeedCollector(client, path) for feed, path in FEEDS.items()}
        versions: dict[str, list[int]] = {feed: [] for feed in FEEDS}
        loads: list[list[tuple[Any, ...]]] = []
        try:
            for kind, arg in plan:
                if kind == "load":
                    people.load(arg)
                    loads.append(arg)
                elif kind == "repeat" and loads:
                    people.load(loads[arg % len(loads)])
                elif kind == "poll":
                    for feed, collector in collectors.items():
                        for record in await collector.poll(arg):
                            assert people.owned(feed, record) == people.expected(feed, record["id"])
                            versions[feed].append(people.versions[feed][record["id"]])
            for feed, collector in collectors.items():
                before = len(collector.received)
                await collector.catch_up(limit=3)
                for record in collector.received[before:]:
                    versions[feed].append(people.versions[feed][record["id"]])
                note(f"{feed}: received {[r['id'] for r in collector.received]} {versions[feed]}")
                check_receipts(people, feed, collector.received, versions[feed])
        finally:
            await client.close()


def check_receipts(
    people: People, feed: str, received: list[dict[str, Any]], versions: list[int]
) -> None:
    """Each change received once; every record received, the last time in its latest state."""
    last: dict[int, int] = {}
    for record, version in zip(received, versions, strict=True):
        assert version > last.get(record["id"], 0), f"{feed} {record['id']} received twice"
        last[record["id"]] = version
    assert set(last) == people.company_1(feed), "records missing, or another company's"
    for record_id, version in last.items():
        assert version == people.versions[feed][record_id], f"{feed} {record_id} not latest"


async def walk(client: Any, path: str, query: str = "", company: int = 1) -> list[Any]:
    collector = FeedCollector(client, path + (f"?{query}" if query else ""))
    collector.company = company
    await collector.catch_up(limit=2)
    return collector.received


Ids = Callable[[list[Any]], list[int]]
ids: Ids = lambda records: [r["id"] for r in records]  # noqa: E731


async def test_what_moves_and_what_does_not(
    tmp_path: Path, make_client: MakeClient, new_world: NewWorld
) -> None:
    """Each kind of change moves its record (and only it) to the end; re-loads move none."""
    with new_world(tmp_path) as world:
        people = People(world)
        client = await make_client(**world.settings())
        assert ids(await walk(client, INSCRIPTIONS)) == [1, 2, 3, 4, 5, 6]
        # The base's team members moved 10 and 13 after the others.
        assert ids(await walk(client, EMPLOYEE_FEED)) == [11, 12, 10]
        assert ids(await walk(client, EMPLOYEE_FEED, company=2)) == [14, 13]
        people.load([("result", 2, 1, 87.5)])
        assert ids(await walk(client, INSCRIPTIONS)) == [1, 3, 4, 5, 6, 2]
        people.load([("result", 2, 1, 87.5), ("status", 4, "not_started")])  # the same again
        assert ids(await walk(client, INSCRIPTIONS)) == [1, 3, 4, 5, 6, 2]
        people.load([("result", 2, 1, 0.0), ("status", 1, "in_progress")])
        assert ids(await walk(client, INSCRIPTIONS)) == [3, 4, 5, 6, 1, 2]
        people.load([("department", 11, "Ops")])
        assert ids(await walk(client, EMPLOYEE_FEED)) == [12, 10, 11]
        # A department renamed moves the employee, not their inscriptions.
        assert ids(await walk(client, INSCRIPTIONS)) == [3, 4, 5, 6, 1, 2]
        people.load([("team", 10, 2)])  # into Blue as well
        assert ids(await walk(client, EMPLOYEE_FEED)) == [12, 11, 10]
        assert (await walk(client, EMPLOYEE_FEED))[-1]["groups"] == [
            {"name": "Blue"},
            {"name": "Red"},
        ]
        people.load([("team", 12, 1)])
        assert ids(await walk(client, EMPLOYEE_FEED)) == [11, 10, 12]
        world.write({"teams": [TEAMS[1] | {"name": "Navy"}]})  # Blue renamed: its member
        assert ids(await walk(client, EMPLOYEE_FEED)) == [11, 12, 10]
        world.write(
            {"teams": [TEAMS[1] | {"name": "Navy"}], "employees": [EMPLOYEES[0], EMPLOYEES[2]]}
        )
        assert ids(await walk(client, EMPLOYEE_FEED)) == [11, 12, 10]  # nothing changed
        # A completion date the load gives moves its inscription, alone too; again, nothing.
        done = {n: BASE["inscriptions"][n - 1] | {"status": "completed"} for n in (3, 4)}
        for n, day in ((3, "2026-01-20"), (4, "2026-01-20"), (3, "2026-01-21"), (3, "2026-01-21")):
            done[n]["completed_at"] = day
            world.write({"inscriptions": list(done.values())})
        feed = await walk(client, INSCRIPTIONS)
        assert ids(feed) == [5, 6, 1, 2, 4, 3]
        assert feed[-1]["completed_at"] == "2026-01-21"


async def test_records_filters_and_formats(
    tmp_path: Path, make_client: MakeClient, new_world: NewWorld
) -> None:
    """The records the feeds give, the person filters and the CSV and NDJSON answers."""
    with new_world(tmp_path) as world:
        people = People(world)
        people.load([("result", 3, 1, 50.0), ("result", 3, 2, 87.5), ("status", 3, "completed")])
        client = await make_client(**world.settings())
        last = (await walk(client, INSCRIPTIONS))[-1]
        assert list(last)[-4:] == ["id", "employee_id", "course_id", "completed_at"]
        assert (last["id"], last["employee_id"], last["course_id"]) == (3, 10, 1)
        assert last["completed_at"] == "2026-01-09" and last["status"] == "completed"
        assert {r["completed_at"] for r in (await walk(client, INSCRIPTIONS))[:-1]} == {None}
        person = (await walk(client, EMPLOYEE_FEED))[0]
        assert list(person) == [
            "id", "first_name", "last_name", "email", "department", "country", "groups",
        ]  # fmt: skip
        query = "filter[department]=FINANCE,r%26d"  # 10 moved after 12 (a team)
        assert ids(await walk(client, EMPLOYEE_FEED, query)) == [12, 10]
        assert ids(await walk(client, INSCRIPTIONS, "filter[teams]=red")) == [6, 3]
        headers = {"X-API-KEY": KEYS[1]}
        csv = await client.get(f"{EMPLOYEE_FEED}?format=csv&limit=1", headers=headers)
        assert csv.status == 200 and csv.content_type == "text/csv"
        assert (await csv.text()).splitlines()[0].startswith("id,first_name,last_name")
        assert "X-Next-Cursor" in csv.headers
        nd = await client.get(f"{INSCRIPTIONS}?format=ndjson", headers=headers)
        assert len((await nd.text()).splitlines()) == 6


@pytest.mark.parametrize("path", [INSCRIPTIONS, EMPLOYEE_FEED])
async def test_a_cursor_is_bound_to_its_feed_company_and_filters(client: Any, path: str) -> None:
    headers = {"X-API-KEY": KEYS[1]}
    first = await client.get(f"{path}?limit=1&filter[country]=spain", headers=headers)
    cursor = first.headers["X-Next-Cursor"]
    events = await client.get(f"{API}/events?limit=1", headers=headers)
    other = INSCRIPTIONS if path == EMPLOYEE_FEED else EMPLOYEE_FEED
    refused = [
        (path, f"cursor={cursor}", KEYS[2]),  # another company
        (path, f"cursor={cursor}", KEYS[1]),  # without the filter
        (path, f"cursor={cursor}&filter[country]=france", KEYS[1]),
        (other, f"cursor={cursor}&filter[country]=spain", KEYS[1]),  # the other feed
        (path, f"cursor={events.headers['X-Next-Cursor']}", KEYS[1]),  # the event feed's
        (path, "page=2", KEYS[1]),
    ]
    # A value holding a separator is one value: it never reads as several, nor as
    # another filter (each pair gives the first's cursor to the second's filters).
    for first_filters, other_filters in (
        ("filter[country]=spain,france", 'filter[country]="spain,france"'),
        ('filter[country]="spain,france"', "filter[country]=spain,france"),
        ("filter[country]=spain&filter[department]=it", 'filter[country]="spain;department=it"'),
    ):
        made = await client.get(f"{path}?limit=1&{first_filters}", headers=headers)
        assert made.status == 200, first_filters
        refused.append((path, f"cursor={made.headers['X-Next-Cursor']}&{other_filters}", KEYS[1]))
    for target, query, key in refused:
        response = await client.get(f"{target}?{query}", headers={"X-API-KEY": key})
        assert response.status == 400, (target, query)
        assert response.content_type == "application/problem+json"
    again = await client.get(
        f"{path}?limit=1&filter[country]=Spain&cursor={cursor}", headers=headers
    )
    assert again.status == 200  # the same filters in another letter case
