"""``GET /readyz`` with the rate limit's state beside the database's (contract.md 8 and 15).

The database alone decides the status code (``views.readyz``); the body adds
``"rate_limit": "ok"``, or ``"degraded"`` while a shared store does not answer and
requests are served unlimited.
"""

from __future__ import annotations

import json

from aiohttp import web

from ..keys import LIMITS
from . import views


async def readyz(request: web.Request) -> web.Response:
    """GET /readyz: the database's readiness, and whether the rate limits are enforced."""
    answer = await views.readyz(request)
    body = json.loads(answer.body)  # type: ignore[arg-type]  # json_response holds bytes
    body["rate_limit"] = await request.app[LIMITS].state()
    return web.json_response(body, status=answer.status)
