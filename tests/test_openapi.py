"""The OpenAPI document and Swagger UI (contract.md 8; the document covers 3 to 7, 13, 14).

The document must be valid OpenAPI 3, list every path, parameter and limit, the key
scheme and the headers, the three media types of every listing (14) and the event
feed's cursor (13), and the server's real answers must validate against it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import Schema
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate

from app.config import Config
from app.data.fields import CommaList
from app.main import create_app
from app.web.openapi import build_document

from .support.clients import MakeClient
from .support.factories import API, KEY_1, KEY_2, sample
from .support.openapi import deref, operation

SPEC = "/api/docs/openapi.json"
CAMPAIGN = f"{API}/campaigns/{{id}}/events"
EMPLOYEE = f"{API}/victimsapi/{{id}}/events"
INSCRIPTIONS = f"{API}/course-inscriptions"
FEED = f"{API}/events"
PAGE_PARAMS = {"page", "per_page"}
PAGING = PAGE_PARAMS | {"format"}
LISTS = ("name", "last_name", "email", "department", "country", "teams", "courses")
DATES = ("from_inscription_date", "to_inscription_date", "from_due_date", "to_due_date")
AUTOMATION = "filter[automation]"
QUERY_NAMES = {
    CAMPAIGN: PAGING | {"filter[with_captcha]", "filter[type]", AUTOMATION},
    EMPLOYEE: PAGING | {AUTOMATION},
    INSCRIPTIONS: PAGING | {f"filter[{name}]" for name in (*LISTS, *DATES)},
}
FEED_NAMES = {"format", "limit", "cursor", "filter[type]", "filter[with_captcha]", AUTOMATION}
FEED_NAMES |= {"filter[from_date]", "filter[to_date]"}
MEDIA = {"application/json", "text/csv", "application/x-ndjson"}
RATE = {
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "RateLimit-Policy",
    "RateLimit",
}
PAGES = {"X-Total-Count", "X-Page", "X-Per-Page", "X-Total-Pages", "Link"}
OK_HEADERS = PAGES | RATE | {"X-Request-ID", "ETag"}


async def fetch_document(client: TestClient) -> dict[str, Any]:
    """The served document, fetched without a key."""
    response = await client.get(SPEC)
    assert response.status == 200
    assert response.content_type == "application/json"
    return await response.json()


def validator(document: dict[str, Any], schema: dict[str, Any]) -> OAS30Validator:
    """An OpenAPI 3.0 schema validator (nullable, formats) whose #/components refs resolve."""
    root = {"components": document["components"], "allOf": [schema]}
    return OAS30Validator(root, format_checker=OAS30Validator.FORMAT_CHECKER)


def body_schema(document: dict[str, Any], path: str, status: str, media: str) -> dict[str, Any]:
    response = deref(document, operation(document, path)["responses"][status])
    return response["content"][media]["schema"]


def names(headers: Any) -> set[str]:
    """Header names, compared case-insensitively as HTTP does."""
    return {name.lower() for name in headers}


def assert_valid(check: OAS30Validator, body: Any) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in check.iter_errors(body)]
    assert not errors, errors[:5]


def test_each_app_documents_each_view_once(tmp_path: Path) -> None:
    """The views carry their docs once: every app built in a process gets the same document.

    apispec turns the views' schemas into $refs in place (aiohttp-apispec issue 76), so a
    second app's document would lack their components without a copy per document.
    """
    first, second = (build_document(create_app(Config(db=str(tmp_path / "x")))) for _ in "12")
    assert first == second
    validate(second)
    for path, item in second["paths"].items():
        params = [(p["in"], p["name"]) for p in item["get"]["parameters"]]
        assert len(params) == len(set(params)), path
    assert {"CampaignEvent", "Employee", "Problem"} <= set(second["components"]["schemas"])


async def test_document_is_valid_openapi_3(client: TestClient) -> None:
    document = await fetch_document(client)
    validate(document)
    assert document["openapi"].startswith("3.0")
    assert document["info"]["title"] and document["info"]["version"]


async def test_description_states_the_contract_decisions(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=7, rate_per_second=3.0)
    text = (await fetch_document(client))["info"]["description"]
    for fact in ("X-API-KEY", "404", "`timestamp`, then `id`", "default 100", "1 to 500"):
        assert fact in text, fact
    for fact in ("burst 7", "3 per second", "defaults 20 and 10", "application/problem+json"):
        assert fact in text, fact


