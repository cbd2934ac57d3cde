"""One error shape for every status: contract.md 5 (problem+json bodies) and 7 (X-Request-ID).

Every error path the service has is driven through the real app and checked with the
shared ``assert_problem``: 400, 401, 404, 405, 429, a real internal fault (500), and the
requests aiohttp's own HTTP parser refuses before any handler runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from http import HTTPStatus
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support.clients import MakeClient, raw_request
from .support.factories import API, KEY_1, PROBLEM_KEYS, TITLES, assert_problem
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

EVENTS = f"{API}/campaigns/1/events"
AUTH = {"X-API-KEY": KEY_1}


async def test_400_bad_path_id_names_id(client: TestClient) -> None:
    """A malformed id is a 400 whose errors point at `id`."""
    body = await assert_problem(await client.get(f"{API}/campaigns/abc/events", headers=AUTH), 400)
    assert list(body["errors"]) == ["id"] and body["errors"]["id"]


async def test_400_lists_every_offending_parameter(client: TestClient) -> None:
    """All bad filters are reported at once, one entry each."""
    params = {"filter[type]": "opened", "filter[with_captcha]": "maybe"}
    body = await assert_problem(await client.get(EVENTS, params=params, headers=AUTH), 400)
    assert set(body["errors"]) == set(params)
    assert all(isinstance(m, str) and m for v in body["errors"].values() for m in v)


async def test_401_without_key(client: TestClient) -> None:
    """A missing key is the 401 problem."""
    await assert_problem(await client.get(EVENTS), 401)


@pytest.mark.parametrize("path", ["/nope", f"{API}/nope", f"{API}/campaigns/999999/events"])
async def test_404_unknown_path_or_record(client: TestClient, path: str) -> None:
    """Unknown paths (no key needed) and unknown records share the 404 shape."""
    await assert_problem(await client.get(path, headers=AUTH), 404)
    if "999999" not in path:
        await assert_problem(await client.get(path), 404)


@pytest.mark.parametrize("headers", [AUTH, {}])
async def test_405_names_the_allowed_methods(client: TestClient, headers: dict[str, str]) -> None:
    """A wrong method is 405 with Allow, decided before the key is looked at."""
    resp = await client.post(EVENTS, headers=headers)
    await assert_problem(resp, 405)
    assert "GET" in [m.strip() for m in resp.headers["Allow"].split(",")]


async def test_429_with_retry_after(make_client: MakeClient) -> None:
    """The request over the key's limit is 429 with a whole-second Retry-After."""
    client = await make_client(rate_burst=1, rate_per_second=0.001)
    assert (await client.get(EVENTS, headers=AUTH)).status == 200
    resp = await client.get(EVENTS, headers=AUTH)
    await assert_problem(resp, 429)
    assert re.fullmatch(r"[0-9]+", resp.headers["Retry-After"])
    assert int(resp.headers["Retry-After"]) >= 1


async def test_429_for_repeated_authentication_failures(make_client: MakeClient) -> None:
    """Guessing keys from one address meets the same 429 shape."""
    client = await make_client(auth_failures_per_minute=1)
    await assert_problem(await client.get(EVENTS, headers={"X-API-KEY": "guess-1"}), 401)
    resp = await client.get(EVENTS, headers={"X-API-KEY": "guess-2"})
    await assert_problem(resp, 429)
    assert int(resp.headers["Retry-After"]) >= 1


