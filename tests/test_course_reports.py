"""GET /courses: training coverage per course (contract.md 12), and 1 to 7 on it.

Each course is checked against the plain-Python oracle (reports_oracle.py) over
fixtures/sample.json and against the inscriptions endpoint's own records; ``overdue``
follows the app's date (a Day the test sets). Paging, parameters and tenancy as for
every listing.
"""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support import reports as oracle
from .support.datasets import serving_fixture
from .support.factories import API, KEY_2, KEYS, Day, assert_problem, get, sample
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()  # every test on the app runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)
LIST = f"{API}/courses"
Dated = tuple[TestClient, Day]


def own_courses(company: int) -> list[dict[str, Any]]:
    return [c for c in sample()["courses"] if c["company_id"] == company]


async def body_of(client: TestClient, url: str, key: str = KEYS[1], **params: str) -> Any:
    response = await client.get(url, params=params, headers={"X-API-KEY": key})
    assert response.status == 200, await response.text()
    return await response.json()


@pytest.mark.parametrize("company", [1, 2])
@pytest.mark.parametrize("today", ["2025-03-01", "2025-09-01", "2030-01-01"])
async def test_every_course_is_the_oracles(dated: Dated, company: int, today: str) -> None:
    """Every course by id, keys in contract order, overdue as of the app's date."""
    client, day = dated
    day.day = dt.date.fromisoformat(today)
    body = await body_of(client, LIST, KEYS[company])
    expected = oracle.courses(sample(), company, day.day)
    assert body == expected
    assert [list(c) for c in body] == [list(c) for c in expected]


async def test_coverage_agrees_with_the_inscriptions_endpoint(dated: Dated) -> None:
    """Counts, rate and mean from the inscriptions the original endpoint serves."""
    client, day = dated
    inscriptions = await body_of(client, f"{API}/course-inscriptions", per_page="500")
    checked = 0
    for course in await body_of(client, LIST):
        same_title = [c for c in own_courses(1) if c["title"] == course["title"]]
        if len(same_title) > 1:
            continue  # inscriptions name the title only; the oracle covers these
        checked += 1
        mine = [i for i in inscriptions if i["course_title"] == course["title"]]
        assert course["inscriptions"] == len(mine)
        for status in oracle.STATUSES:
            assert course[status] == sum(i["status"] == status for i in mine)
        late = [i for i in mine if i["status"] != "completed" and i["due_date"]]
        assert course["overdue"] == sum(i["due_date"] < day.day.isoformat() for i in late)
        results = [
            Decimal(str(s["result"])) for i in mine for s in i["events"] if s["result"] is not None
        ]
        mean = sum(results) / len(results) if results else None
        expected = None if mean is None else float(mean.quantize(Decimal("0.1"), ROUND_HALF_UP))
        assert course["average_result"] == expected
        assert course["sections"] == (len(mine[0]["events"]) if mine else course["sections"])
    assert checked >= 2


def test_the_sample_exercises_the_coverage() -> None:
    """Courses with and without results, overdue inscriptions, completion below 1."""
    day = dt.date(2025, 9, 1)
    courses = [c for company in (1, 2) for c in oracle.courses(sample(), company, day)]
    assert any(c["overdue"] for c in courses)
    assert any(c["completion_rate"] not in (None, 0.0, 1.0) for c in courses)
    assert any(c["average_result"] is not None for c in courses)


async def test_the_title_filter(client: TestClient) -> None:
    """Whole titles in any case, OR-ed; another company's title finds nothing."""
    body = await body_of(client, LIST, **{"filter[title]": "password HYGIENE,nothing"})
    assert [c["title"] for c in body] == ["Password Hygiene"]
    titles_2 = {c["title"] for c in own_courses(2)}
    titles_1 = {c["title"] for c in own_courses(1)}
    only_2 = sorted(titles_2 - titles_1)
    assert only_2 and await body_of(client, LIST, **{"filter[title]": only_2[0]}) == []
    assert await body_of(client, LIST, KEY_2, **{"filter[title]": only_2[0]})


