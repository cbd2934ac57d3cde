"""Fixtures: the real app over a fresh copy of the sample database, through a real client."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
import redis
from aiohttp.test_utils import TestClient

from app.config import Config
from app.data.pool import configure_reader
from app.keys import TODAY
from app.main import create_app

from .support.clients import MakeClient, ProblemTestServer
from .support.factories import Day, make_sample_db
from .support.servers import Launcher, ProcessGuard, RedisServer, require_redis_server
from .support.stores import Store, fresh_database, shares_store, start_cluster


@pytest.fixture(scope="session")
def template_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the sample database is built once, to be copied for each test."""
    return tmp_path_factory.mktemp("template")


@pytest.fixture
def sample_db(tmp_path: Path, template_dir: Path) -> Path:
    """A fresh sample database for this test."""
    return make_sample_db(tmp_path, template_dir)


@pytest.fixture
def conn(sample_db: Path) -> Iterator[sqlite3.Connection]:
    """A connection on a fresh sample database, set up as the server's readers are."""
    connection = sqlite3.connect(sample_db, isolation_level=None)
    configure_reader(connection)
    yield connection
    connection.close()


@pytest.fixture
def store_kind() -> str:
    """SQLite, unless the module runs on both stores (support/stores.py: on_both_stores)."""
    return "sqlite"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster holding a template database of the sample data."""
    yield from start_cluster()


@pytest.fixture
def pg_database(pg_url: str) -> Iterator[str]:
    """A fresh database holding the sample data, for this test."""
    yield from fresh_database(pg_url)


@pytest.fixture(scope="module")
def pg_module_database(pg_url: str) -> Iterator[str]:
    """A database holding the sample data, shared by a module's tests that only read."""
    yield from fresh_database(pg_url)


@pytest.fixture
def store(request: pytest.FixtureRequest, store_kind: str, sample_db: Path) -> Store:
    """The sample data in the store under test (support/stores.py)."""
    if store_kind != "postgresql":
        return Store(store_kind, sample_db)
    if shares_store(request):
        return Store(store_kind, sample_db, request.getfixturevalue("pg_module_database"), True)
    return Store(store_kind, sample_db, request.getfixturevalue("pg_database"))


@pytest.fixture
def make_client(store: Store, aiohttp_client: Any) -> MakeClient:
    """Build the real app over the store under test with config overrides; a client for it.

    The rate limit is raised unless a test sets it, so only limiter tests meet 429.
    """

    async def make(**overrides: Any) -> TestClient:
        settings: dict[str, Any] = {
            **store.settings(),
            "rate_burst": 100_000,
            "rate_per_second": 100_000.0,
            "auth_failures_per_minute": 100_000,
        }
        settings.update(overrides)
        return await aiohttp_client(ProblemTestServer(create_app(Config(**settings))))

    return make


@pytest.fixture
async def client(make_client: MakeClient) -> TestClient:
    """The app over the sample data, limits raised."""
    return await make_client()


@pytest.fixture
async def dated(aiohttp_client: Any, store: Store) -> tuple[TestClient, Day]:
    """The app over the sample data in the store under test, limits raised, its date set
    by the test (Day)."""
    day = Day(date(2025, 9, 1))
    config = Config(
        **store.settings(),
        rate_burst=100_000,
        rate_per_second=100_000.0,
        auth_failures_per_minute=100_000,
    )
    app = create_app(config)
    app[TODAY] = day
    return await aiohttp_client(ProblemTestServer(app)), day


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """App processes for this test, stopped by PID in teardown."""
    with Launcher(tmp_path) as launch:
        yield launch


@pytest.fixture(autouse=True)
def system_marker_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Let only tests marked ``system`` start processes (see ProcessGuard)."""
    ProcessGuard.allowed = request.node.get_closest_marker("system") is not None
    try:
        yield
    finally:
        ProcessGuard.allowed = True


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session, on a free port of 127.0.0.1."""
    require_redis_server()
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> Iterator[str]:
    """The session's Redis, emptied for this test."""
    with redis.Redis.from_url(redis_server.url) as client:
        client.flushall()
    yield redis_server.url