@pytest.mark.writes
async def test_500_on_a_real_fault_hides_internals_and_logs_them(
    client: TestClient, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Data no writer leaves (a feed secret that is no hex) breaks the code reading it: a
    bare 500 body; the details go to the log with the id. (A table gone is a 503: the
    database cannot answer, test_health.)"""
    assert (await client.get(EVENTS, headers=AUTH)).status == 200
    await store.execute("UPDATE meta SET value = 'not hex' WHERE key = 'cursor_secret'")
    caplog.set_level(logging.ERROR)
    feed = f"{API}/events?limit=3"  # signs its cursor with the secret
    resp = await client.get(feed, headers={**AUTH, "X-Request-ID": "fault-probe-7"})
    body = await assert_problem(resp, 500)
    assert body["request_id"] == "fault-probe-7"
    text = json.dumps(body)
    for leak in ("not hex", "cursor_secret", "fromhex", "ValueError", "Traceback"):
        assert leak not in text, text
    logged = [r for r in caplog.records if r.exc_info and "fault-probe-7" in r.getMessage()]
    assert logged, [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("path", [EVENTS, "/nope"])
async def test_sane_request_id_is_echoed(client: TestClient, path: str) -> None:
    """A sane client id is kept, in the header of any response and in error bodies."""
    given = "client-42.a:b/c"
    resp = await client.get(path, headers={**AUTH, "X-Request-ID": given})
    assert resp.headers["X-Request-ID"] == given
    if resp.status >= 400:
        assert (await assert_problem(resp, 404))["request_id"] == given


@pytest.mark.parametrize("given", ["x" * 129, "has space", "a,b;c"])
async def test_insane_request_id_is_replaced(client: TestClient, given: str) -> None:
    """An over-long or unsafe id is never reflected; a generated one takes its place."""
    resp = await client.get("/nope", headers={"X-Request-ID": given})
    body = await assert_problem(resp, 404)
    generated = resp.headers["X-Request-ID"]
    assert generated != given and given not in json.dumps(body)
    assert re.fullmatch(r"[A-Za-z0-9._:@/+=-]{1,128}", generated)


# ---- requests refused by the HTTP parser ---------------------------------------------


def assert_raw_problem(status: int, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    """The checks of assert_problem, on a raw response."""
    assert headers["content-type"] == "application/problem+json; charset=utf-8", body
    problem = json.loads(body)
    assert set(problem) == PROBLEM_KEYS, problem
    assert problem["type"] == "about:blank" and problem["status"] == status
    assert problem["title"] == TITLES.get(status, HTTPStatus(status).phrase)
    assert problem["request_id"] == headers["x-request-id"]
    assert isinstance(problem["detail"], str) and problem["detail"]
    return problem


KEY = b"\r\nX-API-KEY: " + KEY_1.encode()
INSCRIPTIONS = API.encode() + b"/course-inscriptions"
RAW = {
    "raw-utf8-query": b"GET " + INSCRIPTIONS + b"?filter[name]=jos\xc3\xa9 HTTP/1.1" + KEY,
    "latin1-query": b"GET " + INSCRIPTIONS + b"?filter[name]=jos\xe9 HTTP/1.1" + KEY,
    "long-request-line": b"GET /" + b"a" * 20_000 + b" HTTP/1.1" + KEY,
    "long-header": b"GET " + INSCRIPTIONS + b" HTTP/1.1" + KEY + b"\r\nX-Pad: " + b"p" * 20_000,
}


@pytest.mark.parametrize("method", [b"FOO", b"get", b"Get"])
async def test_a_method_the_parser_does_not_know_is_501(client: TestClient, method: bytes) -> None:
    """RFC 9110 9.1: an unrecognised method is 501 (methods are case-sensitive), not a
    request that could not be parsed; a known one not served here stays 405."""
    status, headers, body = await raw_request(client, method + b" " + INSCRIPTIONS + b" HTTP/1.1")
    assert status == 501
    assert "GET and HEAD" in assert_raw_problem(status, headers, body)["detail"]
    status, headers, body = await raw_request(client, b"PROPFIND " + INSCRIPTIONS + b" HTTP/1.1")
    assert (status, headers["allow"]) == (405, "GET,HEAD")


async def test_a_connect_is_404_not_a_refused_body(client: TestClient) -> None:
    """aiohttp counts what follows a CONNECT as its body; it carries none of its own, so
    it is no refused body. Its target names a host and port (RFC 9110 9.3.6), which no
    resource has: 404, then the connection closes."""
    for path in (b"/nope", INSCRIPTIONS, b"example.com:443"):
        status, headers, body = await raw_request(client, b"CONNECT " + path + b" HTTP/1.1")
        assert status == 404 and headers["connection"] == "close"
        assert_raw_problem(status, headers, body)


@pytest.mark.parametrize("path", [INSCRIPTIONS, b"/nope"])
@pytest.mark.parametrize("expect", [b"bogus", b"100-continue\r\nExpect: bogus"])
async def test_an_expectation_not_met_is_a_problem(
    client: TestClient, path: bytes, expect: bytes
) -> None:
    """aiohttp refuses an Expect other than 100-continue before any middleware runs: the
    417 is in the one error shape too, with the request id, and closes."""
    status, headers, body = await raw_request(
        client, b"GET " + path + b" HTTP/1.1" + KEY + b"\r\nExpect: " + expect
    )
    assert (status, headers["connection"]) == (417, "close")
    assert_raw_problem(status, headers, body)


async def first_answer(client: TestClient, head: bytes) -> tuple[bytes, bytes]:
    """Send ``head`` and nothing after it (no body); the first answer's head and body."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(head + b"\r\nHost: x\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = re.search(rb"\r\nContent-Length: (\d+)", answer)
        body = await reader.readexactly(int(length.group(1))) if length else b""
    finally:
        writer.close()
    return answer, body


CONTINUE = b" HTTP/1.1\r\nExpect: 100-continue"


@pytest.mark.parametrize(
    "head",
    [
        b"GET " + INSCRIPTIONS + CONTINUE + KEY,
        b"POST " + INSCRIPTIONS + CONTINUE,
        b"GET /readyz" + CONTINUE,
        b"GET /dashboard/" + CONTINUE,
        b"GET /nope" + CONTINUE,
    ],
    ids=["api", "api-post", "readyz", "dashboard", "unknown-path"],
)
async def test_a_client_asking_before_its_body_gets_the_refusal_not_a_100(
    client: TestClient, head: bytes
) -> None:
    """No endpoint takes a body, so a client that asks first (Expect: 100-continue) gets
    the final 400 at once, never a 100 Continue inviting the body (RFC 9110 10.1.1)."""
    answer, body = await first_answer(client, head + b"\r\nContent-Length: 1000000")
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert b"\r\nConnection: close\r\n" in answer
    assert "no request body" in json.loads(body)["detail"]


async def test_a_request_without_a_body_that_asks_first_is_simply_answered(
    client: TestClient,
) -> None:
    """Nothing is to follow, so nothing is invited: the answer comes first."""
    answer, _ = await first_answer(client, b"GET /healthz" + CONTINUE)
    assert answer.startswith(b"HTTP/1.1 200 "), answer


@pytest.mark.parametrize("head", RAW.values(), ids=RAW.keys())
async def test_parser_errors_are_problems(client: TestClient, head: bytes) -> None:
    """Even a request aiohttp cannot parse is answered in the one error shape."""
    status, headers, body = await raw_request(client, head)
    assert status in (400, 414, 431)
    assert_raw_problem(status, headers, body)