async def test_paging_and_parameters(client: TestClient) -> None:
    response = await get(client, f"{LIST}?per_page=1&page=2")
    total = len(own_courses(1))
    assert response.headers["X-Total-Count"] == str(total)
    assert response.headers["X-Total-Pages"] == str(total)
    assert len(await response.json()) == 1
    past = await get(client, f"{LIST}?page={total + 1}&per_page=1")
    assert await past.json() == []
    for query, offender in (
        ("filter[courses]=x", "filter[courses]"),
        ("page=1&page=2", "page"),
        ('filter[title]="a', "filter[title]"),
    ):
        body = await assert_problem(await get(client, f"{LIST}?{query}"), 400)
        assert list(body["errors"]) == [offender]
    await assert_problem(await get(client, LIST, key=None), 401)
    assert (await client.post(LIST, headers={"X-API-KEY": KEYS[1]})).status == 405


TIE = {
    "companies": [{"id": 1, "name": "Tie"}],
    "api_keys": [{"company_id": 1, "label": "tie", "key": KEYS[1]}],
    "employees": [
        {"id": i, "company_id": 1, "first_name": "A", "last_name": "B", "email": f"{i}@t.example"}
        | {"department": "D", "country": "C"}
        for i in (1, 2)
    ],
    "courses": [{"id": 1, "company_id": 1, "title": "Rounding"}],
    "course_sections": [
        {"id": 1, "course_id": 1, "title": "Exam", "section_type": "exam", "position": 1}
    ],
    "inscriptions": [
        {"id": i, "employee_id": i, "course_id": 1, "start_date": "2025-01-01"}
        | {"due_date": "2025-02-01", "status": "completed" if i == 1 else "in_progress"}
        for i in (1, 2)
    ],
    "section_results": [
        {"inscription_id": i, "section_id": 1, "completed_at": "2025-01-05"}
        | {"result": result, "status": "DISAPPROVED"}
        for i, result in ((1, 69.3), (2, 22.4))
    ],
}


async def test_a_mean_halfway_rounds_up(aiohttp_client: Any, store: Store) -> None:
    """(69.3 + 22.4) / 2 = 45.85 exactly: 45.9 (in floating point it is 45.8499...)."""
    day = Day(dt.date(2025, 3, 1))
    async with serving_fixture(aiohttp_client, TIE, day, store) as client:
        [course] = await body_of(client, LIST)
    assert course["average_result"] == 45.9
    assert (course["completed"], course["overdue"], course["completion_rate"]) == (1, 1, 0.5)
    assert [course] == oracle.courses(TIE, 1, dt.date(2025, 3, 1))


@pytest.mark.parametrize(
    ("results", "mean"),
    [
        ((60.91, 70.99), 66.0),
        ((0.0499999999, 0.0499999999), 0.1),
        ((0.04999999, 0.04999999), 0.0),
        # 1e-10 below a tie: the old tolerance's very edge, SQLite 2.0, PostgreSQL 2.1
        ((2.0499999999, 2.0499999999), 2.1),
        ((0.0499999995, 0.0499999995), 0.1),  # 5e-10 below: within 1e-9 (was 0.0)
    ],
)
async def test_a_mean_within_1e_9_below_a_tie_is_the_tie(
    aiohttp_client: Any, store: Store, results: tuple[float, float], mean: float
) -> None:
    """As the docs say: 60.91 + 70.99 is 131.89999999999998 in floating point, a mean a
    hair below 65.95, and 0.0499999999 is within 1e-9 of 0.05; 0.04999999 is not."""
    rows = zip(TIE["section_results"], results, strict=True)
    fixture = {**TIE, "section_results": [{**row, "result": result} for row, result in rows]}
    async with serving_fixture(aiohttp_client, fixture, Day(dt.date(2025, 3, 1)), store) as client:
        [course] = await body_of(client, LIST)
    assert course["average_result"] == mean
