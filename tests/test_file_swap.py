"""Replacing the served SQLite file (operations.md, "Replacing the database file").

A file renamed over the one a server reads, while the old file's WAL still holds the
frames of a load, is served as it is: the server closes the old file and its WAL
before it opens the new one, so the new file is never read through the old frames and
the next load does not write them into it. ``reporting-swap`` makes a load safe at once,
before any server noticed; with two workers each lets go of the swapped file on its own (a
plain rename under several workers is documented as unsafe); the tool refuses a file that
is not a database in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.data.pool import ReadPool
from app.data.schema import SCHEMA_VERSION, DatabaseError
from app.data.store import Unavailable
from app.tools.fixture_reader import Item
from app.tools.loader import load_files, load_items
from app.tools.staging import file_items
from app.tools.swap import swap

from .support.factories import (
    API,
    EVENTS_INDEX_SINCE_VERSION_12,
    KEY_1,
    make_sample_db,
    next_event_id,
    older_copy,
    query,
)
from .support.servers import (
    GUARD_SECONDS,
    UNLIMITED,
    AppProcess,
    Launcher,
    RedisServer,
    fetch,
    require_redis_server,
    run_python,
)

pytestmark = pytest.mark.system  # starts a server process

CAMPAIGN = f"{API}/campaigns/1/events?per_page=500"


def one_event(directory: Path, event_id: int) -> Path:
    """A fixture file of one more event of campaign 1 (company 1)."""
    event = {"id": event_id, "campaign_id": 1, "employee_id": 1, "type": "open",
             "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False}  # fmt: skip
    path = directory / f"event{event_id}.json"
    path.write_text(json.dumps({"campaign_events": [event]}))
    return path


def served_ids(server: AppProcess) -> set[int]:
    """The events of campaign 1 served now; none while the server swaps files (a 503)."""
    status, headers, body = fetch(server.base + CAMPAIGN, {"X-API-KEY": KEY_1})
    if status == 503 and "Retry-After" in headers:
        return set()
    assert status == 200, body
    return {event["id"] for event in json.loads(body)}


def wait_until_served(server: AppProcess, event_id: int) -> set[int]:
    """The ids served once ``event_id`` is among them (the server sees the change)."""
    deadline = time.monotonic() + GUARD_SECONDS
    while event_id not in (ids := served_ids(server)):
        assert time.monotonic() < deadline, f"event {event_id} is never served"
        time.sleep(0.1)
    return ids


def serve_with_old_frames(launcher: Launcher, db: Path, old_load: int, *flags: str) -> AppProcess:
    """A server of ``db`` after a load while serving: the old file's WAL holds frames."""
    server = launcher.serve(db, *UNLIMITED, *flags)
    load_files(db, [one_event(db.parent, old_load)])
    wait_until_served(server, old_load)
    assert Path(f"{db}-wal").stat().st_size > 0
    return server


def served_by_all(server: AppProcess, event_id: int, answers: int = 20) -> set[int]:
    """The ids once ``answers`` answers in a row hold ``event_id`` (every worker, in all
    likelihood: each new connection goes to either)."""
    deadline = time.monotonic() + GUARD_SECONDS
    streak = 0
    while streak < answers:
        ids = served_ids(server)
        streak = streak + 1 if event_id in ids else 0
        assert time.monotonic() < deadline, f"event {event_id} is not served by every worker"
    return ids


def new_file(directory: Path, new_load: int) -> Path:
    """Another database: the sample plus one event of its own."""
    directory.mkdir()
    replacement = make_sample_db(directory)
    load_files(replacement, [one_event(directory, new_load)])
    return replacement


def assert_intact(db: Path, present: set[int], absent: int) -> None:
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    stored = {i for (i,) in query(db, "SELECT id FROM campaign_events")}
    assert present <= stored and absent not in stored


def test_a_file_renamed_over_the_served_one_is_served_intact(
    sample_db: Path, tmp_path: Path
) -> None:
    old_load, new_load, next_load = (next_event_id() + n for n in range(3))
    with Launcher(tmp_path) as launcher:
        server = serve_with_old_frames(launcher, sample_db, old_load)
        os.replace(new_file(tmp_path / "new", new_load), sample_db)
        ids = wait_until_served(server, new_load)
        assert old_load not in ids
        assert fetch(f"{server.base}/readyz")[0] == 200
        load_files(sample_db, [one_event(tmp_path, next_load)])  # the next tool run
        ids = wait_until_served(server, next_load)
        assert old_load not in ids and new_load in ids
    assert_intact(sample_db, {new_load, next_load}, old_load)


def test_the_swap_tool_makes_a_load_right_after_it_safe(sample_db: Path, tmp_path: Path) -> None:
    old_load, new_load, next_load = (next_event_id() + n for n in range(3))
    with Launcher(tmp_path) as launcher:
        server = serve_with_old_frames(launcher, sample_db, old_load)
        replacement = new_file(tmp_path / "new", new_load)
        done = run_python("scripts/swap_database.py", str(replacement), "--db", str(sample_db))
        assert done.returncode == 0 and done.stdout.startswith("Swapped"), done.stderr
        assert not replacement.exists()
        load_files(sample_db, [one_event(tmp_path, next_load)])  # before any server looked
        ids = wait_until_served(server, next_load)
        assert old_load not in ids and new_load in ids
    assert_intact(sample_db, {new_load, next_load}, old_load)