REPORTS = {f"{API}/campaigns", f"{API}/campaigns/{{id}}", f"{API}/victimsapi"}
CHANGES = {f"{API}/course-inscriptions/changes", f"{API}/victimsapi/changes"}
CHANGES |= {f"{API}/webhooks", f"{API}/webhooks/{{id}}/deliveries"}
REPORTS |= {f"{API}/victimsapi/{{id}}", f"{API}/courses"}  # test_reports_openapi.py
REPORTS |= {f"{API}/stats/phishing", f"{API}/stats/training"}  # test_stats.py
ACCESS = {f"{API}/key", "/api/partners/v1/companies"}  # test_access.py


async def test_every_endpoint_is_documented_and_docs_are_not(client: TestClient) -> None:
    paths = set((await fetch_document(client))["paths"])
    known = {CAMPAIGN, EMPLOYEE, INSCRIPTIONS, FEED, *REPORTS, *CHANGES}
    assert known <= paths
    assert paths <= {*known, *ACCESS, "/healthz", "/readyz"}


@pytest.mark.parametrize("path", [CAMPAIGN, EMPLOYEE, INSCRIPTIONS])
async def test_parameters_have_their_real_names_and_limits(client: TestClient, path: str) -> None:
    document = await fetch_document(client)
    params = [deref(document, p) for p in operation(document, path)["parameters"]]
    query = {p["name"]: p for p in params if p["in"] == "query"}
    assert set(query) == QUERY_NAMES[path]
    assert not any(p["required"] for p in query.values())
    assert query["page"]["schema"]["type"] == "integer"
    assert query["page"]["schema"]["minimum"] == 1
    per_page = query["per_page"]["schema"]
    assert (per_page["type"], per_page["minimum"], per_page["maximum"]) == ("integer", 1, 500)
    path_ids = [p for p in params if p["in"] == "path"]
    if "{id}" in path:
        [pid] = path_ids
        assert pid["name"] == "id" and pid["required"] is True
        assert pid["schema"]["type"] == "integer"
        assert (pid["schema"]["minimum"], pid["schema"]["maximum"]) == (1, 2**63 - 1)
    else:
        assert path_ids == []
    assert query["format"]["schema"]["enum"] == ["json", "csv", "ndjson"]


async def test_the_feed_documents_its_cursor(client: TestClient) -> None:
    """limit and cursor instead of page and per_page; X-Next-Cursor and Link on its 200."""
    document = await fetch_document(client)
    feed = operation(document, FEED)
    query = {p["name"]: p for p in feed["parameters"] if p["in"] == "query"}
    assert set(query) == FEED_NAMES
    limit = query["limit"]["schema"]
    assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 1000)
    assert query["cursor"]["schema"]["type"] == "string"
    assert "X-Next-Cursor" in query["cursor"]["description"] or "opaque" in str(query["cursor"])
    for name in ("filter[from_date]", "filter[to_date]"):
        assert query[name]["schema"]["format"] == "date"
    ok = deref(document, feed["responses"]["200"])
    assert {"X-Next-Cursor", "Link", "ETag", "Vary"} <= set(ok["headers"])
    assert not {"X-Total-Count", "X-Page", "X-Total-Pages"} & set(ok["headers"])
    assert "cursor" in feed["description"] and "exactly once" in feed["description"]
    cursor = deref(document, ok["headers"]["X-Next-Cursor"])
    assert cursor["schema"]["type"] == "string"


@pytest.mark.parametrize("path", [CAMPAIGN, EMPLOYEE, INSCRIPTIONS, FEED])
async def test_every_listing_has_three_media_types_and_406(client: TestClient, path: str) -> None:
    document = await fetch_document(client)
    responses = operation(document, path)["responses"]
    content = deref(document, responses["200"])["content"]
    assert set(content) == MEDIA
    columns = content["text/csv"]["schema"]["description"]
    assert ("`victim.email`" in columns) != (path == INSCRIPTIONS)  # both events' rows
    assert ("`campaign.id`" in columns) != (path == INSCRIPTIONS)  # merged exports tell apart
    assert content["text/csv"]["example"].endswith("\r\n")
    assert "line" in content["application/x-ndjson"]["schema"]["description"]
    problem = deref(document, responses["406"])
    assert "application/problem+json" in problem["content"]
    assert "Content-Disposition" in deref(document, responses["200"])["headers"]


