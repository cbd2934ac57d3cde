"""Several processes, one limit (contract.md 15, with the numbers of contract.md 6).

Real ``python -m app`` processes over a real redis-server: two gunicorn workers on one
port, each with its own listening socket and the app's own runner (parser errors stay
problem+json), give exactly the one-process numbers (20 of
60 quick requests with one key, RateLimit-Remaining counting down in order, the
failed-authentication gate at exactly 10); so do two separate servers sharing one Redis,
as two hosts would. Redis killed mid-run: requests are served unlimited, /readyz says
degraded, and once Redis is back the limits hold again without a restart. More than one
worker without Redis, or a port already taken, is refused with one line and exit 2.
"""

from __future__ import annotations

import math
import re
import secrets
import socket
import time
from email.message import Message
from pathlib import Path

import pytest

from .support.factories import API, KEY_1, KEY_2
from .support.servers import (
    GUARD_SECONDS,
    AppProcess,
    Launcher,
    RedisServer,
    clean_env,
    fetch,
    listening_sockets,
    require_redis_server,
    run_python,
    stop,
    worker_pids,
)

pytestmark = pytest.mark.system

OWN = f"{API}/campaigns/1/events"
SLOW = ("--rate-burst", "20", "--rate-per-second", "0.001", "--auth-failures-per-minute", "10")


def shared_flags(url: str, workers: int = 2) -> tuple[str, ...]:
    return ("--workers", str(workers), "--redis-url", url, *SLOW)


def serve_workers(launcher: Launcher, db: Path, *flags: str) -> AppProcess:
    """Start the app with workers and wait until each listens (the first answers sooner)."""
    app = launcher.serve(db, *flags)
    expected = int(flags[flags.index("--workers") + 1])
    port = int(app.base.rsplit(":", 1)[1])
    deadline = time.monotonic() + GUARD_SECONDS
    while len(worker_pids(app)) != expected or listening_sockets(port) != expected:
        assert time.monotonic() < deadline and app.proc.poll() is None, app.output_text()
        time.sleep(0.05)
    return app


def remaining(headers: Message) -> int | None:
    value = headers.get("RateLimit-Remaining")
    return None if value is None else int(value)


def guess() -> dict[str, str]:
    return {"X-API-KEY": "rk_" + secrets.token_urlsafe(32)}


def access_pids(app: AppProcess) -> set[int]:
    """The processes that wrote access lines (read once the server stopped)."""
    return {int(p) for p in re.findall(r"\[(\d+)\] INFO app\.access ", app.output_text()[1])}


def assert_one_limit(bases: list[str]) -> None:
    """60 quick requests with one key over ``bases`` in turn: the one-process numbers."""
    start, answers, elapsed = time.monotonic(), [], []
    for i in range(60):
        answers.append(fetch(f"{bases[i % len(bases)]}{OWN}", {"X-API-KEY": KEY_1}))
        elapsed.append(time.monotonic() - start)
    assert [status for status, _, _ in answers] == [200] * 20 + [429] * 40
    assert [remaining(h) for _, h, _ in answers] == [*range(19, -1, -1)] + [0] * 40
    assert all(int(h["Retry-After"]) >= 1 for _, h, _ in answers[20:])
    resets = [int(h["RateLimit-Reset"]) for _, h, _ in answers]
    # The bucket only empties: time to full never falls, but by the whole seconds that
    # passed since the first request (a refill; on a busy machine the 60 take over 1 s).
    for i, reset in enumerate(resets):
        assert reset >= max(resets[: i + 1]) - math.ceil(elapsed[i]), (i, resets, elapsed)
    statuses = [fetch(f"{bases[i % len(bases)]}{OWN}", guess())[0] for i in range(15)]
    assert statuses == [401] * 10 + [429] * 5
    # The address is gated everywhere, even with a key whose bucket is full.
    for base in bases:
        status, headers, _ = fetch(f"{base}{OWN}", {"X-API-KEY": KEY_2})
        assert status == 429 and 1 <= int(headers["Retry-After"]) <= 6


