"""The oracle of the inscriptions endpoint, built from fixtures/sample.json in plain Python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient

from .factories import API, KEY_1, by_id, sample, team_names_by_employee

URL = f"{API}/course-inscriptions"
Filters = dict[str, Any]  # list filter -> list of raw values; date filter -> "YYYY-MM-DD"
Pair = tuple[dict[str, Any], dict[str, Any]]  # (employee fixture record, expected JSON)


def oracle_pairs(company: int) -> list[Pair]:
    """The company's inscriptions as (employee, expected record), in contract order."""
    data = sample()
    employees, courses = by_id("employees"), by_id("courses")
    teams = team_names_by_employee(data)
    results = {(r["inscription_id"], r["section_id"]): r for r in data["section_results"]}
    own = [i for i in data["inscriptions"] if employees[i["employee_id"]]["company_id"] == company]
    pairs = []
    for ins in sorted(own, key=lambda i: (i["start_date"], i["id"])):
        emp = employees[ins["employee_id"]]
        sections = sorted(
            (s for s in data["course_sections"] if s["course_id"] == ins["course_id"]),
            key=lambda s: (s["position"], s["id"]),
        )
        events = []
        for section in sections:
            result = results.get((ins["id"], section["id"]), {})
            events.append(
                {
                    "title": section["title"],
                    "section_type": section["section_type"],
                    "completed_at": result.get("completed_at"),
                    "result": result.get("result"),
                    "status": result.get("status"),
                }
            )
        record = {
            "victim_name": f"{emp['first_name']} {emp['last_name']}",
            "victim_department": emp["department"],
            "course_title": courses[ins["course_id"]]["title"],
            "start_date": ins["start_date"],
            "due_date": ins["due_date"],
            "status": ins["status"],
            "victim_email": emp["email"],
            "groups": [{"name": n} for n in sorted(teams.get(emp["id"], []))],
            "victim_country": emp["country"],
            "events": events,
        }
        pairs.append((emp, record))
    return pairs


LIST_VALUES: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[str]]] = {
    "name": lambda emp, rec: [emp["first_name"]],
    "last_name": lambda emp, rec: [emp["last_name"]],
    "email": lambda emp, rec: [emp["email"]],
    "department": lambda emp, rec: [emp["department"]],
    "country": lambda emp, rec: [emp["country"]],
    "teams": lambda emp, rec: [g["name"] for g in rec["groups"]],
    "courses": lambda emp, rec: [rec["course_title"]],
}


def matches(emp: dict[str, Any], rec: dict[str, Any], filters: Filters) -> bool:
    """contract.md 3: whole values, any case, OR inside a filter, AND across filters."""
    for name, wanted in filters.items():
        if name in LIST_VALUES:
            have = {v.casefold() for v in LIST_VALUES[name](emp, rec)}
            if not have & {w.casefold() for w in wanted}:
                return False
            continue
        field = "start_date" if name.endswith("inscription_date") else "due_date"
        value = rec[field]
        if value is None:
            return False
        if name.startswith("from_") and value < wanted:
            return False
        if name.startswith("to_") and value > wanted:
            return False
    return True


def expected(company: int, filters: Filters | None = None) -> list[dict[str, Any]]:
    """The oracle: the company's records that pass the filters, in contract order."""
    return [rec for emp, rec in oracle_pairs(company) if matches(emp, rec, filters or {})]


def query_params(filters: Filters) -> list[tuple[str, str]]:
    """The query string for the filters; a value holding a comma is double-quoted."""
    params = []
    for name, value in filters.items():
        if isinstance(value, list):
            value = ",".join(f'"{v}"' if "," in v else v for v in value)
        params.append((f"filter[{name}]", value))
    return params


async def get(
    client: TestClient, params: list[tuple[str, str]], key: str = KEY_1
) -> ClientResponse:
    """One request to the endpoint with the company's key."""
    return await client.get(URL, params=params, headers={"X-API-KEY": key})


async def get_all(client: TestClient, filters: Filters, key: str = KEY_1) -> list[Any]:
    """The whole filtered list in one page (per_page 500); asserts a 200."""
    response = await get(client, [*query_params(filters), ("per_page", "500")], key)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == "application/json; charset=utf-8"
    return await response.json()
