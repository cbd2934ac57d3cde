"""What the OpenAPI document tells a reader (contract.md 8; issue 12 item 6).

Every operation has a description and a response example, and each example is the very
answer the server gives its documented request on the sample database, so an example
cannot go stale; scripts/openapi_examples.py regenerates them (app/web/examples.json).
Every path `id` is described. No query parameter carries an example or
a default, which Swagger UI's Try it out would send: the events endpoints' whole-array
mode (contract.md 4) must stay reachable from the UI.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from openapi_examples import add_example_data
from openapi_schema_validator import OAS30Validator

from .support.clients import MakeClient
from .support.factories import KEY_1, KEY_PARTNER
from .support.servers import run_python

SPEC = "/api/docs/openapi.json"
REQUEST = re.compile(r"^GET (/api/\S+) with (company 1|the partner)'s sample key$")
SENT_WITH = {"company 1": KEY_1, "the partner": KEY_PARTNER}


async def document(client: TestClient) -> dict[str, Any]:
    return await (await client.get(SPEC)).json()


def operations(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    ops = [(path, item["get"]) for path, item in doc["paths"].items() if "get" in item]
    assert len(ops) >= 3
    return ops


async def test_every_operation_is_described(client: TestClient) -> None:
    for path, op in operations(await document(client)):
        assert op["summary"] and len(op["description"]) > len(op["summary"]), path
        assert op["description"] != op["summary"], path


async def test_every_example_is_what_the_server_answers(
    make_client: MakeClient, sample_db: Path
) -> None:
    """Each documented request, sent with company 1's key to the sample data (and the
    examples' webhook subscription and key dates): same body, /key's included."""
    add_example_data(sample_db)
    client = await make_client(db=str(sample_db))
    doc = await document(client)
    for path, op in operations(doc):
        ok = op["responses"]["200"]["content"]["application/json"]
        assert ok.get("examples"), path
        schema = {"components": doc["components"], "allOf": [ok["schema"]]}
        check = OAS30Validator(schema, format_checker=OAS30Validator.FORMAT_CHECKER)
        for name, example in ok["examples"].items():
            match = REQUEST.fullmatch(example["summary"])
            assert match, (path, name, example["summary"])
            url = match.group(1)
            assert re.fullmatch(path.replace("{id}", "[0-9]+"), url.split("?")[0]), url
            response = await client.get(url, headers={"X-API-KEY": SENT_WITH[match.group(2)]})
            assert response.status == 200, (url, await response.text())
            actual = await response.json()
            assert actual, url  # an example shows data
            stale = f"{path}: the example of {url} is stale; the server now answers\n"
            assert example["value"] == actual, stale + json.dumps(actual, ensure_ascii=False)
            assert not list(check.iter_errors(example["value"])), path


async def test_path_ids_are_described(client: TestClient) -> None:
    described = 0
    for path, op in operations(await document(client)):
        for param in op["parameters"]:
            if param["in"] == "path":
                assert "404" in param["description"], path
                assert re.search(r"campaign|employee|webhook", param["description"]), path
                described += 1
    assert described >= 2


async def test_try_it_out_sends_only_what_the_user_types(client: TestClient) -> None:
    """No parameter carries an example or a default; Swagger UI would fill them in."""
    for path, op in operations(await document(client)):
        for param in op["parameters"]:
            if param["in"] == "query":
                for node in (param, param["schema"], param["schema"].get("items", {})):
                    assert not {"example", "examples", "default"} & set(node), (path, param)


async def test_the_events_endpoints_say_when_they_paginate(client: TestClient) -> None:
    for path, op in operations(await document(client)):
        if path.endswith("/{id}/events"):
            assert "whole array" in op["description"], path
            page = next(p for p in op["parameters"] if p["name"] == "page")
            assert "whole array" in page["description"], path


@pytest.mark.system  # runs the script, which serves the sample on 127.0.0.1
def test_the_script_finds_every_example_fresh() -> None:
    """scripts/openapi_examples.py regenerates examples.json: nothing to change today."""
    done = run_python("scripts/openapi_examples.py", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every example is what the sample answers" in done.stdout
