"""contract.md 9 under faults (issue 11 item 13): a busy database, a full disk.

A load that finds another writer holding the database waits a bounded time, then gives up
with one line and leaves the database as it was; on a full disk the cause SQLite gives
("database or disk is full") is the one reported, not a failed rollback that hides it, and
nothing is written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.data.schema import DatabaseError
from app.tools.loader import load_files

from .support.factories import dump_tables, generated_events, next_event_id, sample
from .support.loads import write_fixture, write_lock
from .support.servers import run_python


def more_events(path: Path, count: int) -> Path:
    """A fixture of ``count`` new events for the sample's campaigns."""
    campaigns = [c["id"] for c in sample()["campaigns"]]
    return write_fixture(
        path, {"campaign_events": generated_events(count, campaigns, next_event_id())}
    )


def test_a_load_waits_a_bounded_time_for_another_writer(sample_db: Path, tmp_path: Path) -> None:
    fixture = more_events(tmp_path / "more.json", 10)
    before = dump_tables(sample_db)
    with write_lock(sample_db):
        started = time.monotonic()
        with pytest.raises(DatabaseError) as caught:
            load_files(sample_db, [fixture], lock_wait=0.5)
        waited = time.monotonic() - started
    assert str(caught.value) == (
        "database: locked by another writer; gave up waiting (try again once it has finished)"
    )
    assert waited >= 0.5
    assert dump_tables(sample_db) == before
    load_files(sample_db, [fixture])  # once the other writer is gone, the same load works
    assert dump_tables(sample_db) != before


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs mounted for this test (needs root), unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.system
def test_a_full_disk_is_reported_as_such_and_changes_nothing(
    small_disk: Path, sample_db: Path, tmp_path: Path
) -> None:
    db = small_disk / "full.sqlite3"
    shutil.copy(sample_db, db)
    fixture = more_events(tmp_path / "big.json", 40_000)  # some 4 MB of pages: more than fits
    before = dump_tables(db)
    with pytest.raises(DatabaseError) as caught:
        load_files(db, [fixture])
    assert str(caught.value) == "database: database or disk is full"
    assert dump_tables(db) == before
    refused = run_python("scripts/load_fixtures.py", str(fixture), "--db", str(db))
    assert refused.returncode != 0
    said = "load refused, database unchanged: database: database or disk is full"
    assert refused.stderr.splitlines()[-1] == said and "Traceback" not in refused.stderr
    assert dump_tables(db) == before
