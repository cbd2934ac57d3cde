"""The OpenAPI document against what the server sends, operation by operation (contract.md 8).

Each operation's example request (app/web/examples.json, on the sample with the examples'
data) goes to the real app, and what comes back is what the document says: a 304's
headers, the 404 of an X-Company-ID the key does not read, the CSV header row, an empty
parameter refused, and the Vary of a server with CORS origins.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from openapi_examples import add_example_data
from openapi_schema_validator import OAS30Validator

from .support.clients import MakeClient
from .support.factories import KEY_1, KEY_PARTNER
from .support.openapi import deref

SPEC = "/api/docs/openapi.json"
REQUEST = re.compile(r"GET (/api/\S+) with (company 1|the partner)'s sample key")
SENT_WITH = {"company 1": KEY_1, "the partner": KEY_PARTNER}
Example = tuple[str, dict[str, Any], str, str]  # documented path, operation, URL, key


async def examples(
    make_client: MakeClient, sample_db: Path, **settings: Any
) -> tuple[TestClient, dict[str, Any], list[Example]]:
    """A client of the examples' data, the document it serves, and each operation's example
    request."""
    add_example_data(sample_db)
    client = await make_client(db=str(sample_db), **settings)
    document = await (await client.get(SPEC)).json()
    requests = []
    for path, item in document["paths"].items():
        if path.startswith("/api/"):
            ok = item["get"]["responses"]["200"]["content"]["application/json"]
            match = REQUEST.fullmatch(ok["examples"]["sample"]["summary"])
            assert match, path
            requests.append((path, item["get"], match[1], SENT_WITH[match[2]]))
    assert len(requests) == 17
    return client, document, requests


def names(headers: Any) -> set[str]:
    """Header names, compared case-insensitively as HTTP does."""
    return {name.lower() for name in headers}


def valid(document: dict[str, Any], schema: dict[str, Any], value: Any) -> bool:
    """Whether the value is one the document's schema admits (OpenAPI 3.0, formats)."""
    root = {"components": document["components"], "allOf": [schema]}
    check = OAS30Validator(root, format_checker=OAS30Validator.FORMAT_CHECKER)
    return check.is_valid(value)


async def test_a_304_carries_the_documented_headers(
    make_client: MakeClient, sample_db: Path
) -> None:
    """Of the headers the document knows, a 304 sends exactly those it documents."""
    client, document, requests = await examples(make_client, sample_db)
    known = names(document["components"]["headers"])
    checked = 0
    for path, op, url, key in requests:
        if "304" in op["responses"]:
            etag = (await client.get(url, headers={"X-API-KEY": key})).headers["ETag"]
            again = await client.get(url, headers={"X-API-KEY": key, "If-None-Match": etag})
            assert again.status == 304, path
            documented = names(deref(document, op["responses"]["304"])["headers"])
            assert names(again.headers) & known == documented, path
            checked += 1
    assert checked == 16  # every operation but /key


async def test_a_company_the_key_does_not_read_is_a_documented_404(
    make_client: MakeClient, sample_db: Path
) -> None:
    """Another company's id from a company's key, or a partner naming a company not its own:
    the 404 every /api/companies/ operation documents, its problem body and headers."""
    client, document, requests = await examples(make_client, sample_db)
    checked = 0
    for path, op, url, _ in requests:
        if path.startswith("/api/companies/"):
            for key, company in ((KEY_1, "2"), (KEY_PARTNER, "999")):
                headers = {"X-API-KEY": key, "X-Company-ID": company}
                response = await client.get(url, headers=headers)
                assert response.status == 404, (url, company)
                assert "404" in op["responses"], path
                problem = deref(document, op["responses"]["404"])
                schema = problem["content"][response.content_type]["schema"]
                assert valid(document, schema, await response.json(content_type=None)), path
                # Vary is sent with CORS origins only (test_vary_names_what_it_sends_with_cors)
                assert names(problem["headers"]) - {"vary"} <= names(response.headers), path
            checked += 1
    assert checked == 16


async def test_every_csv_header_row_is_the_documented_columns(
    make_client: MakeClient, sample_db: Path
) -> None:
    """The columns the text/csv description lists, and its example, are the header row sent
    (the stats' ungrouped: tests/test_openapi.py places the group's column)."""
    client, _, requests = await examples(make_client, sample_db)
    checked = 0
    for path, op, url, key in requests:
        csv = op["responses"]["200"]["content"].get("text/csv")
        if csv:
            plain = url.split("?")[0]  # an example's group_by would add its column
            response = await client.get(plain, params={"format": "csv"}, headers={"X-API-KEY": key})
            assert response.status == 200, path
            header = (await response.text()).split("\r\n", 1)[0]
            assert re.findall(r"`([^`]+)`", csv["schema"]["description"]) == header.split(","), path
            assert csv["example"] == header + "\r\n", path
            checked += 1
    assert checked == 14


async def test_a_parameter_sent_empty_is_refused_as_documented(
    make_client: MakeClient, sample_db: Path
) -> None:
    """`name=` is 400 exactly when the parameter's schema refuses the empty value."""
    client, document, requests = await examples(make_client, sample_db)
    refusals = 0
    for path, op, url, key in requests:
        for param in op["parameters"]:
            if param["in"] == "query":
                schema = param["schema"]
                empty = [""] if schema.get("type") == "array" else ""  # form style: one item
                plain = url.split("?")[0]
                response = await client.get(f"{plain}?{param['name']}=", headers={"X-API-KEY": key})
                assert response.status in (200, 400), (path, param["name"])
                refused = response.status == 400
                assert refused != valid(document, schema, empty), (path, param["name"])
                refusals += refused
    assert refusals > 100


async def test_vary_names_what_it_sends_with_cors(make_client: MakeClient, sample_db: Path) -> None:
    """With CORS origins configured, the Vary header each answer documents names each value
    sent: a listing's (the format's and Origin), /key's and a problem's (Origin alone)."""
    client, document, requests = await examples(
        make_client, sample_db, cors_origins="https://dash.example"
    )

    def documented(response: dict[str, Any]) -> set[str]:
        vary = deref(document, deref(document, response)["headers"]["Vary"])
        said = " ".join(re.findall(r"`([^`]+)`", vary["description"]))
        return set(re.findall(r"[\w-]+", said))

    checked = 0
    for path, op, url, key in requests:
        for status, sent_key in ((200, key), (401, "")):  # the answer, and a problem
            headers = {"X-API-KEY": sent_key, "Origin": "https://dash.example"}
            response = await client.get(url, headers=headers)
            assert response.status == status, (path, status)
            lines = response.headers.getall("Vary")
            sent = {value.strip() for line in lines for value in line.split(",")}
            said = documented(op["responses"][str(status)])
            assert "Origin" in sent and sent <= said, (path, status, sent)
            checked += 1
    assert checked == 2 * 17