async def test_filters_are_described_with_their_formats(client: TestClient) -> None:
    document = await fetch_document(client)
    campaign = {p["name"]: p for p in operation(document, CAMPAIGN)["parameters"]}
    types = campaign["filter[type]"]
    assert types["schema"]["items"]["enum"] == ["open", "click", "report", "fail"]
    assert campaign["filter[with_captcha]"]["schema"]["type"] == "boolean"
    inscriptions = {p["name"]: p for p in operation(document, INSCRIPTIONS)["parameters"]}
    for name in LISTS:
        param = inscriptions[f"filter[{name}]"]
        assert (param["style"], param["explode"]) == ("form", False), name  # a=x,y
        assert param["schema"]["type"] == "array" and param["schema"]["maxItems"] == 100
        assert "comma" in param["description"].lower() and "100" in param["description"]
    assert (types["style"], types["explode"], types["schema"]["maxItems"]) == ("form", False, 100)
    for name in DATES:
        schema = inscriptions[f"filter[{name}]"]["schema"]
        assert (schema["type"], schema["format"]) == ("string", "date"), name


async def test_what_a_schema_cannot_state_is_in_words(client: TestClient) -> None:
    """A date range in reverse and a cursor the feed never gave: 400, said in words."""
    document = await fetch_document(client)
    ranges = 0
    for item in document["paths"].values():
        for param in item["get"]["parameters"]:
            if param["name"].startswith("filter[from_"):
                high = param["name"].replace("filter[from_", "filter[to_")
                assert f"Later than {high}: 400." in param["description"], param
                ranges += 1
    assert ranges == 6  # inscription and due dates, launch dates, the feed's, the stats' windows
    cursor = next(p for p in operation(document, FEED)["parameters"] if p["name"] == "cursor")
    assert "Any value the feed did not give: 400." in cursor["description"]


async def test_the_api_key_scheme_guards_the_three_endpoints(client: TestClient) -> None:
    document = await fetch_document(client)
    schemes = document["components"]["securitySchemes"]
    [(name, scheme)] = [(n, s) for n, s in schemes.items() if s["type"] == "apiKey"]
    assert (scheme["in"], scheme["name"]) == ("header", "X-API-KEY")
    for path in (CAMPAIGN, EMPLOYEE, INSCRIPTIONS, FEED):
        security = operation(document, path).get("security", document.get("security"))
        assert security == [{name: []}], path


@pytest.mark.parametrize("path", [CAMPAIGN, EMPLOYEE, INSCRIPTIONS])
async def test_responses_and_headers_are_documented(client: TestClient, path: str) -> None:
    document = await fetch_document(client)
    responses = operation(document, path)["responses"]
    ok = deref(document, responses["200"])
    assert ok["content"]["application/json"]["schema"]["type"] == "array"
    assert set(ok["headers"]) >= OK_HEADERS
    codes = {"400", "401", "414", "429", "431", "500", "503"}
    codes |= {"404"} if "{id}" in path else set()
    for code in codes:
        problem = deref(document, responses[code])
        schema = deref(document, problem["content"]["application/problem+json"]["schema"])
        assert set(schema["required"]) == {"type", "title", "status", "detail", "request_id"}
    assert "Retry-After" in deref(document, responses["429"])["headers"]
    assert "Retry-After" in deref(document, responses["503"])["headers"]


async def test_nullable_fields_are_nullable(client: TestClient) -> None:
    schemas = (await fetch_document(client))["components"]["schemas"]
    inscription = next(s for s in schemas.values() if "due_date" in s.get("properties", {}))
    section = next(s for s in schemas.values() if "completed_at" in s.get("properties", {}))
    assert inscription["properties"]["due_date"]["nullable"] is True
    assert not inscription["properties"]["start_date"].get("nullable")
    for name in ("completed_at", "result", "status"):
        assert section["properties"][name]["nullable"] is True, name
    # A nullable choice is declared once: its values and null (a type beside them makes
    # generated clients declare the enum three times).
    assert section["properties"]["status"] == {
        "enum": ["APPROVED", "DISAPPROVED", None],
        "nullable": True,
    }
    for schema in schemas.values():
        if schema.get("type") == "object" and "properties" in schema:
            assert schema["additionalProperties"] is False


def listing_requests() -> list[tuple[str, str, str, dict[str, str]]]:
    """(documented path, URL, key, query) of real 200s for both companies."""
    data = sample()
    company_of_employee = {e["id"]: e["company_id"] for e in data["employees"]}
    company_of_campaign = {c["id"]: c["company_id"] for c in data["campaigns"]}
    busiest_campaign = Counter(e["campaign_id"] for e in data["campaign_events"])
    busiest_employee = Counter(e["employee_id"] for e in data["campaign_events"])
    requests = []
    for company, key in ((1, KEY_1), (2, KEY_2)):
        campaign = next(
            c for c, _ in busiest_campaign.most_common() if company_of_campaign[c] == company
        )
        employee = next(
            e for e, _ in busiest_employee.most_common() if company_of_employee[e] == company
        )
        for query in (
            {},
            {"filter[type]": "click,report", "filter[with_captcha]": "false"},
            {"page": "2", "per_page": "3"},
        ):
            requests.append((CAMPAIGN, f"{API}/campaigns/{campaign}/events", key, query))
        for query in ({}, {"page": "1", "per_page": "2"}):
            requests.append((EMPLOYEE, f"{API}/victimsapi/{employee}/events", key, query))
        for query in ({"per_page": "500"}, {"page": "2", "per_page": "7"}):
            requests.append((INSCRIPTIONS, INSCRIPTIONS, key, query))
        for query in ({"limit": "1000"}, {"filter[type]": "click", "limit": "5"}):
            requests.append((FEED, FEED, key, query))
    return requests


