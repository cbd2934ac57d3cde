"""The application factory: state, lifetimes, middleware order, routes and docs."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Middleware

from .auth import auth_middleware, setup_auth
from .config import Config
from .db import ReadPool
from .errors import error_middleware
from .http import DataVersion, add_standard_headers, cors_preflight_middleware
from .keys import CONFIG, COUNTS, DATA_VERSION, POOL
from .openapi import setup_openapi
from .queries.common import data_token
from .ratelimit import add_ratelimit_headers, ratelimit_middleware, setup_ratelimit
from .routes import setup_routes
from .views import CountCache


def middleware_chain(config: Config) -> list[Middleware]:
    """The middlewares, outermost first.

    Errors are rendered for everything below; CORS preflights (only when origins are
    configured) need no key; authentication decides 401 before the limiter spends a
    token; the limiter runs before any validation (contract.md 2).
    """
    cors = [cors_preflight_middleware] if config.origins() else []
    return [error_middleware, *cors, auth_middleware, ratelimit_middleware]


def create_app(config: Config) -> web.Application:
    """Build the application; nothing touches the database until it starts."""
    app = web.Application(middlewares=middleware_chain(config))
    app[CONFIG] = config
    app[COUNTS] = CountCache()
    setup_auth(app)
    setup_ratelimit(app, config)
    app.cleanup_ctx.append(database_ctx)
    app.on_response_prepare.append(add_standard_headers)
    app.on_response_prepare.append(add_ratelimit_headers)
    setup_routes(app)
    setup_openapi(app)
    return app


async def database_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the read-only pool for the app's lifetime and close it on shutdown."""
    config = app[CONFIG]
    pool = await ReadPool.open(config.db, config.read_connections)
    app[POOL] = pool
    app[DATA_VERSION] = DataVersion(config.db, await pool.run(data_token))
    try:
        yield
    finally:
        await pool.close()