def unparsable(port: int) -> tuple[bytes, bytes]:
    """Send a request line too long for aiohttp's parser; return the answer's head and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD_SECONDS) as sock:
        sock.sendall(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def test_two_workers_share_one_limit(sample_db: Path, launcher: Launcher, redis_url: str) -> None:
    app = serve_workers(launcher, sample_db, *shared_flags(redis_url))
    port = int(app.base.rsplit(":", 1)[1])
    workers = worker_pids(app)
    assert len(workers) == 2
    assert listening_sockets(port) == 2
    assert_one_limit([app.base])
    # Each worker serves through the app's own runner: parser errors are problem+json.
    for _ in range(6):
        head, body = unparsable(port)
        assert b"application/problem+json" in head, head
        assert b'"request_id"' in body
    ready = fetch(f"{app.base}/readyz")
    assert ready[0] == 200 and b'"rate_limit": "ok"' in ready[2]
    assert stop(app.proc) == 0
    # gunicorn names the address served (its arbiter binds no socket of its own).
    assert f"Listening at: {app.base} ({app.proc.pid})" in app.output_text()[1]
    # Both workers answered (a fresh connection per request, spread by the kernel).
    assert access_pids(app) == set(workers)


def test_two_servers_share_one_limit(sample_db: Path, launcher: Launcher, redis_url: str) -> None:
    servers = [launcher.serve(sample_db, *shared_flags(redis_url, workers=1)) for _ in range(2)]
    assert_one_limit([server.base for server in servers])
    for server in servers:
        assert stop(server.proc) == 0


def test_redis_killed_and_restarted_mid_run(
    sample_db: Path, launcher: Launcher, tmp_path: Path
) -> None:
    require_redis_server()
    store = RedisServer(tmp_path).start()
    try:
        flags = ("--workers", "2", "--redis-url", store.url, "--rate-burst", "5")
        app = serve_workers(launcher, sample_db, *flags, "--rate-per-second", "0.001")
        url = f"{app.base}{OWN}"
        before = [fetch(url, {"X-API-KEY": KEY_1}) for _ in range(3)]
        assert [remaining(h) for _, h, _ in before] == [4, 3, 2]

        store.stop()
        during = [fetch(url, {"X-API-KEY": KEY_1}) for _ in range(10)]  # twice the burst
        assert [status for status, _, _ in during] == [200] * 10
        assert [remaining(h) for _, h, _ in during] == [None] * 10
        status, _, body = fetch(f"{app.base}/readyz")
        assert status == 200 and b'"rate_limit": "degraded"' in body

        store.start()  # the same port, empty: its old buckets are gone
        time.sleep(1.2)  # each worker's probe pings Redis every second
        after = [fetch(url, {"X-API-KEY": KEY_1}) for _ in range(7)]
        assert [status for status, _, _ in after] == [200] * 5 + [429] * 2
        assert [remaining(h) for _, h, _ in after] == [4, 3, 2, 1, 0, 0, 0]
        status, _, body = fetch(f"{app.base}/readyz")
        assert status == 200 and b'"rate_limit": "ok"' in body
        assert stop(app.proc) == 0
    finally:
        store.stop()
    err = app.output_text()[1]
    warned = err.count("rate limits not enforced")
    assert 1 <= warned <= 2, err  # once per worker that met the outage (once a minute)
    assert "rate limits enforced again" in err


def test_several_workers_without_redis_are_refused() -> None:
    result = run_python("-m", "app", "--workers", "2", env=clean_env(COLUMNS="200"))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "REPORTING_REDIS_URL" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_workers_refuse_a_port_already_taken(
    sample_db: Path, launcher: Launcher, redis_url: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        app = launcher.start(sample_db, *shared_flags(redis_url), "--port", str(port))
        code = app.proc.wait(timeout=GUARD_SECONDS)
    err = app.output_text()[1]
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: cannot serve on"), err
    assert "Traceback" not in err


# A new worker whose stop signal came before its own handlers: run in a process of its
# own, because gunicorn's arbiter installs its signal handlers where it is made.
EARLY_SIGNAL = """
import os, signal
from gunicorn.arbiter import Arbiter as GunicornArbiter
from app.config import Config
from app.main import create_app
from app.web.gunicorn_shim import inherited_signal_queue, stop_signal_in
from app.web.processes import Arbiter

config = Config(db="unused.sqlite3", log_level="WARNING")
GunicornArbiter(Arbiter(config, lambda: create_app(config))).init_signals()  # as forks inherit
pending = inherited_signal_queue()
print(stop_signal_in(pending))
os.kill(os.getpid(), signal.SIGTERM)  # queued by the arbiter's handler, as in a new worker
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the worker's own handlers come now
print(stop_signal_in(pending) == signal.SIGTERM)
"""


def test_a_worker_sees_a_stop_signal_that_came_before_its_handlers() -> None:
    """A SIGTERM that reached a worker between its fork and its handlers stops it at start.

    (The arbiter's inherited handler only queues it in a copy of the arbiter's queue: the
    worker would otherwise serve on until gunicorn's graceful timeout killed it.)
    """
    done = run_python("-c", EARLY_SIGNAL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "True"]
