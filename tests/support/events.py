"""Oracles for the two events endpoints, built from fixtures/sample.json in plain Python."""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient

from .factories import API, KEY_1, by_id, sample

TYPES = ("open", "click", "report", "fail")
KINDS = ("campaigns", "victimsapi")
OWN_ID = {"campaigns": 1, "victimsapi": 7}  # a campaign and an employee of company 1
FREE_ID = 999999
Params = list[tuple[str, str]]
CAPTCHA, TYPE = "filter[with_captcha]", "filter[type]"


def ordered_events(**match: Any) -> list[dict[str, Any]]:
    """Fixture events whose fields equal ``match``, by timestamp then id."""
    rows = [e for e in sample()["campaign_events"] if all(e[k] == v for k, v in match.items())]
    return sorted(rows, key=lambda e: (e["timestamp"], e["id"]))


def campaign_events(
    campaign_id: int, types: tuple[str, ...] = TYPES, without_captcha: bool = False
) -> list[dict[str, Any]]:
    """What the campaign endpoint must return, built from the fixture."""
    people = by_id("employees")
    return [
        {
            "id": e["id"],
            "type": e["type"],
            "timestamp": e["timestamp"],
            "victim": {k: people[e["employee_id"]][k] for k in VICTIM_KEYS},
        }
        for e in ordered_events(campaign_id=campaign_id)
        if e["type"] in types and not (without_captcha and e["with_captcha"])
    ]


VICTIM_KEYS = ("id", "first_name", "last_name", "email", "department")


def employee_events(employee_id: int) -> list[dict[str, Any]]:
    """What the employee endpoint must return, built from the fixture."""
    campaigns = by_id("campaigns")
    return [
        {
            "id": e["id"],
            "type": e["type"],
            "timestamp": e["timestamp"],
            "campaign": {k: campaigns[e["campaign_id"]][k] for k in ("id", "title", "launch_date")},
        }
        for e in ordered_events(employee_id=employee_id)
    ]


def expected(kind: str, record_id: int) -> list[dict[str, Any]]:
    """The whole unfiltered answer of either endpoint."""
    return campaign_events(record_id) if kind == "campaigns" else employee_events(record_id)


def ids_of(table: str, company_id: int) -> list[int]:
    """The campaign or employee ids of one company."""
    return [row["id"] for row in sample()[table] if row["company_id"] == company_id]


def assert_same(body: Any, wanted: list[dict[str, Any]]) -> None:
    """Equal values and the same key order at every level."""
    assert body == wanted
    assert json.dumps(body) == json.dumps(wanted)


async def fetch(
    client: TestClient, kind: str, record_id: Any, params: Params = (), key: str = KEY_1
) -> tuple[Any, Any]:
    """GET one events listing; return the response and its decoded JSON body."""
    resp = await client.get(
        f"{API}/{kind}/{record_id}/events", params=list(params), headers={"X-API-KEY": key}
    )
    return resp, await resp.json(content_type=None)
