"""The reports in the OpenAPI document (contract.md 8 for the paths of 11 and 12).

Every report path is documented with its real parameters and limits, its response
schema (an array with the page headers for the lists, one object for the reports on
one campaign or employee), its errors; the server's real answers for both companies
validate against it, and every documented parameter is accepted.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from openapi_schema_validator import OAS30Validator

from .support.factories import API, KEY_1, KEYS, sample
from .support.openapi import deref, operation

SPEC = "/api/docs/openapi.json"
PAGING = {"page", "per_page", "format"}  # every listing takes format (contract.md 14)
PERSON = {f"filter[{n}]" for n in ("name", "last_name", "email", "department", "country")}
PERSON |= {"filter[teams]"}
DATES = {"filter[from_launch_date]", "filter[to_launch_date]"}
AUTOMATION = "filter[automation]"
QUERIES = {
    f"{API}/campaigns": PAGING | DATES | {"filter[title]", "filter[with_captcha]", AUTOMATION},
    f"{API}/campaigns/{{id}}": {"filter[with_captcha]", "format", AUTOMATION},  # format: json
    f"{API}/victimsapi": PAGING
    | PERSON
    | {"filter[min_clicked]", "filter[min_failed]"}
    | {AUTOMATION},
    f"{API}/victimsapi/{{id}}": {"format", AUTOMATION},
    f"{API}/courses": PAGING | {"filter[title]"},
}
PAGE_HEADERS = {"X-Total-Count", "X-Page", "X-Per-Page", "X-Total-Pages", "Link"}
NULLABLE = {
    "open_rate", "click_rate", "report_rate", "fail_rate", "median_seconds_to_first_click",
    "median_seconds_to_first_report", "last_event_at", "completion_rate", "average_result",
}  # fmt: skip


@pytest.fixture
async def document(client: TestClient) -> dict[str, Any]:
    return await (await client.get(SPEC)).json()


@pytest.mark.parametrize("path", list(QUERIES))
def test_parameters_and_responses(document: dict[str, Any], path: str) -> None:
    op = operation(document, path)
    params = [deref(document, p) for p in op["parameters"]]
    query = {p["name"]: p for p in params if p["in"] == "query"}
    assert set(query) == QUERIES[path]
    for name in ("filter[min_clicked]", "filter[min_failed]"):
        if name in query:
            schema = query[name]["schema"]
            assert (schema["type"], schema["minimum"]) == ("integer", 0)
    if AUTOMATION in query:  # the three values, an example, the rule in words
        assert query[AUTOMATION]["schema"]["enum"] == [
            "include", "exclude_automated", "exclude_suspected"
        ]  # fmt: skip
        assert "Example: filter[automation]=exclude_suspected." in query[AUTOMATION]["description"]
        assert "leaves every count, rate, median" in query[AUTOMATION]["description"]
    if "{id}" in path:  # one object: JSON only, csv or ndjson a 406 that points to the list
        assert query["format"]["schema"]["enum"] == ["json"]
    for name in DATES & set(query):
        assert query[name]["schema"]["format"] == "date"
    [path_id] = [p for p in params if p["in"] == "path"] or [None]
    assert (path_id is not None) == ("{id}" in path)
    ok = deref(document, op["responses"]["200"])
    schema = ok["content"]["application/json"]["schema"]
    many = "{id}" not in path
    assert (schema.get("type") == "array") == many
    assert (set(ok["headers"]) >= PAGE_HEADERS) == many
    codes = {"400", "401", "429", "500"} | ({"404"} if path_id else set())
    assert codes <= set(op["responses"])
    assert op["security"] and op["description"] and op["summary"]


def test_every_figure_is_described_and_the_nullable_ones_say_so(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    seen = set()
    names = ("CampaignReport", "CampaignSummary", "Department", "Employee", "Course")
    for name in (*names, "Phishing", "Training"):
        schema = schemas[name]
        for field, prop in schema["properties"].items():
            prop = deref(document, prop)
            assert prop.get("nullable", False) == (field in NULLABLE), (name, field)
            if field in NULLABLE:
                seen.add(field)
                assert "null" in prop["description"], (name, field)
    assert seen == NULLABLE


def requests() -> list[tuple[str, str, str, dict[str, str]]]:
    """(documented path, URL, key, query) of real 200s of both companies."""
    data = sample()
    out = []
    for company, key in KEYS.items():
        campaign = next(c["id"] for c in data["campaigns"] if c["company_id"] == company)
        person = next(e["id"] for e in data["employees"] if e["company_id"] == company)
        out += [
            (f"{API}/campaigns", f"{API}/campaigns", key, {}),
            (f"{API}/campaigns", f"{API}/campaigns", key, {"filter[with_captcha]": "false"}),
            (f"{API}/campaigns/{{id}}", f"{API}/campaigns/{campaign}", key, {}),
            (f"{API}/victimsapi", f"{API}/victimsapi", key, {"per_page": "500"}),
            (f"{API}/victimsapi/{{id}}", f"{API}/victimsapi/{person}", key, {}),
            (f"{API}/courses", f"{API}/courses", key, {}),
        ]
    return out


async def test_real_answers_validate_against_the_document(
    client: TestClient, document: dict[str, Any]
) -> None:
    for path, url, key, query in requests():
        response = await client.get(url, params=query, headers={"X-API-KEY": key})
        assert response.status == 200, (url, await response.text())
        body = await response.json()
        assert body
        ok = deref(document, operation(document, path)["responses"]["200"])
        schema = ok["content"]["application/json"]["schema"]
        root = {"components": document["components"], "allOf": [schema]}
        check = OAS30Validator(root, format_checker=OAS30Validator.FORMAT_CHECKER)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(body)]
        assert not errors, (url, errors[:5])
        # Content-Disposition is documented for CSV answers only (contract.md 14).
        documented = {h.lower() for h in ok["headers"]} - {"content-disposition"}
        assert documented <= {h.lower() for h in response.headers}, url


async def test_every_documented_parameter_is_accepted(
    client: TestClient, document: dict[str, Any]
) -> None:
    values = {"integer": "1", "boolean": "false", "string": "2025-01-01", "array": "x"}
    for path in QUERIES:
        url = path.replace("{id}", "1")
        query = {}
        for param in operation(document, path)["parameters"]:
            if param["in"] == "query":
                schema = param["schema"]
                query[param["name"]] = (
                    schema["enum"][0] if "enum" in schema else values[schema["type"]]
                )
        response = await client.get(url, params=query, headers={"X-API-KEY": KEY_1})
        assert response.status == 200, (url, await response.text())
