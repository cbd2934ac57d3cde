"""contract.md 8 (startup, /readyz) and 9 (all-or-nothing loads) when things break.

A database that is missing, garbage, corrupted, locked or of another schema stops
``python -m app`` with one clear line and a non-zero exit (or, if it serves, /readyz 503
and problem bodies); a database that disappears while serving turns /readyz 503 without
a trace in any answer; a loader killed with SIGKILL mid-write leaves every table as it
was; a load committed while large responses stream never mixes two versions.
"""

from __future__ import annotations

import asyncio
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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.loader import load_files

from .factories import API, KEY_1, PROBLEM_KEYS, sample
from .servers import GUARD_SECONDS, ROOT, Launcher, fetch, stop

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
    "schema_version_7": lambda db, _: set_user_version(db, 7),
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


def generated_events(count: int, campaigns: list[int], first_id: int) -> list[dict[str, Any]]:
    """Synthetic events for sample campaigns, each by an employee of the right company."""
    gen = random.Random(count)
    owner = {c["id"]: c["company_id"] for c in sample()["campaigns"]}
    staff: dict[int, list[int]] = {}
    for person in sample()["employees"]:
        staff.setdefault(person["company_id"], []).append(person["id"])
    start = datetime(2025, 1, 1, tzinfo=UTC)
    events = []
    for event_id in range(first_id, first_id + count):
        campaign = gen.choice(campaigns)
        moment = start + timedelta(seconds=gen.randrange(300 * 86400))
        events.append(
            {
                "id": event_id,
                "campaign_id": campaign,
                "employee_id": gen.choice(staff[owner[campaign]]),
                "type": gen.choice(("open", "click", "report", "fail")),
                "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "with_captcha": gen.random() < 0.3,
            }
        )
    return events


def next_event_id() -> int:
    """The first event id the sample does not use."""
    return max(e["id"] for e in sample()["campaign_events"]) + 1


def table_checksums(db: Path) -> dict[str, str]:
    """sha256 of every table's rows in primary order, meta included."""
    conn = sqlite3.connect(db)
    try:
        sums = {}
        names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        for (table,) in names.fetchall():
            width = len(conn.execute(f"SELECT * FROM {table} LIMIT 0").description)
            order = ", ".join(str(i) for i in range(1, width + 1))
            digest = hashlib.sha256()
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}"):
                digest.update(repr(row).encode())
            sums[table] = digest.hexdigest()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return sums
    finally:
        conn.close()


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


def campaign_1_records(events: list[dict[str, Any]], people: list[dict[str, Any]]) -> list[Any]:
    """What /campaigns/1/events must return for these events and employees."""
    victims = {
        p["id"]: {k: p[k] for k in ("id", "first_name", "last_name", "email", "department")}
        for p in people
    }
    rows = sorted(
        (e for e in events if e["campaign_id"] == 1), key=lambda e: (e["timestamp"], e["id"])
    )
    return [
        {k: e[k] for k in ("id", "type", "timestamp")} | {"victim": victims[e["employee_id"]]}
        for e in rows
    ]


STREAM_EVENTS = 30_000
ADDED_EVENTS = 1_000
PER_PAGE = 500
EVENTS_URL = f"{API}/campaigns/1/events"


@dataclass
class Versions:
    """Campaign 1's events before and after the change load, computed from the fixtures."""

    old: list[Any]
    new: list[Any]

    def which(self, records: list[Any], page: int | None = None, total: int | None = None) -> str:
        """'old' or 'new': the one version the whole response comes from."""
        for name, every in (("old", self.old), ("new", self.new)):
            part = every if page is None else every[(page - 1) * PER_PAGE : page * PER_PAGE]
            if records == part and total in (None, len(every)):
                return name
        old_ids = {json.dumps(r, sort_keys=True) for r in self.old}
        mixed = sum(json.dumps(r, sort_keys=True) in old_ids for r in records)
        raise AssertionError(
            f"page {page}: {mixed} of {len(records)} records are old, total {total}"
        )


