"""GET /victimsapi and /victimsapi/{id}: the directory of contract.md 12, and 1 to 7 on them.

Each employee is checked against the plain-Python oracle (reports_oracle.py) over
fixtures/sample.json, and its blocks against the original endpoints: ``phishing``
against /victimsapi/{id}/events, ``training`` against /course-inscriptions. The person
filters are the inscriptions endpoint's (same matching), ``min_clicked``/``min_failed``
the repeat-offender report. ``overdue`` follows the app's date (a Day the test sets), and
so does the ETag.
"""

from __future__ import annotations

import csv
import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support import reports as oracle
from .support.factories import API, KEY_1, KEYS, Day, assert_problem, comparable, get, sample
from .support.stores import on_both_stores

store_kind = on_both_stores()  # every test on the app runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)
LIST = f"{API}/victimsapi"
Dated = tuple[TestClient, Day]


async def body_of(client: TestClient, url: str, key: str = KEY_1, **params: str) -> Any:
    response = await client.get(url, params=params, headers={"X-API-KEY": key})
    assert response.status == 200, await response.text()
    return await response.json()


def own(company: int) -> list[dict[str, Any]]:
    return [e for e in sample()["employees"] if e["company_id"] == company]


@pytest.mark.parametrize("company", [1, 2])
async def test_the_directory_is_the_oracles(dated: Dated, company: int) -> None:
    """Every employee of the company by id, keys in contract order, blocks included."""
    client, day = dated
    body = await body_of(client, LIST, KEYS[company], per_page="500")
    expected = oracle.employees(sample(), company, day.day)
    assert body == expected
    assert [list(e) for e in body] == [list(e) for e in expected]
    assert [list(e["phishing"]) + list(e["training"]) for e in body] == [
        list(e["phishing"]) + list(e["training"]) for e in expected
    ]


async def test_each_employee_is_the_oracles_and_the_list_entry(dated: Dated) -> None:
    client, day = dated
    for company in (1, 2):
        listed = {e["id"]: e for e in await body_of(client, LIST, KEYS[company], per_page="500")}
        for person in own(company):
            body = await body_of(client, f"{LIST}/{person['id']}", KEYS[company])
            assert body == oracle.employee(sample(), person["id"], day.day) == listed[person["id"]]


async def test_the_blocks_agree_with_the_original_endpoints(dated: Dated) -> None:
    """phishing from the employee's events; training from the course inscriptions."""
    client, day = dated
    inscriptions = await body_of(client, f"{API}/course-inscriptions", per_page="500")
    for person in own(1):
        report = await body_of(client, f"{LIST}/{person['id']}")
        events = await body_of(client, f"{LIST}/{person['id']}/events")
        for kind, name in oracle.COUNTS.items():
            campaigns = {e["campaign"]["id"] for e in events if e["type"] == kind}
            assert report["phishing"][name] == len(campaigns), (person["id"], kind)
        last = max((e["timestamp"] for e in events), default=None)
        assert report["phishing"]["last_event_at"] == last
        assert report["phishing"]["campaigns"] >= len({e["campaign"]["id"] for e in events})
        mine = [i for i in inscriptions if i["victim_email"] == person["email"]]
        training = report["training"]
        assert training["inscriptions"] == len(mine)
        for status in oracle.STATUSES:
            assert training[status] == sum(i["status"] == status for i in mine)
        late = [i for i in mine if i["status"] != "completed" and i["due_date"]]
        assert training["overdue"] == sum(i["due_date"] < day.day.isoformat() for i in late)
        assert report["groups"] == (mine[0]["groups"] if mine else report["groups"])


def test_the_sample_exercises_the_blocks() -> None:
    """Targets without events, people without inscriptions, overdue and not on 2025-09-01."""
    people = oracle.employees(sample(), 1, dt.date(2025, 9, 1))
    assert any(p["phishing"]["campaigns"] > p["phishing"]["opened"] for p in people)
    assert any(p["training"]["inscriptions"] == 0 for p in people)
    assert any(p["training"]["overdue"] for p in people)
    assert any(
        p["training"]["overdue"] < p["training"]["inscriptions"] - p["training"]["completed"]
        for p in people
    )


PERSON_QUERIES = [
    {"filter[department]": "finance"},
    {"filter[department]": '"Research, Development",LEGAL'},
    {"filter[country]": "spain,Germany", "filter[teams]": "blue team"},
    {"filter[name]": "JOSÉ", "filter[last_name]": "núñez"},
    {"filter[email]": "jose.nunez@northwind.example"},
    {"filter[teams]": "Security Ambassadors"},
    {"filter[department]": "Finance", "filter[country]": "Nowhere"},
]


def lists_of(query: dict[str, str]) -> dict[str, list[str]]:
    """The values of each person filter of a query (comma lists, quotes honoured)."""
    return {p[7:-1]: next(csv.reader([v], skipinitialspace=True)) for p, v in query.items()}


@pytest.mark.parametrize("query", PERSON_QUERIES)
async def test_person_filters_match_like_the_inscriptions(
    dated: Dated, query: dict[str, str]
) -> None:
    """The same people as the oracle; and the inscriptions endpoint finds the same people."""
    client, _ = dated
    body = await body_of(client, LIST, **query, per_page="500")
    expected = [p["id"] for p in own(1) if oracle.person_matches(sample(), p, lists_of(query))]
    assert [e["id"] for e in body] == expected
    found = await body_of(client, f"{API}/course-inscriptions", **query, per_page="500")
    emails = {e["email"] for e in body if e["training"]["inscriptions"]}
    assert {i["victim_email"] for i in found} == emails


