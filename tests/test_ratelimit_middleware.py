"""The rate limiter and the failed-authentication limit, through the real app over HTTP.

Pins contract.md 6 (Rate limiting): the RateLimit-* headers on every response to an
authenticated request, 429 with Retry-After, per-key isolation, the per-address limit on
failed authentications (checked before the key), bounded state under random keys, the
client address behind a trusted proxy, and contract.md 8 (health checks never limited).
Every test runs twice, once over the in-process limits and once over limits shared
through a real Redis (contract.md 15): one behaviour suite for both.
The limiter's arithmetic on a fake clock is in test_ratelimit_unit.py.
"""

from __future__ import annotations

import asyncio
import math
import re
import secrets
from typing import Any

import pytest
import redis
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient
from multidict import CIMultiDict

from app.keys import KEY_CACHE, LIMITS
from app.web.sharedlimit import PREFIX

from .support.clients import MakeClient
from .support.factories import API, KEY_1, KEY_2, assert_problem, get

OWN = f"{API}/campaigns/1/events"  # a campaign of company 1
OWN_2 = f"{API}/campaigns/3/events"  # a campaign of company 2
TRIO = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
PAIR = ("RateLimit-Policy", "RateLimit")
POLICY = re.compile(r'"default";q=(\d+);w=(\d+)')
STATE = re.compile(r'"default";r=(\d+);t=(\d+)')
UNLIMITED = ("/healthz", "/readyz", "/api/docs", "/api/docs/openapi.json")


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.system)])
def shared(request: pytest.FixtureRequest) -> str | None:
    """Where the limits live: None in this process, else the URL of a real Redis."""
    return None if request.param == "memory" else str(request.getfixturevalue("redis_url"))


@pytest.fixture
def make_client(make_client: MakeClient, shared: str | None) -> MakeClient:
    """The conftest factory, over the limits of this run (in-process or Redis)."""
    if shared is None:
        return make_client

    async def make(**overrides: Any) -> TestClient:
        return await make_client(redis_url=shared, **overrides)

    return make


def held(app: web.Application, shared: str | None) -> tuple[int, int]:
    """How many addresses and how many keys the limits hold state for."""
    if shared is None:
        limits = app[LIMITS]
        return len(limits.failures), len(limits.keys)
    with redis.Redis.from_url(shared) as store:
        return tuple(len(list(store.scan_iter(f"{PREFIX}{kind}:*"))) for kind in ("auth", "key"))


def random_key() -> str:
    """A key nobody was ever given."""
    return "rk_" + secrets.token_urlsafe(32)


def check_headers(response: ClientResponse, burst: int, per_second: float) -> int:
    """Assert the five headers agree with each other and the policy; return Remaining."""
    headers = response.headers
    assert all(name in headers for name in TRIO + PAIR), dict(headers)
    limit, remaining, reset = (int(headers[name]) for name in TRIO)
    assert limit == burst
    assert 0 <= remaining <= burst
    # Reset is the whole seconds until the bucket is full again (allowing a second of drift).
    assert abs(reset - (burst - remaining) / per_second) <= 1
    policy = POLICY.fullmatch(headers["RateLimit-Policy"])
    assert policy, headers["RateLimit-Policy"]
    assert int(policy[1]) == burst
    assert int(policy[2]) == math.ceil(burst / per_second)
    state = STATE.fullmatch(headers["RateLimit"])
    assert state, headers["RateLimit"]
    assert (int(state[1]), int(state[2])) == (remaining, reset)
    return remaining


async def test_headers_on_every_authenticated_response_and_remaining_counts_down(
    make_client: MakeClient,
) -> None:
    burst, per_second = 10, 0.01  # a refill too slow to matter during the test
    client = await make_client(rate_burst=burst, rate_per_second=per_second)
    ok = await get(client, OWN)
    assert ok.status == 200
    responses = [
        ok,
        await get(client, f"{API}/campaigns/abc/events"),
        await get(client, f"{API}/campaigns/999999/events"),
        await get(client, OWN, **{"If-None-Match": ok.headers["ETag"]}),
        await get(client, f"{API}/course-inscriptions?per_page=0"),
        await get(client, f"{API}/victimsapi/7/events"),
    ]
    assert [r.status for r in responses] == [200, 400, 404, 304, 400, 200]
    remaining = [check_headers(r, burst, per_second) for r in responses]
    assert remaining == [9, 8, 7, 6, 5, 4]


async def test_exhausted_bucket_gives_429_with_retry_after(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=3, rate_per_second=0.001)
    assert [(await get(client, OWN)).status for _ in range(3)] == [200, 200, 200]
    refused = await get(client, OWN)
    await assert_problem(refused, 429)
    assert re.fullmatch(r"[0-9]+", refused.headers["Retry-After"])
    assert int(refused.headers["Retry-After"]) >= 1
    assert check_headers(refused, 3, 0.001) == 0
    again = await get(client, f"{API}/course-inscriptions")
    await assert_problem(again, 429)


async def test_keys_have_separate_buckets(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=2, rate_per_second=0.001)
    for _ in range(2):
        assert (await get(client, OWN)).status == 200
    assert (await get(client, OWN)).status == 429
    other = await get(client, OWN_2, key=KEY_2)
    assert other.status == 200
    assert other.headers["RateLimit-Remaining"] == "1"