@pytest.fixture
def streaming(tmp_path: Path) -> tuple[Path, Path, Versions]:
    """A database whose campaign 1 holds ~30,000 events, and a load that changes each one."""
    first = next_event_id()
    events = sample()["campaign_events"] + generated_events(STREAM_EVENTS, [1], first)
    fixture = tmp_path / "big.json"
    fixture.write_text(json.dumps(sample() | {"campaign_events": events}))
    db = tmp_path / "stream.sqlite3"
    load_files(db, [fixture])
    # Renaming every employee of company 1 changes every record of campaign 1.
    renamed = [
        p | {"last_name": p["last_name"] + "-Renamed"}
        for p in sample()["employees"]
        if p["company_id"] == 1
    ]
    added = generated_events(ADDED_EVENTS, [1], first + STREAM_EVENTS)
    change = tmp_path / "change.json"
    change.write_text(json.dumps({"employees": renamed, "campaign_events": added}))
    people = {p["id"]: p for p in sample()["employees"]} | {p["id"]: p for p in renamed}
    versions = Versions(
        old=campaign_1_records(events, sample()["employees"]),
        new=campaign_1_records(events + added, list(people.values())),
    )
    return db, change, versions


async def read_version(
    session: aiohttp.ClientSession, versions: Versions, page: int | None
) -> tuple[str, str]:
    """Fetch campaign 1's events (whole or one page); return its version and ETag."""
    params = {} if page is None else {"page": str(page), "per_page": str(PER_PAGE)}
    async with session.get(EVENTS_URL, params=params) as resp:
        assert resp.status == 200, await resp.text()
        records = json.loads(await resp.read())
        total = resp.headers.get("X-Total-Count")
        version = versions.which(records, page, None if total is None else int(total))
        return version, resp.headers["ETag"]


Reading = tuple[int | None, str, str, bool]  # page, version, ETag, began after the load


async def keep_reading(
    session: aiohttp.ClientSession, versions: Versions, done: asyncio.Event, page: int | None
) -> list[Reading]:
    """Read until the load is done and one more read began after it (bounded)."""
    seen: list[Reading] = []
    for _ in range(200):
        began_after = done.is_set()
        seen.append((page, *await read_version(session, versions, page), began_after))
        if began_after:
            break
    return seen


async def test_load_committed_while_streaming(
    streaming: tuple[Path, Path, Versions], launcher: Launcher
) -> None:
    db, change, versions = streaming
    timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
    server = launcher.serve(db)
    async with aiohttp.ClientSession(
        server.base, headers={"X-API-KEY": KEY_1}, timeout=timeout
    ) as session:
        old_version, old_etag = await read_version(session, versions, None)
        assert old_version == "old"
        # Two streams stop reading after their first bytes: the server is mid-body
        # (its snapshot taken) while the load commits.
        held = [await session.get(EVENTS_URL) for _ in range(2)]
        heads = [await resp.content.read(65536) for resp in held]
        done = asyncio.Event()
        pages: list[int | None] = [None, None, 1, 40]
        readers = [keep_reading(session, versions, done, page) for page in pages]
        tasks = [asyncio.create_task(reader) for reader in readers]
        await asyncio.sleep(0.3)
        await asyncio.to_thread(load_files, db, [change])
        done.set()
        seen = [entry for task in tasks for entry in await task]
        for resp, head in zip(held, heads, strict=True):
            body = head + await resp.read()
            assert versions.which(json.loads(body)) == "old"
            assert resp.headers["ETag"] == old_etag
            resp.release()
        new_version, new_etag = await read_version(session, versions, None)
        statuses = []
        for etag in (old_etag, new_etag):
            async with session.get(EVENTS_URL, headers={"If-None-Match": etag}) as resp:
                statuses.append(resp.status)
    assert new_version == "new" and new_etag != old_etag
    assert statuses == [200, 304]
    assert all(version == "new" for _, version, _, after in seen if after)
    tags: dict[tuple[int | None, str], set[str]] = {}
    for page, version, etag, _ in seen:
        tags.setdefault((page, version), set()).add(etag)
    assert all(len(found) == 1 for found in tags.values()), tags
    for page in set(pages):
        if (page, "old") in tags and (page, "new") in tags:
            assert tags[page, "old"] != tags[page, "new"]
