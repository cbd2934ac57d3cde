"""GET /campaigns and /campaigns/{id}: the funnel of contract.md 11, and 1 to 7 on them.

Every count, rate and median is checked against the plain-Python oracle of
reports_oracle.py over fixtures/sample.json; a small hand-made fixture pins the edge
cases the sample lacks (events before the launch, an even count, a campaign sent to
nobody, a rounding tie). Tenancy, the check order, the parameter rules, paging and
ETag/304 are pinned on both paths.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

import pytest
from aiohttp.test_utils import TestClient

from .support import reports as oracle
from .support.datasets import serving_fixture
from .support.factories import API, KEY_1, KEY_2, KEYS, assert_problem, comparable, get, sample
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()  # every test on the app runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)
LIST = f"{API}/campaigns"
ALLOWED = "filter[from_launch_date], filter[title], filter[to_launch_date]"


def own_campaigns(company: int) -> list[int]:
    return [c["id"] for c in sample()["campaigns"] if c["company_id"] == company]


async def body_of(client: TestClient, url: str, key: str = KEY_1, **params: str) -> Any:
    response = await client.get(url, params=params, headers={"X-API-KEY": key})
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    return await response.json()


@pytest.mark.parametrize("company", [1, 2])
@pytest.mark.parametrize("captcha", [None, "false", "FALSE", "true"])
async def test_the_list_is_the_oracles(client: TestClient, company: int, captcha: str) -> None:
    """Every field of every campaign, keys in contract order, by launch_date then id."""
    params = {"filter[with_captcha]": captcha} if captcha else {}
    body = await body_of(client, LIST, KEYS[company], **params)
    without = captcha is not None and captcha.lower() == "false"
    expected = oracle.campaigns(sample(), company, without_captcha=without)
    assert body == expected
    assert [list(record) for record in body] == [list(record) for record in expected]


@pytest.mark.parametrize("captcha", [None, "false", "True"])
async def test_each_report_is_the_oracles(client: TestClient, captcha: str | None) -> None:
    """The single object: the list's fields plus by_department, for every campaign."""
    params = {"filter[with_captcha]": captcha} if captcha else {}
    without = captcha is not None and captcha.lower() == "false"
    for company in (1, 2):
        for campaign_id in own_campaigns(company):
            body = await body_of(client, f"{LIST}/{campaign_id}", KEYS[company], **params)
            expected = oracle.campaign_report(sample(), campaign_id, without)
            assert body == expected
            assert list(body) == list(expected)
            assert [list(d) for d in body["by_department"]] == [
                list(d) for d in expected["by_department"]
            ]


def test_the_sample_exercises_what_the_report_counts() -> None:
    """Targets who did nothing, captcha-verified events and departments with no click."""
    data = sample()
    for campaign in data["campaigns"]:
        report = oracle.campaign_report(data, campaign["id"])
        assert report["opened"] < report["targets"], campaign["id"]
        captcha = oracle.campaign(data, campaign["id"], without_captcha=True)
        assert captcha != oracle.campaign(data, campaign["id"]), campaign["id"]
    departments = [
        d for c in own_campaigns(1) for d in oracle.campaign_report(data, c)["by_department"]
    ]
    assert any(d["clicked"] == 0 for d in departments)
    listed = oracle.campaigns(data, 1)
    assert any(c["automated_events"] and c["suspected_events"] for c in listed)


@pytest.mark.parametrize("captcha", [None, "false"])
async def test_verdict_counts_are_the_stored_verdicts_before_any_exclusion(
    client: TestClient, captcha: str | None
) -> None:
    """automated_events and suspected_events count the campaign's events of each verdict
    as the feed gives them (every event of the company, with its automation), whatever
    the filters."""
    params = {} if captcha is None else {"filter[with_captcha]": captcha}
    feed: list[dict[str, Any]] = []
    url = f"{API}/events?limit=1000"
    while True:  # the feed to its end: Link rel=next until an empty answer
        response = await client.get(url, headers={"X-API-KEY": KEY_1})
        assert response.status == 200, await response.text()
        page = await response.json()
        if not page:
            break
        feed += page
        url = response.headers["Link"][1 : -len('>; rel="next"')]
    assert feed
    for campaign_id in own_campaigns(1):
        report = await body_of(client, f"{LIST}/{campaign_id}", **params)
        [listed] = [c for c in await body_of(client, LIST, **params) if c["id"] == campaign_id]
        for verdict in ("automated", "suspected"):
            count = sum(
                e["campaign"]["id"] == campaign_id and e["automation"]["verdict"] == verdict
                for e in feed
            )
            name = f"{verdict}_events"
            assert report[name] == listed[name] == count, (campaign_id, verdict, captcha)