@pytest.mark.parametrize("path", UNLIMITED)
async def test_health_and_docs_are_never_limited(make_client: MakeClient, path: str) -> None:
    client = await make_client(rate_burst=1, rate_per_second=0.001, auth_failures_per_minute=1)
    first = await get(client, path)
    if path.startswith("/api/docs") and first.status == 404:
        pytest.skip("the OpenAPI route is not served yet")
    await get(client, OWN)  # spends KEY_1's only token
    await get(client, OWN, key=random_key())  # spends the address's only failure
    assert (await get(client, OWN)).status == 429
    for key in (KEY_1, random_key(), None):
        for _ in range(5):
            response = await get(client, path, key=key)
            assert response.status == 200, path
            assert not [h for h in response.headers if h.lower().startswith("ratelimit")]
            assert "Retry-After" not in response.headers


async def test_failed_authentications_are_limited_per_address(make_client: MakeClient) -> None:
    client = await make_client(auth_failures_per_minute=5)
    for _ in range(5):
        await assert_problem(await get(client, OWN, key=random_key()), 401)
    refused = await get(client, OWN, key=random_key())
    await assert_problem(refused, 429)
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # The gate comes before the key, so even the right key is not confirmed now.
    for key in (KEY_1, KEY_2, None):
        gated = await get(client, OWN, key=key)
        await assert_problem(gated, 429)
        assert int(gated.headers["Retry-After"]) >= 1
    assert (await get(client, "/healthz", key=None)).status == 200


async def test_two_keys_meet_the_gate_first_and_spend_nothing(make_client: MakeClient) -> None:
    client = await make_client(auth_failures_per_minute=1)
    twice = CIMultiDict((("X-API-KEY", KEY_1), ("X-API-KEY", KEY_2)))
    for _ in range(3):  # a 400 where the 401 would be: no failure is counted
        await assert_problem(await client.get(OWN, headers=twice), 400)
    await assert_problem(await get(client, OWN, key=random_key()), 401)  # the one failure
    await assert_problem(await client.get(OWN, headers=twice), 429)  # the gate comes first


async def test_guessing_keys_meets_429_quickly_and_never_a_200(make_client: MakeClient) -> None:
    client = await make_client(auth_failures_per_minute=10)  # the contract's default
    statuses = [(await get(client, OWN, key=random_key())).status for _ in range(200)]
    assert 200 not in statuses
    assert statuses[:10] == [401] * 10
    assert statuses[10] == 429
    assert set(statuses) == {401, 429}
    assert statuses.count(429) > 150  # a minute refills 10 guesses; the run is much shorter


async def test_random_keys_create_no_per_key_state(
    make_client: MakeClient, shared: str | None
) -> None:
    # 3,000 failures a minute: every one of the 2,000 random keys reaches the lookup, and
    # the address's bucket stays short of full for tens of seconds, as does the key's
    # (Redis expires full buckets).
    client = await make_client(rate_burst=5, rate_per_second=0.01, auth_failures_per_minute=3000)
    app = client.server.app
    for _ in range(40):
        batch = [get(client, OWN, key=random_key()) for _ in range(50)]
        assert {r.status for r in await asyncio.gather(*batch)} == {401}
    assert held(app, shared) == (1, 0)  # one client address, one bucket; no key
    assert len(app[KEY_CACHE]._entries) == 0
    # The same counters do move for a real key, so the zeros above mean something.
    assert (await get(client, OWN)).status == 200
    assert held(app, shared) == (1, 1)
    assert len(app[KEY_CACHE]._entries) == 1


async def exhaust(client: TestClient, limit: int, forwarded: str | None) -> None:
    """Spend an address's failed-authentication allowance and see the 429."""
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    for _ in range(limit):
        assert (await get(client, OWN, key=random_key(), **headers)).status == 401
    assert (await get(client, OWN, key=random_key(), **headers)).status == 429


async def test_trusted_proxy_separates_forwarded_clients(make_client: MakeClient) -> None:
    client = await make_client(trusted_proxies="127.0.0.1/32", auth_failures_per_minute=3)
    await exhaust(client, 3, "203.0.113.9")
    assert (await get(client, OWN, **{"X-Forwarded-For": "203.0.113.9"})).status == 429
    # Prepending a made-up hop does not escape: the right-most untrusted entry counts.
    spoofed = await get(
        client, OWN, key=random_key(), **{"X-Forwarded-For": "1.2.3.4, 203.0.113.9"}
    )
    assert spoofed.status == 429
    other = await get(client, OWN, key=random_key(), **{"X-Forwarded-For": "203.0.113.10"})
    assert other.status == 401
    assert (await get(client, OWN, **{"X-Forwarded-For": "198.51.100.4"})).status == 200
    assert (await get(client, OWN, key=random_key())).status == 401  # the proxy itself


async def test_forwarded_for_is_ignored_without_a_trusted_proxy(
    make_client: MakeClient, shared: str | None
) -> None:
    client = await make_client(auth_failures_per_minute=3)
    await exhaust(client, 3, "203.0.113.9")
    for forwarded in ("203.0.113.10", "198.51.100.4, 203.0.113.11"):
        response = await get(client, OWN, key=random_key(), **{"X-Forwarded-For": forwarded})
        assert response.status == 429
    assert (await get(client, OWN, key=random_key())).status == 429
    assert held(client.server.app, shared)[0] == 1
