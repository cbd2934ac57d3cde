"""filter[automation]: include (the default), exclude_automated, exclude_suspected.

Over the rules' fixture (test_automation.py: sent at 09:00:00, a gateway's click 3 s
later, a scripted agent, bursts, a captcha-verified fast click, shared addresses), on
both stores: the campaign's ``clicked`` follows each value; every campaign, employee and
events listing is the oracle's with that value (an excluded event leaves every count,
rate, median, department and the directory's minimums, never the targets; the
verdicts' counts stay); ``include`` answers what no filter answers; a bad value is a 400
naming the parameter on every endpoint that takes it.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support import reports as oracle
from .support.clients import MakeClient
from .support.factories import API, assert_problem, get
from .support.gateway import CAMPAIGN, COMPANY, GATEWAY_KEY, done_when
from .support.loads import write_fixture
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()
VALUES = ("include", "exclude_automated", "exclude_suspected")
# The campaign's clickers: twelve people; five only automated, two only in bursts.
CLICKED = {"include": 12, "exclude_automated": 7, "exclude_suspected": 5}
ENDPOINTS = (
    f"{API}/events",
    f"{API}/campaigns",
    f"{API}/campaigns/{CAMPAIGN}",
    f"{API}/victimsapi",
    f"{API}/victimsapi/9003",
    f"{API}/campaigns/{CAMPAIGN}/events",
    f"{API}/victimsapi/9003/events",
)


def gateway_data() -> dict[str, Any]:
    document = done_when()
    document["api_keys"] = [{"company_id": COMPANY, "label": "gw", "key": GATEWAY_KEY}]
    return document


@pytest.fixture
async def gateway(store: Store, make_client: MakeClient, tmp_path: Path) -> TestClient:
    """The app over the sample and the rules' fixture (company 900 and its key)."""
    await store.load([write_fixture(tmp_path / "gw.json", gateway_data())])
    return await make_client()


async def body_of(client: TestClient, path: str, automation: str, **params: str) -> Any:
    query = {"filter[automation]": automation} if automation != "include" else {}
    query |= params
    text = "&".join(f"{k}={v}" for k, v in query.items())
    response = await get(client, f"{path}?{text}" if text else path, GATEWAY_KEY)
    assert response.status == 200, await response.text()
    return await response.json()


async def test_clicked_follows_each_value(gateway: TestClient) -> None:
    """The rules' campaign: clicked, its department and its click rate drop with the
    value; targets and the verdicts' counts (taken before any exclusion) stay."""
    for automation in VALUES:
        await clicked_follows(gateway, automation)


async def clicked_follows(gateway: TestClient, automation: str) -> None:
    report = await body_of(gateway, f"{API}/campaigns/{CAMPAIGN}", automation)
    assert report["clicked"] == CLICKED[automation]
    assert report["targets"] == 12
    assert report["click_rate"] == round(CLICKED[automation] / 12, 4)
    assert (report["automated_events"], report["suspected_events"]) == (5, 8)
    [department] = report["by_department"]
    assert (department["targets"], department["clicked"]) == (12, CLICKED[automation])
    listed = await body_of(gateway, f"{API}/campaigns", automation)
    assert [c for c in listed if c["id"] == CAMPAIGN] == [
        {k: v for k, v in report.items() if k != "by_department"}
    ]


async def test_every_report_is_the_oracles(gateway: TestClient) -> None:
    """Each campaign, the directory (with its minimums) and each employee, each value."""
    for automation in VALUES:
        await reports_match(gateway, automation)


async def reports_match(gateway: TestClient, automation: str) -> None:
    data, today = gateway_data(), dt.datetime.now(dt.UTC).date()
    verdicts = oracle.verdicts(data)
    listed = await body_of(gateway, f"{API}/campaigns", automation)
    assert listed == oracle.campaigns(data, COMPANY, False, automation)
    for campaign in listed:
        for captcha in (False, True):
            params = {"filter[with_captcha]": "false"} if captcha else {}
            report = await body_of(
                gateway, f"{API}/campaigns/{campaign['id']}", automation, **params
            )
            assert report == oracle.campaign_report(
                data, campaign["id"], captcha, automation, verdicts
            )
    people = oracle.employees(data, COMPANY, today, automation)
    assert await body_of(gateway, f"{API}/victimsapi", automation) == people
    clickers = await body_of(
        gateway, f"{API}/victimsapi", automation, **{"filter[min_clicked]": "1"}
    )
    assert clickers == [p for p in people if p["phishing"]["clicked"] >= 1]
    assert (
        len(clickers) == {"include": 12, "exclude_automated": 9, "exclude_suspected": 5}[automation]
    )
    for person in people:
        assert await body_of(gateway, f"{API}/victimsapi/{person['id']}", automation) == person


async def test_the_events_listings_leave_out_the_excluded(gateway: TestClient) -> None:
    for automation in VALUES:
        await events_match(gateway, automation)


async def events_match(gateway: TestClient, automation: str) -> None:
    data = gateway_data()
    verdicts = oracle.verdicts(data)
    kept = {i for i, v in verdicts.items() if v not in oracle.DROPPED[automation]}
    for campaign in data["campaigns"]:
        path = f"{API}/campaigns/{campaign['id']}/events"
        got = [e["id"] for e in await body_of(gateway, path, automation)]
        own = [e for e in data["campaign_events"] if e["campaign_id"] == campaign["id"]]
        expected = sorted((e["timestamp"], e["id"]) for e in own if e["id"] in kept)
        assert got == [i for _, i in expected]
    for person in data["employees"]:
        path = f"{API}/victimsapi/{person['id']}/events"
        got = [e["id"] for e in await body_of(gateway, path, automation, per_page="500")]
        own = [e for e in data["campaign_events"] if e["employee_id"] == person["id"]]
        assert got == [
            i for _, i in sorted((e["timestamp"], e["id"]) for e in own if e["id"] in kept)
        ]
    feed = await body_of(gateway, f"{API}/events", automation, limit="1000")
    assert sorted(e["id"] for e in feed) == sorted(kept)
    assert all(e["automation"]["verdict"] not in oracle.DROPPED[automation] for e in feed)


async def test_include_is_the_default_and_a_bad_value_is_400(gateway: TestClient) -> None:
    for path in ENDPOINTS:
        await include_and_bad_values(gateway, path)


async def include_and_bad_values(gateway: TestClient, path: str) -> None:
    plain = await get(gateway, path, GATEWAY_KEY)
    included = await get(gateway, f"{path}?filter[automation]=INCLUDE", GATEWAY_KEY)
    assert (included.status, await included.read()) == (200, await plain.read())
    for bad in ("exclude", "", "exclude_suspected,exclude_automated", "human"):
        response = await get(gateway, f"{path}?filter[automation]={bad}", GATEWAY_KEY)
        body = await assert_problem(response, 400)
        assert list(body["errors"]) == ["filter[automation]"]
        assert (
            "include, exclude_automated, exclude_suspected"
            in body["errors"]["filter[automation]"][0]
        )
