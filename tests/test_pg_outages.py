"""PostgreSQL outages: a stopped or frozen database gives 503s, never a 500 or a hang.

While the database is stopped or frozen, every data request and ``/readyz`` answer 503
(data requests in problem+json with ``Retry-After``) within the read timeout
(``REPORTING_READ_TIMEOUT``), the log gets a throttled line rather than a traceback per
request, and a thawed database is served again. Each test runs a throwaway cluster of
its own: freezing the session's shared one would stall every other test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

from .support.factories import API, KEY_1, PROBLEM_KEYS
from .support.servers import GUARD_SECONDS, UNLIMITED, AppProcess, Launcher, fetch
from .support.stores import TEMPLATE, database_url, frozen, start_cluster, stop_cluster

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