async def test_a_person_filter_is_needed_somewhere(dated: Dated) -> None:
    """At least one of the queries above finds somebody (else they prove nothing)."""
    client, _ = dated
    sizes = [len(await body_of(client, LIST, **q, per_page="500")) for q in PERSON_QUERIES]
    assert sum(size > 0 for size in sizes) >= 5


@pytest.mark.parametrize("name", ["min_clicked", "min_failed"])
async def test_repeat_offenders(dated: Dated, name: str) -> None:
    """At least N distinct campaigns with a click (or a fail); 0 keeps everybody."""
    client, day = dated
    count = oracle.COUNTS["click" if name == "min_clicked" else "fail"]
    everybody = oracle.employees(sample(), 1, day.day)
    seen = set()
    for minimum in range(0, 6):
        body = await body_of(client, LIST, **{f"filter[{name}]": str(minimum)}, per_page="500")
        expected = [p for p in everybody if p["phishing"][count] >= minimum]
        assert body == expected, minimum
        seen.add(len(body))
    assert len(seen) >= 3  # the minimums really cut
    both = await body_of(
        client, LIST, **{"filter[min_clicked]": "2", "filter[min_failed]": "2"}, per_page="500"
    )
    assert both == [
        p for p in everybody if p["phishing"]["clicked"] >= 2 and p["phishing"]["failed"] >= 2
    ]
    huge = await body_of(client, LIST, **{f"filter[{name}]": str(2**63 - 1)})
    assert huge == []


@pytest.mark.parametrize(
    ("query", "offender"),
    [
        ("filter[min_failed]=-1", "filter[min_failed]"),
        ("filter[min_failed]=1.5", "filter[min_failed]"),
        ("filter[min_clicked]=+1", "filter[min_clicked]"),
        ("filter[min_clicked]=" + "9" * 20, "filter[min_clicked]"),
        ("filter[min_failed]=1&filter[min_failed]=2", "filter[min_failed]"),
        ("filter[courses]=Password%20Hygiene", "filter[courses]"),
        ("filter[with_captcha]=false", "filter[with_captcha]"),
        ("filter[department]=", "filter[department]"),
        ("per_page=0", "per_page"),
    ],
)
async def test_bad_parameters_are_400(client: TestClient, query: str, offender: str) -> None:
    body = await assert_problem(await get(client, f"{LIST}?{query}"), 400)
    assert list(body["errors"]) == [offender]


async def test_the_single_employee_takes_no_parameters(client: TestClient) -> None:
    body = await assert_problem(await get(client, f"{LIST}/7?page=1"), 400)
    assert "Unknown parameter" in body["errors"]["page"][0]
    await assert_problem(await get(client, f"{LIST}/abc"), 400)


async def test_overdue_and_the_etag_follow_the_date(dated: Dated) -> None:
    """contract.md 12: overdue counts before today's UTC date; the ETag moves with it."""
    client, day = dated
    due = sorted(
        i["due_date"]
        for i in sample()["inscriptions"]
        if i["due_date"] and i["status"] != "completed" and i["employee_id"] == 7
    )
    assert due  # employee 7 has an open inscription with a due date
    for url in (LIST, f"{LIST}/7", f"{API}/courses"):
        day.day = dt.date.fromisoformat(due[0])  # due today: not overdue yet
        before = await get(client, url)
        etag = before.headers["ETag"]
        assert (await get(client, url, **{"If-None-Match": etag})).status == 304
        day.day += dt.timedelta(days=1)
        after = await get(client, url, **{"If-None-Match": etag})
        assert after.status == 200 and after.headers["ETag"] != etag
    person = await body_of(client, f"{LIST}/7")
    assert person == oracle.employee(sample(), 7, day.day)
    day.day = dt.date.fromisoformat(due[0])
    assert (await body_of(client, f"{LIST}/7"))["training"]["overdue"] == person["training"][
        "overdue"
    ] - 1


async def test_another_companys_employee_is_a_free_id(client: TestClient) -> None:
    """contract.md 1: same status, headers and body; even with If-None-Match: *."""
    free = await comparable(client, f"{LIST}/999999")
    assert free[0] == 404
    for person in own(2):
        assert await comparable(client, f"{LIST}/{person['id']}") == free
    foreign = own(2)[0]["id"]
    assert await comparable(client, f"{LIST}/{foreign}", **{"If-None-Match": "*"}) == free
    listed = await body_of(client, LIST, per_page="500")
    assert {e["id"] for e in listed} == {p["id"] for p in own(1)}


async def test_paging_headers_and_304(client: TestClient) -> None:
    response = await get(client, f"{LIST}?filter[min_failed]=1&per_page=5&page=2")
    total = sum(
        p["phishing"]["failed"] >= 1 for p in oracle.employees(sample(), 1, dt.date(2025, 9, 1))
    )
    assert response.headers["X-Total-Count"] == str(total)
    assert response.headers["X-Page"] == "2" and response.headers["X-Per-Page"] == "5"
    assert "filter%5Bmin_failed%5D=1&per_page=5&page=3" in response.headers["Link"]
    etag = response.headers["ETag"]
    again = await get(
        client, f"{LIST}?filter[min_failed]=1&per_page=5&page=2", **{"If-None-Match": etag}
    )
    assert again.status == 304
