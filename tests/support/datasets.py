"""Random two-company datasets for the properties of contract.md 1, 3 and 4 (test_properties.py).

Names, departments, countries, teams and courses come from small alphabets full of
non-ASCII and mixed-case values ("Ärzte"/"ÄRZTE", "Straße"/"STRASSE": str.casefold makes
those equal); ids are random, so that id order differs from date order. ``serving`` loads
a dataset with the real loader into a fresh database and serves it with the real app
(``serving_fixture`` does the same for hand-made fixtures, on either store).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from hypothesis import note
from hypothesis import strategies as st

from app.config import Config
from app.keys import TODAY
from app.main import create_app

from .clients import ProblemTestServer
from .factories import KEYS
from .stores import Store

Data = dict[str, list[dict[str, Any]]]
FREE_ID = 10**6 + 1  # generated ids stay below this
DAY0 = dt.date(2026, 1, 1)
EVENT_TYPES = ("open", "click", "report", "fail")
FIRST = ("Ana", "ANA", "Zoë", "Zoe\u0308", "José", "straße", "STRASSE", "ΣΊΣΥΦΟΣ", "σίσυφος")
FIRST += ("İlker", "ılker")
LAST = ("Ångström", "ÅNGSTRÖM", "Núñez", "Smith, Jr.", "Müller", "MÜLLER", "van der Berg")
DEPARTMENTS = ("Ärzte", "ärzte", "ÄRZTE", "Straße", "STRASSE", "Sales", "R&D, Labs")
COUNTRIES = ("España", "ESPAÑA", "Türkiye", "TÜRKİYE", "日本", "Ελλάς", "ΕΛΛΆΣ")
TEAMS = ("Blue", "BLUE", "Grün", "GRÜN", "Red, Team", "🚀 Rockets", "Ωmega")
COURSES = ("Phishing 101", "PHISHING 101", "Datenschutz", "Straßen", "STRASSEN", "Sécurité")
EMAILS = ("anna@example.com", "Anna@EXAMPLE.com", "straße@firma.de", "STRASSE@firma.de")
EMAILS += ("zoë@example.com",)


@st.composite
def datasets(draw: st.DrawFn) -> Data:
    """Two companies; ids are random so that id order differs from date order."""
    rnd = draw(st.randoms(use_true_random=False))

    def ids(count: int) -> list[int]:
        return rnd.sample(range(1, FREE_ID), count)

    def owners(low: int, high: int) -> list[int]:
        """Record owners: both companies at least once."""
        return [1, 2, *draw(st.lists(st.sampled_from((1, 2)), min_size=low, max_size=high))]

    def pick(options: Any) -> Any:
        return draw(st.sampled_from(options))

    employees = [
        {"id": i, "company_id": c, "first_name": pick(FIRST), "last_name": pick(LAST)}
        | {"email": pick(EMAILS), "department": pick(DEPARTMENTS), "country": pick(COUNTRIES)}
        for c, i in zip(owners(3, 28), ids(30), strict=False)
    ]
    team_owners = draw(st.lists(st.sampled_from((1, 2)), max_size=6))
    teams = [
        {"id": i, "company_id": c, "name": pick(TEAMS)}
        for c, i in zip(team_owners, ids(len(team_owners)), strict=True)
    ]
    members = [
        {"team_id": t["id"], "employee_id": e["id"]}
        for e in employees
        for t in teams
        if t["company_id"] == e["company_id"] and draw(st.booleans())
    ]
    courses = [
        {"id": i, "company_id": c, "title": pick(COURSES)}
        for c, i in zip(owners(0, 2), ids(4), strict=False)
    ]
    campaigns = [
        {"id": i, "company_id": c, "title": f"Campaign {i}", "launch_date": "2026-03-01T08:00:00Z"}
        for c, i in zip(owners(0, 1), ids(3), strict=False)
    ]
    inscriptions, events = [], []
    for i in ids(draw(st.integers(0, 40))):
        employee = pick(employees)
        own = [c["id"] for c in courses if c["company_id"] == employee["company_id"]]
        start = DAY0 + dt.timedelta(days=draw(st.integers(0, 15)))
        due = draw(st.none() | st.integers(0, 20))
        inscriptions.append(
            {"id": i, "employee_id": employee["id"], "start_date": start.isoformat()}
            | {"course_id": pick(own)}
            | {"due_date": None if due is None else (start + dt.timedelta(days=due)).isoformat()}
            | {"status": pick(("not_started", "in_progress", "completed"))}
        )
    for i in ids(draw(st.integers(0, 40))):
        employee = pick(employees)
        own = [c["id"] for c in campaigns if c["company_id"] == employee["company_id"]]
        minute = draw(st.integers(0, 9))
        events.append(
            {"id": i, "campaign_id": pick(own), "employee_id": employee["id"]}
            | {"type": pick(EVENT_TYPES), "timestamp": f"2026-03-01T09:0{minute}:00Z"}
            | {"with_captcha": draw(st.booleans())}
        )
    return {
        "companies": [{"id": 1, "name": "Eins"}, {"id": 2, "name": "Zwei"}],
        "api_keys": [{"company_id": c, "label": "props", "key": k} for c, k in KEYS.items()],
        "employees": employees,
        "teams": teams,
        "team_members": members,
        "courses": courses,
        "inscriptions": inscriptions,
        "campaigns": campaigns,
        "campaign_events": events,
    }


@contextlib.asynccontextmanager
async def serving(
    aiohttp_client: Any,
    data: Data,
    today: Callable[[], dt.date] | None = None,
    store: Store | None = None,
) -> AsyncIterator[TestClient]:
    """In a hypothesis example: :func:`serving_fixture`, the dataset noted for a failure."""
    note(f"dataset: {json.dumps(data, ensure_ascii=False)}")
    async with serving_fixture(aiohttp_client, data, today, store) as client:
        yield client


@contextlib.asynccontextmanager
async def serving_fixture(
    aiohttp_client: Any,
    data: Data,
    today: Callable[[], dt.date] | None = None,
    store: Store | None = None,
) -> AsyncIterator[TestClient]:
    """The real app over a fresh database holding `data`, written by the real loader.

    ``today`` replaces the app's clock (the reports count overdue inscriptions);
    ``store`` is the store under test (SQLite by default): its kind of database is used.
    """
    with tempfile.TemporaryDirectory() as tmp:
        fixture = Path(tmp) / "data.json"
        fixture.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        base = store or Store("sqlite", Path(tmp) / "unused.sqlite3")
        async with base.scratch(Path(tmp)) as scratch:
            await scratch.load([fixture])
            config = Config(
                **scratch.settings(),
                rate_burst=10**9,
                rate_per_second=1e9,
                auth_failures_per_minute=10**9,
            )
            app = create_app(config)
            if today is not None:
                app[TODAY] = today
            client = await aiohttp_client(ProblemTestServer(app))
            try:
                yield client
            finally:
                await client.close()
