"""CORS (contract.md 7): off by default, and for configured origins only.

Without configured origins no answer, preflight included, carries an Access-Control-*
header. With ``cors_origins`` set, an allowed origin sees Access-Control-Allow-Origin and
the exposed pagination, rate-limit and request-id headers on 200s and on errors, and its
preflight is allowed for GET with X-API-KEY; any other origin gets none of it.
"""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from .support.clients import MakeClient
from .support.factories import API, KEY_1, get

CAMPAIGN = f"{API}/campaigns/1/events"


async def test_cors_is_off_by_default(client: TestClient) -> None:
    origin = {"Origin": "https://dash.example"}
    responses = [await get(client, CAMPAIGN, **origin), await get(client, CAMPAIGN, None, **origin)]
    preflight = await client.options(
        CAMPAIGN, headers={**origin, "Access-Control-Request-Method": "GET"}
    )
    for response in [*responses, preflight]:
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]


async def test_cors_allowed_origin_sees_the_headers(make_client: MakeClient) -> None:
    client = await make_client(cors_origins="https://dash.example")
    for key, status in ((KEY_1, 200), (None, 401)):
        response = await get(client, f"{CAMPAIGN}?page=1", key, Origin="https://dash.example")
        assert response.status == status
        assert response.headers["Access-Control-Allow-Origin"] == "https://dash.example"
        exposed = {
            h.strip().lower() for h in response.headers["Access-Control-Expose-Headers"].split(",")
        }
        assert {"x-total-count", "link", "ratelimit-remaining", "x-request-id"} <= exposed
    stranger = await get(client, CAMPAIGN, Origin="https://evil.example")
    assert stranger.status == 200
    assert not [h for h in stranger.headers if h.lower().startswith("access-control-")]


async def test_with_cors_on_every_answer_varies_by_origin(make_client: MakeClient) -> None:
    """A shared cache must not hand an allowed origin what a stranger, or a request with no
    Origin, was answered: each answer names Origin in Vary, the refused ones too."""
    client = await make_client(cors_origins="https://dash.example")
    for origin in ("https://dash.example", "https://evil.example", None):
        for key in (KEY_1, None):
            extra = {"Origin": origin} if origin else {}
            response = await get(client, CAMPAIGN, key, **extra)
            lines = response.headers.getall("Vary")
            varies = {value.strip() for line in lines for value in line.split(",")}
            assert "Origin" in varies, (origin, key, response.status)
    plain = await make_client()
    response = await get(plain, CAMPAIGN, Origin="https://dash.example")
    assert "Origin" not in response.headers.get("Vary", "")


async def test_cors_preflight(make_client: MakeClient) -> None:
    client = await make_client(cors_origins="https://dash.example")
    asks = {"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "X-API-KEY"}
    allowed = await client.options(CAMPAIGN, headers={"Origin": "https://dash.example", **asks})
    assert allowed.status == 204
    assert allowed.headers["Access-Control-Allow-Origin"] == "https://dash.example"
    methods = {m.strip() for m in allowed.headers["Access-Control-Allow-Methods"].split(",")}
    assert "GET" in methods
    names = {h.strip().lower() for h in allowed.headers["Access-Control-Allow-Headers"].split(",")}
    assert names == {"x-api-key", "x-company-id", "content-type", "if-none-match", "if-match",
                     "x-request-id"}  # fmt: skip
    stranger = await client.options(CAMPAIGN, headers={"Origin": "https://evil.example", **asks})
    assert stranger.status != 204
    assert "Access-Control-Allow-Origin" not in stranger.headers