async def test_the_report_agrees_with_the_events_endpoint(client: TestClient) -> None:
    """Counts of people from the campaign's own events answer (contract.md 11 and 4.1)."""
    for campaign_id in own_campaigns(1):
        events = await body_of(client, f"{LIST}/{campaign_id}/events")
        report = await body_of(client, f"{LIST}/{campaign_id}")
        for kind, name in oracle.COUNTS.items():
            people = {e["victim"]["id"] for e in events if e["type"] == kind}
            assert report[name] == len(people), (campaign_id, kind)


EDGE = {
    "companies": [{"id": 1, "name": "Edge"}, {"id": 2, "name": "Other"}],
    "api_keys": [{"company_id": c, "label": "edge", "key": k} for c, k in KEYS.items()],
    "employees": [
        {"id": i, "company_id": 1, "first_name": f"P{i}", "last_name": "Q"}
        | {"email": f"p{i}@x.example", "department": "Ops" if i % 2 else "Audit", "country": "ES"}
        for i in range(1, 33)
    ],
    "campaigns": [
        {"id": 1, "company_id": 1, "title": "Early", "launch_date": "2026-03-01T08:00:00Z"},
        {"id": 2, "company_id": 1, "title": "Straße to nobody",
         "launch_date": "2026-03-02T08:00:00Z"},
        {"id": 3, "company_id": 1, "title": "One in 32", "launch_date": "2026-03-03T08:00:00Z"},
    ],
    "campaign_targets": [{"campaign_id": 3, "employee_id": i} for i in range(1, 33)]
    + [{"campaign_id": 1, "employee_id": 8, "sent_at": None}],
    "campaign_events": [
        # Clicks of four people: one before the launch (0 s), 60 s, 120 s (twice), 600 s.
        {"id": 1, "employee_id": 1, "type": "click", "timestamp": "2026-03-01T07:00:00Z"},
        {"id": 2, "employee_id": 2, "type": "click", "timestamp": "2026-03-01T08:01:00Z"},
        {"id": 3, "employee_id": 3, "type": "click", "timestamp": "2026-03-01T08:02:00Z"},
        {"id": 4, "employee_id": 3, "type": "click", "timestamp": "2026-03-01T08:00:30Z"},
        {"id": 5, "employee_id": 4, "type": "click", "timestamp": "2026-03-01T08:10:00Z"},
        {"id": 6, "employee_id": 2, "type": "report", "timestamp": "2026-03-01T09:00:00Z"},
        {"id": 7, "employee_id": 5, "type": "report", "timestamp": "2026-03-01T08:30:00Z",
         "with_captcha": True},
        {"id": 8, "employee_id": 1, "type": "fail", "timestamp": "2026-03-03T08:00:00Z",
         "campaign_id": 3},
    ],
}  # fmt: skip
for _event in EDGE["campaign_events"]:
    _event.setdefault("campaign_id", 1)
    _event.setdefault("with_captcha", False)


@pytest.fixture
async def edge(aiohttp_client: Any, store: Store) -> AsyncIterator[TestClient]:
    """The app over the hand-made EDGE fixture, loaded by the store's real loader."""
    async with serving_fixture(aiohttp_client, EDGE, store=store) as client:
        yield client


