"""PostgreSQL's webhook subscriptions: :mod:`app.data.webhooks`' statements, awaited."""

from __future__ import annotations

import datetime as dt

import asyncpg

from .. import webhooks as w
from .sql import numbered


async def create(
    conn: asyncpg.Connection, sub: w.Subscription, now: dt.datetime
) -> tuple[int, str]:
    if await conn.fetchval(numbered(w.COMPANY_EXISTS), sub.company_id) is None:
        raise w.WebhookRefused(f"no company {sub.company_id}")
    secret = w.new_secret()
    webhook_id = await conn.fetchval(numbered(w.CREATE), *w.create_args(sub, secret, now))
    await conn.execute(w.CHANGED)
    return int(webhook_id), secret


async def list_all(conn: asyncpg.Connection) -> list[tuple[object, ...]]:
    return [tuple(row) for row in await conn.fetch(w.LIST)]


async def set_status(conn: asyncpg.Connection, webhook_id: int, status: str) -> None:
    if await conn.fetchval(numbered(w.SET_STATUS), status, status, webhook_id) is None:
        raise w.missing(webhook_id)
    await conn.execute(w.CHANGED)


async def delete(conn: asyncpg.Connection, webhook_id: int) -> None:
    await conn.execute(numbered(w.DELETE_DELIVERIES), webhook_id)
    if await conn.fetchval(numbered(w.DELETE), webhook_id) is None:
        raise w.missing(webhook_id)
    await conn.execute(w.CHANGED)


async def rotate(conn: asyncpg.Connection, webhook_id: int, now: dt.datetime) -> str:
    secret = w.new_secret()
    until = w.utc_text(now + w.ROTATION)
    if await conn.fetchval(numbered(w.ROTATE), until, secret, webhook_id) is None:
        raise w.missing(webhook_id)
    await conn.execute(w.CHANGED)
    return secret
