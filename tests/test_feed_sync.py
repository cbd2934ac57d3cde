"""The event feed's guarantee (contract.md 13), under loads between and during reads.

A collector that follows ``next`` from the start and keeps polling with its last cursor
while loads add or change events receives every event that exists at the end exactly
once in its latest state, plus, for an event changed after it was read, that event once
more after the change; nothing is ever skipped, whatever the ids of new rows (they may
be lower than ids already read); a load that writes nothing new does not move the feed.

Every write goes through the real loader into a real database (a SQLite file, or a
PostgreSQL database written by its own loader) and every read through the real app over
HTTP; a plain-Python model (feeds.World) says what the database holds after each load.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from .support.clients import MakeClient
from .support.feeds import (
    CAMPAIGNS,
    COMPANY_OF_CAMPAIGN,
    MAX_EVENT_ID,
    STAFF,
    SYNC,
    TYPES,
    Collector,
    Event,
    Matcher,
    NewWorld,
    World,
    company_of_id,
    follow_plan,
    make_event,
    world_maker,
    writes,
)
from .support.stores import on_both_stores

store_kind = on_both_stores()

START = dt.datetime(2026, 3, 1)

FILTERS: list[tuple[list[tuple[str, str]], Matcher]] = [
    ([], lambda e: True),
    ([("filter[type]", "Click,open")], lambda e: e["type"] in ("click", "open")),
    ([("filter[with_captcha]", "false")], lambda e: not e["with_captcha"]),
    (
        [("filter[from_date]", "2026-03-02"), ("filter[to_date]", "2026-03-02")],
        lambda e: e["timestamp"].startswith("2026-03-02"),
    ),
]


@pytest.fixture
def new_world(request: pytest.FixtureRequest, store_kind: str) -> NewWorld:
    """Worlds in the store under test: a new file, or a new empty PostgreSQL database."""
    return world_maker(request, store_kind)


Step = tuple[str, Any]
steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("load"),
            st.lists(writes(st.integers(1, MAX_EVENT_ID)), max_size=8, unique_by=lambda e: e["id"]),
        ),
        st.tuples(st.just("repeat"), st.integers(0, 10)),  # reload an earlier load as it was
        st.tuples(st.just("poll"), st.integers(1, 5)),
    ),
    min_size=1,
    max_size=14,
)


@SYNC
@given(plan=steps, choice=st.integers(0, len(FILTERS) - 1))
async def test_a_collector_ends_with_exactly_the_final_set(
    aiohttp_client: Any, new_world: NewWorld, plan: list[Step], choice: int
) -> None:
    """Random interleavings of loads and polls; loads commit between reads."""
    params, matches = FILTERS[choice]
    with tempfile.TemporaryDirectory() as tmp, new_world(Path(tmp)) as world:
        await follow_plan(aiohttp_client, world, params, matches, plan, world.load)


async def test_loads_committed_during_reads(
    tmp_path: Path, make_client: MakeClient, new_world: NewWorld
) -> None:
    """A loader thread commits while the collector reads; the guarantee still holds.

    Each change gives an event a timestamp it never had, so a received state tells which
    write it came from.
    """
    with new_world(tmp_path) as world:
        await collect_during_loads(world, make_client)


async def collect_during_loads(world: World, make_client: MakeClient) -> None:
    """Follow the feed while 25 loads commit; check the guarantee at the end."""
    rnd = random.Random(13)
    moments = (START + dt.timedelta(seconds=n) for n in itertools.count())

    def batch(size: int) -> list[Event]:
        events = []
        for event_id in rnd.sample(range(1, 2000), size):
            company = company_of_id(event_id)
            campaign = rnd.choice([c["id"] for c in CAMPAIGNS if c["company_id"] == company])
            person = rnd.choice(STAFF[company])
            kind = rnd.choice(TYPES)
            ip = rnd.choice((None, "198.51.100.9"))
            events.append(make_event(event_id, campaign, person, kind, 0, rnd.random() < 0.3, ip))
            events[-1]["timestamp"] = next(moments).strftime("%Y-%m-%dT%H:%M:%SZ")
        return events

    world.load(batch(300))
    client = await make_client(**world.settings())
    collector = Collector(client)
    done = asyncio.Event()

    async def loads() -> None:
        for _ in range(25):
            events = batch(40)  # new ids, lower and higher, and changes of known ones
            await asyncio.to_thread(world.write, {"campaign_events": events})
            world.record(events)
        done.set()

    async def reads() -> None:
        while not done.is_set():
            await collector.poll(limit=rnd.choice((3, 17, 50)))

    await asyncio.gather(loads(), reads())
    await collector.catch_up(limit=100)
    assert_same_guarantee(world, collector)


def assert_same_guarantee(world: World, collector: Collector) -> None:
    """Each receipt is a state the event had, later than the one received before it."""
    position: dict[int, int] = {}
    for record in collector.received:
        states = [world.expected(e) for e in world.history[record["id"]]]
        assert record in states, f"event {record['id']}: a state it never had"
        # A state may come back (a neighbour's click makes it a burst, a later load undoes
        # it): the receipt is the first such state after the one received before.
        before = position.get(record["id"], -1)
        later = [i for i, state in enumerate(states) if state == record and i > before]
        assert later, f"event {record['id']} received twice"
        index = later[0]
        position[record["id"]] = index
    final = world.visible(1)
    assert {r["id"] for r in collector.received} >= set(final), "events skipped"
    for event_id in final:
        assert position[event_id] == len(world.history[event_id]) - 1, f"{event_id} stale"
    for record in collector.received:
        assert COMPANY_OF_CAMPAIGN[record["campaign"]["id"]] == 1, "another company's event"


async def test_a_load_that_writes_nothing_new_does_not_move_the_feed(
    tmp_path: Path, make_client: MakeClient, new_world: NewWorld
) -> None:
    """The same file loaded again: same cursor at the end, same pages from the start."""
    with new_world(tmp_path) as world:
        await reload_changes_nothing(world, make_client)


async def reload_changes_nothing(world: World, make_client: MakeClient) -> None:
    events = [make_event(i, 3, 10, "click", i, False) for i in (5, 1, 9)]
    world.load(events)
    client = await make_client(**world.settings())
    first = Collector(client)
    await first.catch_up(limit=2)
    world.load(events)
    assert await first.poll(limit=2) == []
    again = Collector(client)
    await again.catch_up(limit=2)
    assert again.received == first.received
    assert again.cursor == first.cursor
