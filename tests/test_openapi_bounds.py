"""Every operation at the edges the OpenAPI document states (contract.md 3, 8).

The values come from the served document's own schemas: a value a parameter's schema
allows is never a 400 (but for a rule its description states in words), one it forbids
is a 400 whose `errors` names the parameter. schemathesis (test_fuzz.py) draws at random;
these are the edges: minimum and maximum and one past them, every enum value, `maxItems`
values and one more, the first and last dates, path ids at their bounds, and names the
document does not list. Then the statuses a request meets whatever the operation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from aiohttp.test_utils import TestClient
from openapi_schema_validator import OAS30Validator

from .support.clients import raw_request
from .support.factories import KEY_1, KEY_PARTNER, sample
from .support.openapi import deref
from .support.stores import on_both_stores

store_kind = on_both_stores()  # the edges of ids, pages and dates on both stores
STORE_READS_ONLY = True

SPEC = "/api/docs/openapi.json"
# The refusals of schema-valid values that a description states in words (test_fuzz.py):
# what the 400 says, and what the parameter's description says.
STATED = {
    "is later than filter[": "han filter[",  # "Later than" on from_*, "Earlier than" on to_*
    "Not a cursor this feed gave.": "Any value the feed did not give: 400.",
    "more than 120 buckets": "more than 120 buckets: 400",
}
LIST_VALUES = ("x", '""', '" "', '"a,b"', '"a""b"', "a b", "Sales\nEMEA", "\U0001f600", "%&=+")
LIST_VALUES += ('a"b', "a\x00", " ", '"a', "a,", "a,,b", '"a"b"')


def bounds(schema: dict[str, Any]) -> Iterator[tuple[str, bool]]:
    """(value as sent, whether the schema allows it) at the schema's edges."""
    kind = schema.get("type")
    if "enum" in schema:
        yield from ((value, True) for value in schema["enum"])
        yield from (("bogus", False), ("", False))
    elif kind == "integer":
        low, high = schema["minimum"], schema["maximum"]
        yield from ((str(low), True), (str(high), True), (str(low - 1), False))
        yield from ((str(high + 1), False), ("1.0", False), ("1e3", False), ("", False))
    elif kind == "boolean":
        yield from (("true", True), ("false", True), ("1", False), ("", False))
    elif schema.get("format") == "date":
        yield from (("0001-01-01", True), ("9999-12-31", True), ("2024-02-29", True))
        yield from (("2023-02-29", False), ("2024-1-01", False), ("", False))
    elif kind == "string":
        yield "", schema.get("minLength", 0) == 0
    elif kind == "array":
        items, most = schema["items"], schema["maxItems"]
        if "enum" in items:
            yield from ((value, True) for value in items["enum"])
            first = items["enum"][0]
            yield from ((",".join(items["enum"]), True), (f"{first},bogus", False))
            yield from ((",".join([first] * most), True), (",".join([first] * (most + 1)), False))
            yield from ((f"{first},,{first}", False), ("", False))
        else:
            admits = re.compile(items["pattern"].replace("$", r"\Z")).search
            yield from ((value, admits(value) is not None) for value in LIST_VALUES)
            yield from ((",".join(["v"] * most), True), (",".join(["v"] * (most + 1)), False))


async def documented_operations(client: TestClient) -> tuple[dict[str, Any], list[Any]]:
    """The document, and (path, operation, URL, key) of each operation, ids of company 1."""
    document = await (await client.get(SPEC)).json()
    campaign = next(c["id"] for c in sample()["campaigns"] if c["company_id"] == 1)
    employee = next(e["id"] for e in sample()["employees"] if e["company_id"] == 1)
    operations = []
    for path, item in document["paths"].items():
        if path.startswith("/api/"):
            url = path.replace("{id}", str(employee if "victims" in path else campaign))
            key = KEY_PARTNER if path.startswith("/api/partners/") else KEY_1
            operations.append((path, item["get"], url, key))
    assert len(operations) == 17
    return document, operations


def refused_for(response_body: dict[str, Any], name: str) -> list[str]:
    return list(response_body.get("errors", {}).get(name, []))


async def test_every_query_parameter_at_its_documented_edges(client: TestClient) -> None:
    """Allowed: no 400 (a window of over 120 buckets aside, which its description states);
    forbidden: 400 naming the parameter. Names the document does not list: 400 naming them."""
    _, operations = await documented_operations(client)
    sent = 0
    for path, op, url, key in operations:
        for param in (p for p in op["parameters"] if p["in"] == "query"):
            name = param["name"]
            for value, allowed in bounds(param["schema"]):
                query = f"{quote(name, safe='')}={quote(value, safe='')}"
                response = await client.get(f"{url}?{query}", headers={"X-API-KEY": key})
                body = await response.json() if response.status == 400 else {}
                messages = refused_for(body, name)
                case = (path, name, value, response.status, body.get("errors"))
                if allowed and response.status == 400:
                    every = " ".join(m for listed in body["errors"].values() for m in listed)
                    said = [STATED[why] for why in STATED if why in every]
                    assert said and said[0] in param["description"], case
                elif not allowed:
                    assert response.status == 400 and messages, case
                sent += 1
        for name in ("bogus", "filter[bogus]", "Page", "filter"):
            response = await client.get(f"{url}?{quote(name)}=1", headers={"X-API-KEY": key})
            assert response.status == 400, (path, name)
            assert "Unknown parameter" in refused_for(await response.json(), name)[0], (path, name)
    assert sent > 900


async def test_every_path_id_at_its_documented_edges(client: TestClient) -> None:
    """The bounds of `{id}` are answered (200 or the 404 of no such record); past them 400."""
    _, operations = await documented_operations(client)
    checked = 0
    for path, op, _, key in operations:
        [param] = [p for p in op["parameters"] if p["in"] == "path"] or [None]
        if param is None:
            continue
        low, high = param["schema"]["minimum"], param["schema"]["maximum"]
        for value, allowed in ((low, True), (high, True), (low - 1, False), (high + 1, False)):
            url = path.replace("{id}", str(value))
            response = await client.get(url, headers={"X-API-KEY": key})
            assert (response.status != 400) == allowed, (path, value)
            assert str(response.status) in op["responses"], (path, value)
            if not allowed:
                assert refused_for(await response.json(), "id"), (path, value)
            checked += 1
    assert checked == 4 * 5


async def test_an_expectation_not_met_is_documented_on_every_operation(
    client: TestClient,
) -> None:
    """`Expect` other than 100-continue is 417 before anything else (docs/interface.md,
    Checks): each operation lists it, with the problem body and headers sent."""
    document, operations = await documented_operations(client)
    for path, op, url, key in operations:
        head = f"GET {url} HTTP/1.1\r\nX-API-KEY: {key}\r\nExpect: bogus"
        status, headers, body = await raw_request(client, head.encode())
        assert status == 417, path
        assert "417" in op["responses"], path
        problem = deref(document, op["responses"]["417"])
        schema = problem["content"][headers["content-type"].split(";")[0]]["schema"]
        root = {"components": document["components"], "allOf": [schema]}
        assert OAS30Validator(root).is_valid(json.loads(body)), path
        assert {h.lower() for h in problem["headers"]} - {"vary"} <= set(headers), path
