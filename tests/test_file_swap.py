"""Replacing the served SQLite file by rename (operations.md, "Replacing the database file").

A file renamed over the one a server reads, while the old file's WAL still holds the
frames of a load, is served as it is: the server closes the old file and its WAL
before it opens the new one, so the new file is never read through the old frames and
the next load does not write them into it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from app.tools.loader import load_files

from .support.factories import API, KEY_1, make_sample_db, next_event_id, query
from .support.servers import GUARD_SECONDS, UNLIMITED, AppProcess, Launcher, fetch

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


def test_a_file_renamed_over_the_served_one_is_served_intact(
    sample_db: Path, tmp_path: Path
) -> None:
    old_load, new_load, next_load = (next_event_id() + n for n in range(3))
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(sample_db, *UNLIMITED)
        load_files(sample_db, [one_event(tmp_path, old_load)])  # while serving
        wait_until_served(server, old_load)
        assert Path(f"{sample_db}-wal").stat().st_size > 0  # the old WAL holds frames

        (tmp_path / "new").mkdir()
        replacement = make_sample_db(tmp_path / "new")
        load_files(replacement, [one_event(tmp_path, new_load)])
        os.replace(replacement, sample_db)

        ids = wait_until_served(server, new_load)
        assert old_load not in ids
        assert fetch(f"{server.base}/readyz")[0] == 200

        load_files(sample_db, [one_event(tmp_path, next_load)])  # the next tool run
        ids = wait_until_served(server, next_load)
        assert old_load not in ids and new_load in ids
    assert query(sample_db, "PRAGMA integrity_check") == [("ok",)]
    stored = {i for (i,) in query(sample_db, "SELECT id FROM campaign_events")}
    assert {new_load, next_load} <= stored and old_load not in stored
