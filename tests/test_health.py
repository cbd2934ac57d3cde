"""contract.md 8 (health checks, configuration, SIGTERM) and 9 (first-start bootstrap).

/healthz and /readyz need no key and spend no token; /readyz turns 503 when the
database goes away. The real server, started as ``python -m app``, creates its database
from the sample on first start, prints the sample keys only then, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from .conftest import MakeClient
from .factories import API, KEY_1, sample

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 20.0
GUARD_SECONDS = 60  # only so a broken server cannot hang the suite
CONTRACT_DEFAULTS = {
    "REPORTING_HOST": "127.0.0.1",
    "REPORTING_PORT": "8080",
    "REPORTING_RATE_BURST": "20",
    "REPORTING_RATE_PER_SECOND": "10",
    "REPORTING_AUTH_FAILURES_PER_MINUTE": "10",
    "REPORTING_LOG_FORMAT": "text",
}
OTHER_VARIABLES = (
    "REPORTING_DB",
    "REPORTING_TRUSTED_PROXIES",
    "REPORTING_CORS_ORIGINS",
    "REPORTING_LOG_LEVEL",
)


async def test_healthz_needs_no_key(client: TestClient) -> None:
    resp = await client.get("/healthz")
    assert resp.status == 200


async def test_readyz_needs_no_key(client: TestClient) -> None:
    resp = await client.get("/readyz")
    assert resp.status == 200


def replace_with_garbage(db: Path) -> None:
    """Put a file of garbage where the database was (a new inode)."""
    garbage = db.with_name("garbage.bin")
    garbage.write_bytes(b"this is not a database\x00" * 512)
    os.replace(garbage, db)


def overwrite_with_garbage(db: Path) -> None:
    """Overwrite the database file in place."""
    db.write_bytes(b"\xde\xad\xbe\xef" * 4096)


def delete(db: Path) -> None:
    """Remove the database file and its companions."""
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        path.unlink(missing_ok=True)


@pytest.mark.parametrize("breakage", [replace_with_garbage, overwrite_with_garbage, delete])
async def test_readyz_503_when_the_database_goes(
    client: TestClient, sample_db: Path, breakage: Callable[[Path], None]
) -> None:
    assert (await client.get("/readyz")).status == 200
    breakage(sample_db)
    resp = await client.get("/readyz")
    assert resp.status == 503
    assert resp.content_type == "application/json"
    text = await resp.text()
    json.loads(text)
    for leak in (str(sample_db), sample_db.name, "/tmp/", "Traceback", "sqlite3."):
        assert leak not in text, text
    assert (await client.get("/healthz")).status == 200


async def test_health_checks_spend_no_tokens(make_client: MakeClient) -> None:
    client = await make_client(rate_burst=1, rate_per_second=0.001, auth_failures_per_minute=1)
    for _ in range(5):
        for path in ("/healthz", "/readyz"):
            assert (await client.get(path)).status == 200
    # The address's failure budget and the key's bucket are both still untouched.
    assert (
        await client.get(f"{API}/course-inscriptions", headers={"X-API-KEY": KEY_1})
    ).status == 200
    assert (await client.get(f"{API}/course-inscriptions")).status == 401


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env() -> dict[str, str]:
    """The environment without any REPORTING_* setting of the caller."""
    return {k: v for k, v in os.environ.items() if not k.startswith("REPORTING_")}


def get(url: str, key: str | None = None) -> int:
    """The status of a GET, via the standard library (no app code)."""
    request = urllib.request.Request(url, headers={"X-API-KEY": key} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=GUARD_SECONDS) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@contextmanager
def server(db: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``python -m app`` on a free local port; yield it and its base URL when healthy."""
    port = free_port()
    command = [sys.executable, "-m", "app", "--db", str(db), "--port", str(port)]
    command += ["--host", "127.0.0.1"]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                if get(f"{base}/healthz") == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the server did not answer /healthz"
            time.sleep(0.1)
        yield proc, base
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stop(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """SIGTERM the server by PID; return its exit code and output."""
    os.kill(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=GUARD_SECONDS)
    return proc.returncode, out, err


def test_first_start_creates_the_database_and_prints_keys(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite3"
    with server(db) as (proc, base):
        assert db.is_file()
        for entry in sample()["api_keys"]:
            assert get(f"{base}{API}/course-inscriptions", entry["key"]) == 200
        code, out, err = stop(proc)
    assert code == 0, err
    assert base in out and f"{base}/api/docs" in out
    for entry in sample()["api_keys"]:
        assert entry["key"] in out

    with server(db) as (proc, base):
        code, out, err = stop(proc)
    assert code == 0, err
    assert base in out
    for entry in sample()["api_keys"]:
        assert entry["key"] not in out
        assert entry["key"] not in err


def run_app(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m app`` to completion (help or a refusal to start)."""
    return subprocess.run(
        [sys.executable, "-m", "app", *args],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=GUARD_SECONDS,
    )


def test_help_lists_every_variable_with_its_default() -> None:
    result = run_app("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for variable, default in CONTRACT_DEFAULTS.items():
        found = re.search(rf"\[env {variable}\] \(default: ([^)]*)\)", text)
        assert found is not None, variable
        assert found.group(1) in (default, f"{default}.0"), (variable, found.group(1))
    for variable in OTHER_VARIABLES:
        assert re.search(rf"\[env {variable}\] \(default: ?[^)]*\)", text), variable


@pytest.mark.parametrize(
    "content", [None, b"garbage, not SQLite" * 100], ids=["missing", "garbage"]
)
def test_unusable_database_without_bootstrap(tmp_path: Path, content: bytes | None) -> None:
    db = tmp_path / "db.sqlite3"
    if content is not None:
        db.write_bytes(content)
    port = str(free_port())
    result = run_app("--db", str(db), "--bootstrap", "false", "--port", port, "--host", "127.0.0.1")
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert db.exists() == (content is not None)
    if content is not None:
        assert db.read_bytes() == content