async def test_edge_cases_of_the_figures(edge: TestClient) -> None:
    """Before the launch is 0 s; an even count takes the lower middle; no targets is null;
    a tie rounds up."""
    [early, nobody, one] = await body_of(edge, LIST)
    assert early["targets"] == 6  # five with events, one listed who did nothing
    # first clicks 0, 30, 60, 600 s: the lower middle of four is the second, 30
    assert (early["clicked"], early["median_seconds_to_first_click"]) == (4, 30)
    assert (early["reported"], early["median_seconds_to_first_report"]) == (2, 1800)
    assert (early["click_rate"], early["report_rate"]) == (0.6667, 0.3333)
    assert early["opened"] == 0 and early["open_rate"] == 0.0
    assert early["median_seconds_to_first_click"] is not None
    assert nobody["targets"] == 0
    assert all(nobody[f"{t}_rate"] is None for t in oracle.TYPES)
    assert nobody["median_seconds_to_first_click"] is None
    assert one["fail_rate"] == 0.0313  # 1/32 = 0.03125, half up (round() would say 0.0312)
    assert one["median_seconds_to_first_report"] is None
    without = await body_of(edge, LIST, **{"filter[with_captcha]": "false"})
    assert (without[0]["reported"], without[0]["median_seconds_to_first_report"]) == (1, 3600)
    assert without[0]["targets"] == 6  # captcha filters events, never targets
    for campaign in EDGE["campaigns"]:
        for captcha in (False, True):
            params = {"filter[with_captcha]": "false"} if captcha else {}
            got = await body_of(edge, f"{LIST}/{campaign['id']}", **params)
            assert got == oracle.campaign_report(EDGE, campaign["id"], captcha)
    report = await body_of(edge, f"{LIST}/1")
    assert [d["department"] for d in report["by_department"]] == ["Audit", "Ops"]
    assert (await body_of(edge, f"{LIST}/2"))["by_department"] == []
    # Titles match with Python's case folding on either store ("ß" folds to "ss").
    for title in ("STRASSE TO NOBODY", "straße TO nobody"):
        assert [c["id"] for c in await body_of(edge, LIST, **{"filter[title]": title})] == [2]


@pytest.mark.parametrize(
    ("params", "titles"),
    [
        ({"filter[title]": "overdue invoice reminder"}, ["Overdue Invoice Reminder"]),
        ({"filter[title]": "PARCEL DELIVERY FAILED, overdue invoice reminder"},
         ["Overdue Invoice Reminder", "Parcel Delivery Failed"]),
        ({"filter[title]": "Overdue Invoice"}, []),  # whole values only
        ({"filter[from_launch_date]": "2025-05-20"}, ["Parcel Delivery Failed",
          "Shared Document: Q3 Budget", "Year-End Bonus Confirmation",
          "Voicemail: New Message"]),
        ({"filter[to_launch_date]": "2025-05-20"}, ["Overdue Invoice Reminder",
          "Parcel Delivery Failed"]),
        ({"filter[from_launch_date]": "2025-05-21", "filter[to_launch_date]": "2025-10-07"},
         ["Shared Document: Q3 Budget"]),
        ({"filter[title]": "Benefits Enrolment Update"}, []),  # company 2's
    ],
)  # fmt: skip
async def test_filters(client: TestClient, params: dict[str, str], titles: list[str]) -> None:
    """Titles whole and in any case; launch dates by UTC day, both bounds inclusive."""
    body = await body_of(client, LIST, **params)
    assert [c["title"] for c in body] == titles
    expected = {c["id"]: c for c in oracle.campaigns(sample(), 1)}
    assert all(record == expected[record["id"]] for record in body)


async def test_repeated_title_filters_merge(client: TestClient) -> None:
    title = "filter[title]"
    url = f"{LIST}?{title}=overdue%20invoice%20reminder&{title}=Parcel%20Delivery%20Failed"
    response = await get(client, url)
    assert [c["id"] for c in await response.json()] == [1, 2]


async def test_always_paginated_with_links_keeping_filters(client: TestClient) -> None:
    response = await get(client, f"{LIST}?filter[to_launch_date]=2026-12-31&per_page=3&page=2")
    assert response.status == 200
    assert response.headers["X-Total-Count"] == "5"
    assert (response.headers["X-Page"], response.headers["X-Per-Page"]) == ("2", "3")
    assert response.headers["X-Total-Pages"] == "2"
    links = unquote(response.headers["Link"])
    assert 'filter[to_launch_date]=2026-12-31&per_page=3&page=1>; rel="first"' in links
    assert 'rel="prev"' in links and 'rel="next"' not in links
    assert [c["id"] for c in await response.json()] == [6, 8]
    past = await get(client, f"{LIST}?page=9")
    assert await past.json() == [] and past.headers["X-Total-Count"] == "5"
    default = await get(client, LIST)
    assert default.headers["X-Per-Page"] == "100" and default.headers["X-Page"] == "1"


