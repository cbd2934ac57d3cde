"""The in-process test server: the real app behind the production runner."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.web.logs import AccessLogger
from app.web.server import ProblemAppRunner

MakeClient = Callable[..., Awaitable[TestClient]]


class ProblemTestServer(TestServer):
    """aiohttp's TestServer over the production runner, so tests see what users see."""

    async def _make_runner(self, **kwargs: Any) -> web.AppRunner:
        return ProblemAppRunner(
            self.app,
            access_log_class=AccessLogger,
            access_log=logging.getLogger("app.access"),
            **kwargs,
        )


async def get_raw(client: TestClient, path: str, **headers: str) -> tuple[Any, bytes]:
    """GET without transparent decompression (and without a key): the bytes as sent."""
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(client.make_url(path), headers=headers) as resp,
    ):
        return resp, await resp.read()
