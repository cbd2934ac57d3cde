"""The event feed's guarantee (contract.md 13) when verdicts move: loads and
``reporting-reclassify`` runs, with the writers' settings changed between them,
interleaved with reads, on both stores.

An event whose verdict or reasons change comes again after the change, whether a load or
the reclassification changed it; nothing is skipped. The model decides each company's
events with the settings that company was last decided with: a load decides the
companies it gives events of, a reclassification the companies it is asked for.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from app.data.automation import NETWORKS_ENV, rules_from_env
from app.tools.reclassify import reclassify, reclassify_pg

from .support.feeds import (
    COMPANY_OF_CAMPAIGN,
    MAX_EVENT_ID,
    SYNC,
    Event,
    Matcher,
    NewWorld,
    World,
    follow_plan,
    world_maker,
    writes,
)
from .support.stores import on_both_stores, run_apart
from .support.verdicts import decide

store_kind = on_both_stores()

# REPORTING_BOT_NETWORKS values: the worlds' events come from 203.0.113.7 and 2001:db8::5.
NETWORKS = ("", "203.0.113.0/24", "2001:db8::/32")
FILTERS: list[tuple[list[tuple[str, str]], Matcher]] = [
    ([], lambda e: True),
    (
        [("filter[automation]", "exclude_automated")],
        lambda e: e["automation"]["verdict"] != "automated",
    ),
]


@pytest.fixture
def new_world(request: pytest.FixtureRequest, store_kind: str) -> NewWorld:
    return world_maker(request, store_kind)


@pytest.fixture
def networks_env() -> Iterator[None]:
    """The test sets REPORTING_BOT_NETWORKS as an operator would; it is put back after."""
    saved = os.environ.pop(NETWORKS_ENV, None)
    yield
    os.environ.pop(NETWORKS_ENV, None)
    if saved is not None:
        os.environ[NETWORKS_ENV] = saved


class Settled:
    """The world's model with each company's recorded settings (the networks)."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.networks = {1: "", 2: ""}

    def decided(self, companies: set[int], loaded: list[Event]) -> None:
        """The companies decided with the current settings; every changed event moves."""
        for company in companies:
            self.networks[company] = os.environ.get(NETWORKS_ENV, "")
        world = self.world
        plain = {
            i: {k: v for k, v in e.items() if k != "automation"} for i, e in world.events.items()
        }
        plain |= {e["id"]: dict(e) for e in loaded}
        verdicts = {
            n: decide(plain.values(), networks=tuple(n.split()))
            for n in set(self.networks.values())
        }
        for event_id, event in plain.items():
            company = COMPANY_OF_CAMPAIGN[event["campaign_id"]]
            state = event | {"automation": verdicts[self.networks[company]][event_id]}
            if world.events.get(event_id) != state:
                world.events[event_id] = state
                world.versions[event_id] = world.versions.get(event_id, 0) + 1
                world.history.setdefault(event_id, []).append(dict(state))

    def load(self, events: list[Event]) -> None:
        self.world.write({"campaign_events": events})
        self.decided({COMPANY_OF_CAMPAIGN[e["campaign_id"]] for e in events}, events)

    def reclassify(self, company: int | None) -> None:
        if self.world.database_url:
            run_apart(reclassify_pg(self.world.database_url, company, rules_from_env()))
        else:
            reclassify(str(self.world.db), company, rules_from_env())
        self.decided({1, 2} if company is None else {company}, [])


steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("load"),
            st.lists(writes(st.integers(1, MAX_EVENT_ID)), max_size=8, unique_by=lambda e: e["id"]),
        ),
        st.tuples(st.just("repeat"), st.integers(0, 10)),  # an earlier load again, as it was
        st.tuples(st.just("settings"), st.sampled_from(NETWORKS)),
        st.tuples(st.just("reclassify"), st.sampled_from((None, 1, 2))),
        st.tuples(st.just("poll"), st.integers(1, 5)),
    ),
    min_size=1,
    max_size=16,
)


@SYNC
@given(plan=steps, choice=st.integers(0, len(FILTERS) - 1))
async def test_a_collector_ends_with_the_final_verdicts(
    aiohttp_client: Any, new_world: NewWorld, networks_env: None, plan: list[Any], choice: int
) -> None:
    params, matches = FILTERS[choice]
    note(f"plan: {plan!r} filters: {params}")
    os.environ.pop(NETWORKS_ENV, None)  # each example starts from the default settings
    with tempfile.TemporaryDirectory() as tmp, new_world(Path(tmp)) as world:
        model = Settled(world)
        steps = {"settings": set_networks, "reclassify": model.reclassify}
        await follow_plan(aiohttp_client, world, params, matches, plan, model.load, steps)


def set_networks(networks: str) -> None:
    """The scanner networks the next writer decides verdicts with."""
    os.environ[NETWORKS_ENV] = networks
