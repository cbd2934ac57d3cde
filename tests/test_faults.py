"""contract.md 8 (startup, /readyz) and 9 (all-or-nothing loads) when things break.

A database that is missing, garbage, corrupted, locked or of another schema stops
``python -m app`` with one clear line and a non-zero exit (or, if it serves, /readyz 503
and problem bodies); a database that disappears while serving turns /readyz 503 without
a trace in any answer; a loader killed with SIGKILL mid-write leaves every table as it
was. A load committed while large responses stream: test_streaming_load.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from email.message import Message
from pathlib import Path

import pytest

from app.data.schema import SCHEMA_VERSION

from .support.factories import (
    API,
    KEY_1,
    PROBLEM_KEYS,
    dump_tables,
    generated_events,
    next_event_id,
    query,
    sample,
)
from .support.servers import GUARD_SECONDS, ROOT, Launcher, fetch, stop

pytestmark = pytest.mark.system  # starts server processes (make test-fast skips it)

LEAKS = ("Traceback", "sqlite", "SELECT ", ".py", "/tmp/", "/work/")
PROBES = (f"{API}/campaigns/1/events", f"{API}/victimsapi/1/events", f"{API}/course-inscriptions")
KILL_EVENTS = 50_000  # the write transaction lasts about a second and spills ~6 MB
KILL_AT_WAL_BYTES = 3 << 20  # about half-way through the write


def assert_no_trace(status: int, headers: Message, body: bytes) -> None:
    """A 200 is a JSON array; anything else is a problem+json 5xx without internals."""
    text = body.decode()
    for leak in LEAKS:
        assert leak not in text, text
    if status == 200:
        assert isinstance(json.loads(text), list)
        return
    assert status >= 500, text
    assert headers["Content-Type"].startswith("application/problem+json"), headers
    assert set(json.loads(text)) >= PROBLEM_KEYS, text


def overwrite(db: Path, offset: int, data: Callable[[int], bytes]) -> None:
    """Replace the file's bytes from ``offset`` on with ``data(length)``."""
    size = db.stat().st_size
    with db.open("r+b") as file:
        file.seek(offset)
        file.write(data(size - offset))


def set_user_version(db: Path, version: int) -> None:
    """Mark a database as another schema version."""
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def hold_exclusive_lock(db: Path, stack: ExitStack) -> None:
    """Hold an EXCLUSIVE lock on the file until the test is over."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    stack.callback(conn.close)


def foreign_database(db: Path, stack: ExitStack) -> None:
    """Someone else's SQLite file (schema version 0, other tables)."""
    db.unlink()
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.commit()
    conn.close()


Breakage = Callable[[Path, ExitStack], None]
BREAKAGES: dict[str, Breakage] = {
    "missing": lambda db, _: db.unlink(),
    "garbage": lambda db, _: db.write_bytes(random.Random(1).randbytes(1 << 16)),
    "zeroed_after_first_page": lambda db, _: overwrite(db, 4096, bytes),
    "random_after_first_page": lambda db, _: overwrite(db, 4096, random.Random(2).randbytes),
    "locked": hold_exclusive_lock,
    "schema_version_next": lambda db, _: set_user_version(db, SCHEMA_VERSION + 1),
    "foreign_database": foreign_database,
    # The meta page survives: only a full check at start finds the damage.
    "second_half_random": lambda db, _: overwrite(
        db, db.stat().st_size // 2, random.Random(3).randbytes
    ),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_unusable_database_at_start(sample_db: Path, launcher: Launcher, name: str) -> None:
    with ExitStack() as stack:
        BREAKAGES[name](sample_db, stack)
        app = launcher.start(sample_db)
        serving = app.serving()
        if serving:
            answers = [fetch(app.base + path, {"X-API-KEY": KEY_1}) for path in PROBES]
            ready = fetch(f"{app.base}/readyz")
        code = stop(app.proc)
    err = app.output()[1].decode()
    if serving:
        assert ready[0] == 503, f"serving a broken database: /readyz {ready[0]}"
        for answer in answers:
            assert_no_trace(*answer)
        return
    assert code != 0, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and "Traceback" not in err


def move_away(db: Path, suffix: str | None) -> None:
    """Delete (suffix None) or rename the database and its -wal/-shm companions."""
    for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if suffix is None:
            path.unlink(missing_ok=True)
        elif path.exists():
            path.rename(f"{path}{suffix}")


@pytest.mark.parametrize("how", ["delete", "rename"])
def test_database_disappears_while_serving(
    sample_db: Path, tmp_path: Path, launcher: Launcher, how: str
) -> None:
    server = launcher.serve(sample_db)
    assert fetch(f"{server.base}/readyz")[0] == 200
    for path in PROBES:
        assert fetch(server.base + path, {"X-API-KEY": KEY_1})[0] == 200
    move_away(sample_db, None if how == "delete" else ".moved")
    status, _, body = fetch(f"{server.base}/readyz")
    assert status == 503, body
    assert json.loads(body)["status"] == "unavailable"
    for leak in (*LEAKS, sample_db.name):
        assert leak not in body.decode()
    for path in PROBES * 3:
        assert_no_trace(*fetch(server.base + path, {"X-API-KEY": KEY_1}))
    assert fetch(f"{server.base}/healthz")[0] == 200
    if how == "rename":
        for moved in tmp_path.glob("*.moved"):
            moved.rename(str(moved).removesuffix(".moved"))
        assert fetch(f"{server.base}/readyz")[0] == 200


def table_checksums(db: Path) -> dict[str, str]:
    """sha256 of every table's rows in primary order, meta included."""
    sums = {
        table: hashlib.sha256(b"".join(repr(row).encode() for row in rows)).hexdigest()
        for table, rows in dump_tables(db).items()
    }
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    return sums


def test_loader_killed_mid_write_changes_nothing(sample_db: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    document = {k: sample()[k] for k in ("companies", "employees", "campaigns")}
    campaigns = [c["id"] for c in sample()["campaigns"]]
    document["campaign_events"] = generated_events(KILL_EVENTS, campaigns, next_event_id())
    big.write_text(json.dumps(document))
    before = table_checksums(sample_db)
    wal = Path(f"{sample_db}-wal")
    wal_before = wal.stat().st_size if wal.exists() else 0
    command = [sys.executable, "scripts/load_fixtures.py", str(big), "--db", str(sample_db)]
    loader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 4 * GUARD_SECONDS
        # Pages spill into the WAL only inside the write transaction, before COMMIT.
        inside = False
        while not inside and loader.poll() is None and time.monotonic() < deadline:
            inside = wal.exists() and wal.stat().st_size > wal_before + KILL_AT_WAL_BYTES
            time.sleep(0 if inside else 0.002)
        assert inside and loader.poll() is None, "the load was not caught in its write"
        os.kill(loader.pid, signal.SIGKILL)
    finally:
        stop(loader)
    assert loader.returncode == -signal.SIGKILL
    assert table_checksums(sample_db) == before
