"""Real processes for tests: free ports, commands run to completion, app servers stopped by PID."""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUARD_SECONDS = 60.0  # only so that a broken server cannot hang the suite
UNLIMITED = ("--rate-burst", "1000000", "--rate-per-second", "1000000")
UNLIMITED += ("--auth-failures-per-minute", "1000000")  # rate limits out of reach
UNLIMITED += ("--max-connections-per-address", "100000")  # so are connection limits (one client)
VARIABLES = {  # contract.md 8, with the defaults contract.md 6 and 8 state (None: no default)
    "REPORTING_DB": None,
    "REPORTING_HOST": "127.0.0.1",
    "REPORTING_PORT": "8080",
    "REPORTING_RATE_BURST": "20",
    "REPORTING_RATE_PER_SECOND": "10",
    "REPORTING_AUTH_FAILURES_PER_MINUTE": "10",
    "REPORTING_TRUSTED_PROXIES": None,
    "REPORTING_CORS_ORIGINS": None,
    "REPORTING_LOG_LEVEL": None,
    "REPORTING_LOG_FORMAT": "text",
    "REPORTING_KEEPALIVE_TIMEOUT": "15",  # the README's configuration table
    "REPORTING_HEADER_TIMEOUT": "10",
    "REPORTING_MAX_CONNECTIONS": "1000",
    "REPORTING_MAX_CONNECTIONS_PER_ADDRESS": "64",
    "REPORTING_WORKERS": "1",
    "REPORTING_REDIS_URL": None,
    "REPORTING_READ_TIMEOUT": "5",  # README Configuration: a hung PostgreSQL answers 503
    "REPORTING_WRITE_TIMEOUT": "30",  # the README's configuration table (slow readers)
    "REPORTING_STREAMS_PER_COMPANY": "2",
    "REPORTING_SHUTDOWN_TIMEOUT": "30",  # the README's configuration table
}


class ProcessGuard:
    """Whether the running test may start processes: only tests marked ``system`` may.

    ``make test-fast`` deselects the system tests, so an unmarked test that starts a
    process would slip a slow, process-level test into it; the guard fails it instead.
    """

    allowed = True  # outside a test (module-scoped fixtures of system modules)

    @classmethod
    def check(cls) -> None:
        """Fail the running test unless it is marked ``system``."""
        assert cls.allowed, "a test that starts processes must be marked @pytest.mark.system"


def free_port() -> int:
    """A local TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the caller's REPORTING_* settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPORTING_")}
    return {**env, **extra}


def run_python(
    *args: str, env: dict[str, str] | None = None, memory_mb: int | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python *args`` in the project to completion, as a user would; output as text.

    ``memory_mb`` bounds the process's address space (a machine short of memory).
    """
    ProcessGuard.check()
    limit = None if memory_mb is None else (memory_mb * 1024 * 1024,) * 2
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=clean_env() if env is None else env,
        capture_output=True,
        text=True,
        check=False,
        timeout=GUARD_SECONDS,
        preexec_fn=None if limit is None else lambda: resource.setrlimit(resource.RLIMIT_AS, limit),
    )


def start_python(*args: str, **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``python *args`` in the project, as a user would; end it with :func:`stop`."""
    ProcessGuard.check()
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=clean_env(), **popen)


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, Message, bytes]:
    """GET with the standard library: status, headers and body, errors included."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=GUARD_SECONDS) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def stop(proc: subprocess.Popen[bytes]) -> int:
    """End a process by its PID: SIGTERM, then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=GUARD_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


@dataclass
class AppProcess:
    """One ``python -m app`` process, where it listens and where its output goes."""

    proc: subprocess.Popen[bytes]
    base: str
    logs: Path

    def serving(self) -> bool:
        """True once /healthz answers, False if the process exited first."""
        deadline = time.monotonic() + GUARD_SECONDS
        while self.proc.poll() is None:
            with contextlib.suppress(OSError):
                if fetch(f"{self.base}/healthz")[0] == 200:
                    return True
            assert time.monotonic() < deadline, "neither serving nor exiting"
            time.sleep(0.05)
        return False

    def output(self) -> tuple[bytes, bytes]:
        """What the process wrote to stdout and stderr."""
        return Path(f"{self.logs}.out").read_bytes(), Path(f"{self.logs}.err").read_bytes()

    def output_text(self) -> tuple[str, str]:
        """stdout and stderr decoded, for tests that read what the operator reads."""
        out, err = self.output()
        return out.decode(), err.decode()


class Launcher:
    """Starts app processes on free local ports; ends every one by PID when closed."""

    def __init__(self, directory: Path, root: Path = ROOT) -> None:
        self.directory = directory
        self.root = root  # where ``app`` is imported from: a copy runs another release
        self.started: list[AppProcess] = []

    def start(self, db: Path, *flags: str, bootstrap: bool = False) -> AppProcess:
        """Spawn ``python -m app`` over ``db``; it may serve or refuse.

        ``bootstrap=True`` leaves the app's default: a missing database is created.
        """
        ProcessGuard.check()
        port = free_port()
        command = [sys.executable, "-m", "app", "--db", str(db), "--host", "127.0.0.1"]
        command += ["--port", str(port), *([] if bootstrap else ["--bootstrap", "false"])]
        command += flags
        logs = self.directory / f"app{len(self.started)}"
        with open(f"{logs}.out", "wb") as out, open(f"{logs}.err", "wb") as err:
            proc = subprocess.Popen(command, cwd=self.root, env=clean_env(), stdout=out, stderr=err)
        self.started.append(AppProcess(proc, f"http://127.0.0.1:{port}", logs))
        return self.started[-1]

    def serve(self, db: Path, *flags: str, bootstrap: bool = False) -> AppProcess:
        """Spawn the app and wait until it answers /healthz."""
        app = self.start(db, *flags, bootstrap=bootstrap)
        assert app.serving(), app.output()
        return app

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Stop every process started here."""
        for app in self.started:
            stop(app.proc)


def require_redis_server() -> None:
    """Skip without redis-server, except in CI (CI=true), where its absence is a failure."""
    if RedisServer.installed():
        return
    reason = "redis-server is not installed (make test installs it with apt-get)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


class RedisServer:
    """A real ``redis-server`` on 127.0.0.1 without persistence, started and stopped by PID.

    ``stop`` then ``start`` again brings it back on the same port, empty (a restart).
    """

    def __init__(
        self, directory: Path, port: int | None = None, options: Sequence[str] = ()
    ) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.options = list(options)  # more of redis-server's flags
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def installed() -> bool:
        return shutil.which("redis-server") is not None

    def start(self) -> RedisServer:
        """Start it and wait until it answers PING."""
        ProcessGuard.check()
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.directory)]
        command += self.options
        with open(self.directory / "redis.log", "ab") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + GUARD_SECONDS
        while not self.answers():
            assert self.proc.poll() is None, (self.directory / "redis.log").read_text()
            assert time.monotonic() < deadline, "redis-server does not answer"
            time.sleep(0.02)
        return self

    def answers(self) -> bool:
        """Whether PING gets PONG right now."""
        with (
            contextlib.suppress(OSError),
            socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock,
        ):
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
        return False

    def stop(self) -> None:
        """End it by its PID (SIGTERM, then SIGKILL if it lingers)."""
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


def worker_pids(app: AppProcess) -> list[int]:
    """The arbiter's child processes: its workers."""
    pid = app.proc.pid
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def listening_sockets(port: int) -> int:
    """How many sockets listen on ``port`` (each SO_REUSEPORT worker has its own)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(r.split()[1].endswith(f":{port:04X}") and r.split()[3] == "0A" for r in rows)