@pytest.mark.parametrize(
    ("query", "offender"),
    [
        ("filter[type]=open", "filter[type]"),
        ("filter[with_captcha]=false&filter[with_captcha]=true", "filter[with_captcha]"),
        ("filter[with_captcha]=no", "filter[with_captcha]"),
        ("filter[from_launch_date]=2025-02-30", "filter[from_launch_date]"),
        ("filter[from_launch_date]=2025-3-01", "filter[from_launch_date]"),
        ("filter[to_launch_date]=2025-01-01&filter[to_launch_date]=2025-01-02",
         "filter[to_launch_date]"),
        ("filter[from_launch_date]=2025-06-01&filter[to_launch_date]=2025-05-01",
         "filter[from_launch_date]"),
        ("filter[title]=a,,b", "filter[title]"),
        ("page=0", "page"),
        ("per_page=501", "per_page"),
    ],
)  # fmt: skip
async def test_bad_parameters_are_400(client: TestClient, query: str, offender: str) -> None:
    body = await assert_problem(await get(client, f"{LIST}?{query}"), 400)
    assert list(body["errors"]) == [offender]


async def test_unknown_parameters_name_the_allowed_ones(client: TestClient) -> None:
    body = await assert_problem(await get(client, f"{LIST}?sort=title"), 400)
    assert ALLOWED in body["errors"]["sort"][0]
    single = await assert_problem(await get(client, f"{LIST}/1?page=1"), 400)
    assert (
        "Allowed: filter[automation], filter[with_captcha], format." in single["errors"]["page"][0]
    )
    twice = f"{LIST}/1?filter[with_captcha]=false&filter[with_captcha]=false"
    assert list((await assert_problem(await get(client, twice), 400))["errors"]) == [
        "filter[with_captcha]"
    ]


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1.5", "1e3", "9" * 20])
async def test_bad_path_ids_are_400_after_the_key(client: TestClient, bad: str) -> None:
    """contract.md 2: the key (401) first, then the path id (400)."""
    await assert_problem(await get(client, f"{LIST}/{bad}", key=None), 401)
    body = await assert_problem(await get(client, f"{LIST}/{bad}?filter[x]=1"), 400)
    assert "id" in body["errors"]


async def test_another_companys_campaign_is_a_free_id(client: TestClient) -> None:
    """contract.md 1: same status, headers and body; even with If-None-Match: *."""
    free = await comparable(client, f"{LIST}/999999", KEY_1)
    assert free[0] == 404
    for foreign in own_campaigns(2):
        for url in (f"{LIST}/{foreign}", f"{LIST}/{foreign}?filter[with_captcha]=false"):
            assert await comparable(client, url, KEY_1) == free
        any_tag = {"If-None-Match": "*"}
        assert await comparable(client, f"{LIST}/{foreign}", KEY_1, **any_tag) == free
    assert {c["id"] for c in await body_of(client, LIST, KEY_2)} == set(own_campaigns(2))


async def test_etag_304_head_405_gzip_and_limits(client: TestClient) -> None:
    for url in (LIST, f"{LIST}/1"):
        first = await get(client, url)
        etag = first.headers["ETag"]
        again = await get(client, url, **{"If-None-Match": etag})
        assert again.status == 304 and again.headers["ETag"] == etag
        head = await client.head(url, headers={"X-API-KEY": KEY_1})
        assert head.status == 200 and await head.read() == b""
        post = await client.post(url, headers={"X-API-KEY": KEY_1})
        assert post.status == 405 and "GET" in post.headers["Allow"]
    other = await get(client, f"{LIST}?filter[with_captcha]=false")
    assert other.headers["ETag"] != (await get(client, LIST)).headers["ETag"]
    for url in (LIST, f"{LIST}/1"):  # both over 1 KiB
        zipped = await get(client, url, **{"Accept-Encoding": "gzip"})
        assert zipped.headers["Content-Encoding"] == "gzip"
        assert "Accept-Encoding" in zipped.headers["Vary"]
        assert "RateLimit-Remaining" in zipped.headers


async def test_the_events_path_is_still_the_events(client: TestClient) -> None:
    """/campaigns/{id}/events keeps answering the event array beside /campaigns/{id}."""
    events = await body_of(client, f"{LIST}/1/events")
    assert isinstance(events, list) and {"victim", "type"} <= set(events[0])
    assert isinstance(await body_of(client, f"{LIST}/1"), dict)