async def test_real_answers_validate_against_the_document(client: TestClient) -> None:
    document = await fetch_document(client)
    seen: Counter[str] = Counter()
    for path, url, key, query in listing_requests():
        response = await client.get(url, params=query, headers={"X-API-KEY": key})
        assert response.status == 200, (url, query)
        body = await response.json()
        assert body, (url, query)  # something to validate
        assert_valid(
            validator(document, body_schema(document, path, "200", "application/json")), body
        )
        ok = deref(document, operation(document, path)["responses"]["200"])
        documented = set(ok["headers"]) - {"Content-Disposition"}  # CSV only
        paged = path in (INSCRIPTIONS, FEED) or query.keys() & PAGE_PARAMS
        expected = documented if paged else documented - PAGES
        assert names(expected) <= names(response.headers), (url, query)
        await assert_other_formats_validate(client, document, path, url, key, query, ok)
        if path == INSCRIPTIONS:
            seen["null due"] += any(i["due_date"] is None for i in body)
            seen["null result"] += any(s["result"] is None for i in body for s in i["events"])
    assert seen["null due"] and seen["null result"]  # the nullable fields were exercised


async def assert_other_formats_validate(
    client: TestClient,
    document: dict[str, Any],
    path: str,
    url: str,
    key: str,
    query: dict[str, str],
    ok: dict[str, Any],
) -> None:
    """NDJSON lines are the documented records; the CSV header lists the documented columns."""
    headers = {"X-API-KEY": key, "Accept": "application/x-ndjson"}
    lines = (await (await client.get(url, params=query, headers=headers)).text()).splitlines()
    array = body_schema(document, path, "200", "application/json")
    check = validator(document, array["items"])
    for line in lines:
        assert_valid(check, json.loads(line))
    headers["Accept"] = "text/csv"
    response = await client.get(url, params=query, headers=headers)
    assert "Content-Disposition" in response.headers
    header = (await response.text()).split("\r\n", 1)[0]
    described = ok["content"]["text/csv"]["schema"]["description"]
    assert re.findall(r"`([^`]+)`", described) == header.split(","), path


@pytest.mark.parametrize("name", ["phishing", "training"])
async def test_the_stats_csv_columns_are_those_sent(client: TestClient, name: str) -> None:
    """Ungrouped, the columns the document lists; grouped, the group's where it says."""
    document = await fetch_document(client)
    path = f"{API}/stats/{name}"
    ok = deref(document, operation(document, path)["responses"]["200"])
    csv = ok["content"]["text/csv"]
    described = csv["schema"]["description"]
    listed = re.findall(r"`([^`]+)`", described)
    assert csv["example"] == ",".join(listed) + "\r\n"
    after = re.search(r"follows '([^']+)'", described)
    assert after is not None
    for group in (None, "department", "country", "team"):
        query = {"format": "csv", **({"group_by": group} if group else {})}
        response = await client.get(path, params=query, headers={"X-API-KEY": KEY_1})
        header = (await response.text()).split("\r\n", 1)[0].split(",")
        expected = list(listed)
        if group:
            expected.insert(expected.index(after[1]) + 1, group)
        assert header == expected, group


async def test_problem_bodies_validate_against_the_document(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=2, rate_per_second=0.001)
    document = await fetch_document(client)
    foreign = next(c["id"] for c in sample()["campaigns"] if c["company_id"] == 2)
    cases = [  # in this order: 400 and 404 spend the burst of 2, 401 spends nothing
        ("400", CAMPAIGN, f"{API}/campaigns/{foreign}/events?page=0", {"X-API-KEY": KEY_1}),
        ("404", CAMPAIGN, f"{API}/campaigns/{foreign}/events", {"X-API-KEY": KEY_1}),
        ("401", INSCRIPTIONS, INSCRIPTIONS, {}),
        ("429", INSCRIPTIONS, INSCRIPTIONS, {"X-API-KEY": KEY_1}),
    ]
    for status, path, url, headers in cases:
        response = await client.get(url, headers=headers)
        assert str(response.status) == status, (status, await response.text())
        media = response.content_type
        check = validator(document, body_schema(document, path, status, media))
        assert_valid(check, await response.json(content_type=None))
        documented = set(deref(document, operation(document, path)["responses"][status])["headers"])
        # Vary is sent with CORS origins only (test_openapi_answers checks it there)
        assert names(documented) - {"vary"} <= names(response.headers), status


