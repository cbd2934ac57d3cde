"""The in-process test server: the real app behind the production runner."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

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
