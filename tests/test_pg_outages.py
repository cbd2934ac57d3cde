"""PostgreSQL outages: a stopped or frozen database gives 503s, never a 500 or a hang.

While the database is stopped or frozen, every data request and ``/readyz`` answer 503
(data requests in problem+json with ``Retry-After``) within the read timeout
(``REPORTING_READ_TIMEOUT``), the log gets a throttled line rather than a traceback per
request, and a thawed database is served again. Each test runs a throwaway cluster of
its own: freezing the session's shared one would stall every other test.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import asyncpg
import pytest

from .support.factories import API, KEY_1, PROBLEM_KEYS
from .support.servers import (
    GUARD_SECONDS,
    UNLIMITED,
    AppProcess,
    Launcher,
    fetch,
    start_python,
    stop,
)
from .support.stores import (
    TEMPLATE,
    activity,
    database_url,
    fetch_all,
    frozen,
    run_apart,
    start_cluster,
    stop_cluster,
)

pytestmark = pytest.mark.system  # starts PostgreSQL and server processes

PROBE = f"{API}/campaigns/1/events"
# Asked only while the database does not answer: an answer the process gave and kept
# may still be sent from memory for up to a second (interface.md, "Caching").
UNASKED = f"{API}/campaigns/1/events?filter[type]=click"
HEADERS = {"X-API-KEY": KEY_1}
REQUESTS = 4
LOG_LINE = "the database does not answer"


@pytest.fixture
def own_cluster() -> Iterator[str]:
    """A cluster of this test's own, holding the sample; the URL of its sample database."""
    for url in start_cluster():
        yield database_url(url, TEMPLATE)


def serve(launcher: Launcher, tmp_path: Path, url: str) -> AppProcess:
    flags = ("--database-url", url, "--read-timeout", "1", *UNLIMITED)
    app = launcher.serve(tmp_path / "unused.sqlite3", *flags)
    assert fetch(app.base + PROBE, HEADERS)[0] == 200
    return app


def assert_unavailable(status: int, headers: Message, body: bytes) -> None:
    assert status == 503, body
    assert headers["Content-Type"].startswith("application/problem+json"), headers
    assert int(headers["Retry-After"]) >= 1
    problem = json.loads(body)
    assert set(problem) >= PROBLEM_KEYS and problem["status"] == 503


def assert_one_line_per_outage(app: AppProcess) -> None:
    """No traceback; fewer log lines than failed requests (one per interval)."""
    _, err = app.output_text()
    assert "Traceback" not in err, err
    lines = err.count(LOG_LINE)
    assert 1 <= lines < REQUESTS + 1, err


def test_a_stopped_database_gives_503s_and_one_log_line(own_cluster: str, tmp_path: Path) -> None:
    with Launcher(tmp_path) as launcher:
        app = serve(launcher, tmp_path, own_cluster)
        stop_cluster(own_cluster)
        for _ in range(REQUESTS):
            assert_unavailable(*fetch(app.base + UNASKED, HEADERS))
        status, _, body = fetch(app.base + "/readyz")
        assert status == 503 and json.loads(body)["status"] == "unavailable", body
    assert_one_line_per_outage(app)


def test_a_frozen_database_gives_503s_then_serves_again(own_cluster: str, tmp_path: Path) -> None:
    with Launcher(tmp_path) as launcher:
        app = serve(launcher, tmp_path, own_cluster)
        with frozen(own_cluster):
            answers = [fetch(app.base + UNASKED, HEADERS) for _ in range(REQUESTS)]
            ready = fetch(app.base + "/readyz")
        for answer in answers:
            assert_unavailable(*answer)
        assert ready[0] == 503, ready[2]
        deadline = time.monotonic() + GUARD_SECONDS
        while fetch(app.base + PROBE, HEADERS)[0] != 200:
            assert time.monotonic() < deadline, "not served again after the thaw"
            time.sleep(0.2)
        assert fetch(app.base + "/readyz")[0] == 200
    assert_one_line_per_outage(app)


