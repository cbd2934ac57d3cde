"""The middleware order of create_app (contract.md 2: 404/405, then 401, then 429, then 400).

STYLE: the order is written once, in create_app, and pinned here; the behaviour it buys
is checked through the real app as well. Authentication asks the limits itself, once
per request (one round trip when they live in Redis): 401, then 429, in that middleware.
"""

from __future__ import annotations

from app.config import Config
from app.main import create_app
from app.web.auth import auth_middleware
from app.web.errors import error_middleware
from app.web.headers import cors_preflight_middleware
from app.web.responder import known_answer_middleware

from .support.clients import MakeClient
from .support.factories import API, KEY_1, assert_problem


def test_the_chain_is_errors_then_auth_and_limits_then_known_answers() -> None:
    """A known ETag's 304 comes after the key, its scope, its company and its limits."""
    app = create_app(Config(db="unused.sqlite3"))
    assert list(app.middlewares) == [error_middleware, auth_middleware, known_answer_middleware]


def test_cors_preflights_join_the_chain_only_with_origins() -> None:
    app = create_app(Config(db="unused.sqlite3", cors_origins="https://dash.example"))
    chain = [error_middleware, cors_preflight_middleware, auth_middleware, known_answer_middleware]
    assert list(app.middlewares) == chain


async def test_each_check_comes_in_the_contracts_order(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=1, rate_per_second=0.001)
    key = {"X-API-KEY": KEY_1}
    await assert_problem(await client.post(f"{API}/campaigns/abc/events", headers=key), 405)
    await assert_problem(await client.get(f"{API}/campaigns/abc/events"), 401)
    await assert_problem(await client.get(f"{API}/campaigns/abc/events", headers=key), 400)
    await assert_problem(await client.get(f"{API}/campaigns/abc/events", headers=key), 429)