async def test_every_documented_parameter_is_accepted(client: TestClient) -> None:
    """The server takes every query parameter the document lists, all at once."""
    document = await fetch_document(client)
    campaign = next(c["id"] for c in sample()["campaigns"] if c["company_id"] == 1)
    employee = next(e["id"] for e in sample()["employees"] if e["company_id"] == 1)
    examples = {"integer": "1", "boolean": "false", "string": "2025-01-01", "array": "x"}
    urls = {
        CAMPAIGN: f"{API}/campaigns/{campaign}/events",
        EMPLOYEE: f"{API}/victimsapi/{employee}/events",
        INSCRIPTIONS: INSCRIPTIONS,
        FEED: FEED,
    }
    for path, url in urls.items():
        query = {}
        for param in operation(document, path)["parameters"]:
            if param["in"] == "query" and param["name"] != "cursor":
                schema = param["schema"]
                enum = schema.get("enum") or schema.get("items", {}).get("enum")
                query[param["name"]] = enum[0] if enum else examples[schema["type"]]
        response = await client.get(url, params=query, headers={"X-API-KEY": KEY_1})
        assert response.status == 200, await response.text()
        if "X-Next-Cursor" in response.headers:  # the feed: and with the cursor it gave
            query["cursor"] = response.headers["X-Next-Cursor"]
            response = await client.get(url, params=query, headers={"X-API-KEY": KEY_1})
            assert response.status == 200, await response.text()


async def test_swagger_ui_is_served_from_the_package(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=1, rate_per_second=0.001)
    response = await client.get("/api/docs")
    assert response.status == 200 and response.content_type == "text/html"
    page = await response.text()
    assert not re.search(r"(?i)(https?:)?//[a-z0-9]", page)  # no CDN, no outside host
    assert SPEC in page
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(asset.endswith(".js") for asset in assets)
    for _ in range(3):  # no key and no rate limit on the docs
        for url in (*assets, SPEC, "/api/docs"):
            asset = await client.get(url)
            assert asset.status == 200, url
            assert "RateLimit-Limit" not in asset.headers
            if url.endswith(".js"):
                assert "javascript" in asset.content_type
                assert "SwaggerUIBundle" in await asset.text()


def test_the_list_pattern_admits_only_what_the_server_accepts(tmp_path: Path) -> None:
    """A list filter's items state contract.md 3: whatever a fuzzer draws from them, joined
    by commas as the document's style says, the server's parser accepts, value by value,
    and reads as the document says.

    The pattern is wholly a lookahead, so that Swagger UI starts a new item empty
    (tests/test_swagger_ui.py); the fuzzer reads the same rule.
    """
    document = build_document(create_app(Config(db=str(tmp_path / "x"))))
    [pattern] = {
        param["schema"]["items"]["pattern"]
        for item in document["paths"].values()
        for param in item["get"]["parameters"]
        if "pattern" in param["schema"].get("items", {})
    }
    field = Schema.from_dict({"values": CommaList()})()
    items = st.lists(st.from_regex(pattern).filter(ecma_match(pattern)), min_size=1, max_size=5)

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(items)
    def accepted(values: list[str]) -> None:
        parsed = field.load({"values": ",".join(values)})["values"]
        # A bare value is trimmed; a quoted one is its inside exactly, blank or empty too.
        meant = [v[1:-1].replace('""', '"') if v[:1] == '"' else v.strip() for v in values]
        assert parsed == meant, values

    accepted()
    for refused in ("", " ", "a,b", 'a"b', '"a', '"a"b"', "\u00a0", "\x85", "\x7f", "a\x00"):
        assert not ecma_match(pattern)(refused), refused
    for admitted in ("Sales\nEMEA", "Fr\tance", '"Night\r\nShift"', "a\x7f", '""', '" a"'):
        assert ecma_match(pattern)(admitted), admitted


def ecma_match(pattern: str) -> Any:
    """The pattern as JSON Schema reads it (ECMA-262: `$` is the end of the text)."""
    compiled = re.compile(pattern.replace("$", r"\Z"))
    return lambda text: compiled.search(text) is not None