def test_a_lost_listening_connection_is_opened_again(own_cluster: str, tmp_path: Path) -> None:
    """Loads are heard again after the server's connections were cut (a restart, a kill):
    an answer it keeps is sent from memory again, not read afresh every time."""
    with Launcher(tmp_path) as launcher:
        app = serve(launcher, tmp_path, own_cluster)
        cut = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        cut += " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        assert run_apart(fetch_all(own_cluster, cut))
        deadline = time.monotonic() + 5  # a few seconds: it listens again within one
        while True:
            before = run_apart(activity(own_cluster))
            assert fetch(app.base + PROBE, HEADERS)[0] == 200
            if not run_apart(activity(own_cluster)) - before:
                break  # answered without a statement: from memory
            assert time.monotonic() < deadline, "every answer is read again"
            time.sleep(0.1)


def test_a_role_that_may_not_read_a_table_gives_503s(own_cluster: str, tmp_path: Path) -> None:
    """A role without SELECT on one table: 503s, /readyz says so, one log line."""
    grants = [
        "CREATE ROLE partial LOGIN",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO partial",
        "REVOKE SELECT ON campaign_events FROM partial",
    ]
    for grant in grants:
        run_apart(fetch_all(own_cluster, grant))
    with Launcher(tmp_path) as launcher:
        flags = ("--database-url", own_cluster.replace("postgres@", "partial@"), *UNLIMITED)
        app = launcher.serve(tmp_path / "unused.sqlite3", *flags)
        assert fetch(app.base + f"{API}/campaigns", HEADERS)[0] == 200  # what it may read
        for _ in range(REQUESTS):
            assert_unavailable(*fetch(app.base + UNASKED, HEADERS))
        status, _, body = fetch(app.base + "/readyz")
        assert status == 503 and json.loads(body)["status"] == "unavailable", body
    assert_one_line_per_outage(app)


def test_a_table_dropped_behind_the_writers_back_gives_503s(
    own_cluster: str, tmp_path: Path
) -> None:
    """Undefined table: the database cannot answer that read (503, one log line)."""
    run_apart(fetch_all(own_cluster, "DROP TABLE campaign_funnels"))
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(tmp_path / "unused.sqlite3", "--database-url", own_cluster, *UNLIMITED)
        for _ in range(REQUESTS):
            assert_unavailable(*fetch(app.base + f"{API}/campaigns", HEADERS))
    assert_one_line_per_outage(app)


async def cut_a_waiting_load(url: str, load: subprocess.Popen[bytes]) -> None:
    """Hold the loads' lock until the load waits for it inside its transaction; then end
    the load's connection, as a restart or ``pg_terminate_backend`` would."""
    holder = await asyncpg.connect(url)
    try:
        await holder.execute("SELECT pg_advisory_lock(hashtext('reporting load'))")
        waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event = 'advisory'"
        deadline = time.monotonic() + GUARD_SECONDS
        while not (pids := await holder.fetch(waiting)):
            assert load.poll() is None and time.monotonic() < deadline, "the load never waited"
            await asyncio.sleep(0.05)
        await holder.execute("SELECT pg_terminate_backend($1)", pids[0][0])
    finally:
        await holder.close()


def test_a_load_whose_connection_is_cut_says_why(own_cluster: str) -> None:
    """One line naming the lost connection (not the rollback that could not run), exit
    1, nothing written."""
    token = "SELECT value FROM meta WHERE key = 'data_token'"
    before = run_apart(fetch_all(own_cluster, token))
    load = start_python(
        "scripts/load_fixtures.py", "fixtures/sample.json", "--database-url", own_cluster,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        run_apart(cut_a_waiting_load(own_cluster, load))
        _, err = load.communicate(timeout=GUARD_SECONDS)
    finally:
        stop(load)
    assert load.returncode == 1
    lines = err.decode().splitlines()
    assert len(lines) == 1 and "load refused, database unchanged" in lines[0], lines
    assert "connection" in lines[0] and "__aexit__" not in lines[0], lines
    assert run_apart(fetch_all(own_cluster, token)) == before
