"""The in-process test server: the real app behind the production runner."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from app.data.pool import ReadPool
from app.keys import POOL
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


def inline_statements(client: TestClient) -> list[str]:
    """The statements the event loop's own connection runs from now on (observation only:
    a trace callback), to tell a read on the loop from one on a pooled thread."""
    pool = client.app[POOL]
    assert isinstance(pool, ReadPool)
    inline: list[str] = []
    pool._inline.set_trace_callback(inline.append)
    return inline


async def traced(client: TestClient) -> list[str]:
    """Every statement the server's connections run from now on, the loop's own and the
    pooled ones, in one list."""
    statements = inline_statements(client)
    for conn in client.app[POOL]._all:
        await conn.set_trace_callback(statements.append)
    return statements


async def raw_request(client: TestClient, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes no well-behaved client would send; return status, headers and body."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        writer.write(head + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
    head_part, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head_part.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
    return int(status_line.split()[1]), headers, body
