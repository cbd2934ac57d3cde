"""The application factory: state, lifetimes, middleware order, routes and docs."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Middleware

from .config import Config
from .data.pg.store import PgStore
from .data.pool import ReadPool
from .data.store import Store
from .data.version import DataVersion
from .keys import (
    ANSWERS,
    CONFIG,
    COUNTS,
    DATA_VERSION,
    PARSERS,
    POOL,
    RECENT_PAGES,
    SHARES,
    STREAMS,
    TODAY,
)
from .web.auth import auth_middleware, setup_auth
from .web.dashboard import add_dashboard_policy, setup_dashboard
from .web.errors import error_middleware
from .web.headers import add_standard_headers, cors_preflight_middleware
from .web.openapi import setup_openapi
from .web.params import QueryParsers
from .web.ratelimit import add_ratelimit_headers, setup_ratelimit
from .web.refresh import RecentPages, refresh_ctx
from .web.responder import (
    KnownAnswers,
    PoolShares,
    StreamSlots,
    TokenCache,
    known_answer_middleware,
    pool_share,
    release,
)
from .web.routes import setup_routes


def middleware_chain(config: Config) -> list[Middleware]:
    """The middlewares, outermost first.

    Errors are rendered for everything below; CORS preflights (only when origins are
    configured) need no key; authentication resolves the key and asks the limits once
    (401, then 429), before any validation (contract.md 2); then a 304 of an answer this
    process already gave needs no view.
    """
    cors = [cors_preflight_middleware] if config.origins() else []
    return [error_middleware, *cors, auth_middleware, known_answer_middleware]


def create_app(config: Config) -> web.Application:
    """Build the application; nothing touches the database until it starts."""
    app = api_app(config)
    setup_openapi(app)
    setup_dashboard(app)
    return app


def api_app(config: Config) -> web.Application:
    """The API and its health checks, without the documentation: it needs none of it."""
    app = web.Application(middlewares=middleware_chain(config))
    app[CONFIG] = config
    app[COUNTS] = TokenCache()
    app[ANSWERS] = KnownAnswers(config.answer_memory_mb * 1024 * 1024)
    app[RECENT_PAGES] = RecentPages()
    app[PARSERS] = QueryParsers()
    app[STREAMS] = StreamSlots(config.streams_per_company)
    app[SHARES] = PoolShares(pool_share(config.read_connections))
    app[TODAY] = utc_today
    release()  # read the package's files now, not on the first request
    setup_auth(app)
    if config.redis_url:
        # Imported here: redis's client is a tenth of the server's start, and only a
        # server sharing its limits needs it.
        from .web.sharedlimit import setup_shared_limits

        setup_shared_limits(app, config)
    else:
        setup_ratelimit(app, config)
    app.cleanup_ctx.append(database_ctx)
    app.cleanup_ctx.append(refresh_ctx)  # after the store: it reads through it
    app.on_response_prepare.append(prepare_headers)
    setup_routes(app)
    return app


async def prepare_headers(request: web.Request, response: web.StreamResponse) -> None:
    """The standard, the rate-limit and the dashboard's headers of every response, from
    one receiver of on_response_prepare (each receiver is a coroutine awaited per
    response)."""
    add_standard_headers(request, response)
    add_ratelimit_headers(request, response)
    add_dashboard_policy(request, response)


def utc_today() -> dt.date:
    """Today's date in UTC: the day against which inscriptions are overdue."""
    return dt.datetime.now(dt.UTC).date()


async def database_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the read-only store (SQLite, or PostgreSQL when a URL is set) for the app's life."""
    config = app[CONFIG]
    pool: Store
    if config.database_url:
        pg = await PgStore.open(config.database_url, config.read_connections, config.read_timeout)
        pool, app[DATA_VERSION] = pg, pg.version
    else:
        sqlite = await ReadPool.open(config.db, config.read_connections)
        pool, app[DATA_VERSION] = sqlite, DataVersion(config.db, await sqlite.token())
    app[POOL] = pool
    try:
        yield
    finally:
        await pool.close()