def test_the_swap_tool_refuses_a_file_that_is_not_a_database(
    sample_db: Path, tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(b"not a database" * 100)
    done = run_python("scripts/swap_database.py", str(garbage), "--db", str(sample_db))
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("swap refused: ") and "Traceback" not in done.stderr
    assert garbage.exists() and query(sample_db, "PRAGMA integrity_check") == [("ok",)]


async def test_a_read_in_progress_holds_no_other_request_while_the_pool_reopens(
    sample_db: Path, tmp_path: Path
) -> None:
    """A file swapped while a read is borrowed (a stream may take minutes): the other
    requests are refused at once (503) rather than held until it ends; the reopen waits
    in the background, and once the read is returned the new file is served."""
    pool = await ReadPool.open(sample_db, 2)
    try:
        old_token = await pool.current_token()
        replacement = new_file(tmp_path / "new", next_event_id())
        new_token = query(replacement, "SELECT value FROM meta WHERE key = 'data_token'")[0][0]
        async with pool.acquire():  # a stream's connection, borrowed
            os.replace(replacement, sample_db)
            for _ in range(3):  # each is refused without waiting for the borrowed read
                with pytest.raises(Unavailable):
                    await asyncio.wait_for(pool.current_token(), GUARD_SECONDS)
        for _ in range(int(GUARD_SECONDS / 0.05)):
            with contextlib.suppress(Unavailable):
                if await pool.current_token() == new_token:
                    break
            await asyncio.sleep(0.05)
        assert await pool.current_token() == new_token != old_token
    finally:
        await pool.close()


def test_the_swap_tool_refuses_a_link_or_the_served_file_itself(
    sample_db: Path, tmp_path: Path
) -> None:
    """Renaming a symbolic link moves the link, not the database: refused, as is swapping
    the served file with itself, or a file in as a database's -wal. Each time one line,
    and the files as they were."""
    build = tmp_path / "build"
    build.mkdir()
    new = build / "new.sqlite3"
    new.write_bytes(sample_db.read_bytes())
    link = tmp_path / "link.sqlite3"
    link.symlink_to(new.relative_to(tmp_path))
    served_link = tmp_path / "served-link.sqlite3"
    served_link.symlink_to(sample_db.name)
    before = sample_db.read_bytes()
    wal = Path(f"{sample_db}-wal")  # a companion's name: the database's next open drops it
    pairs = [(link, sample_db), (new, served_link), (sample_db, sample_db), (new, wal)]
    for given, served in pairs:
        done = run_python("scripts/swap_database.py", str(given), "--db", str(served))
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("swap refused: ") and "Traceback" not in done.stderr
    assert link.is_symlink() and served_link.is_symlink() and new.exists()
    assert sample_db.read_bytes() == before and not wal.exists()


def test_a_usage_error_is_one_line() -> None:
    done = run_python("scripts/swap_database.py")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr


def test_two_workers_let_go_of_a_swapped_file(sample_db: Path, tmp_path: Path) -> None:
    require_redis_server()
    old_load, new_load, next_load = (next_event_id() + n for n in range(3))
    redis = RedisServer(tmp_path).start()
    try:
        with Launcher(tmp_path) as launcher:
            workers = ("--workers", "2", "--redis-url", redis.url)
            server = serve_with_old_frames(launcher, sample_db, old_load, *workers)
            replacement = new_file(tmp_path / "new", new_load)
            done = run_python("scripts/swap_database.py", str(replacement), "--db", str(sample_db))
            assert done.returncode == 0, done.stderr
            assert old_load not in served_by_all(server, new_load)
            load_files(sample_db, [one_event(tmp_path, next_load)])
            assert old_load not in served_by_all(server, next_load)
    finally:
        redis.stop()
    assert_intact(sample_db, {new_load, next_load}, old_load)


def test_a_load_that_opened_the_file_before_a_swap_writes_nothing(
    sample_db: Path, tmp_path: Path
) -> None:
    """A load stages its files before it takes the write lock: a file swapped in
    meanwhile is not the one it opened, and its write would go to the old, unlinked
    file, reported done and lost. It is refused, and the swapped-in file served as is."""
    event_id = next_event_id()
    replacement = new_file(tmp_path / "new", event_id)
    staged = file_items(one_event(tmp_path, event_id + 1))

    def swapped_while_staging() -> Iterator[Item]:
        swap(replacement, sample_db)
        yield from staged

    with pytest.raises(DatabaseError, match="replaced"):
        load_items(sample_db, [("late", swapped_while_staging())])
    assert_intact(sample_db, {event_id}, event_id + 1)


def test_the_swap_tool_upgrades_a_file_of_an_older_schema(sample_db: Path, tmp_path: Path) -> None:
    """A backup from before an upgrade is upgraded as it is swapped in, as the server
    upgrades its file at start: servers do not open a file of another version."""
    old = older_copy(sample_db, tmp_path / "backup.sqlite3", EVENTS_INDEX_SINCE_VERSION_12, 12)
    done = run_python("scripts/swap_database.py", str(old), "--db", str(sample_db))
    assert done.returncode == 0, done.stderr
    assert query(sample_db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(sample_db, "PRAGMA integrity_check") == [("ok",)]
