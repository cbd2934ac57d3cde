"""A database of schema version 1 is upgraded in place before serving (contract.md 10, 13).

Version 1 had no campaign targets, no event ip/user_agent/change sequence and no key
expiry. The upgrade adds them: every (campaign, employee) with an event becomes a
target (an event implies it), existing events take their feed places in id order, and
two processes starting on the same old file at once upgrade it exactly once.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.data.schema import SCHEMA_VERSION, upgrade_if_older

from .support.factories import API, KEY_1, query, sample
from .support.servers import Launcher, clean_env, fetch

pytestmark = pytest.mark.system

# Indexes and triggers that version 1 had; version 2 added every other one.
V1_INDEXES = {
    "campaign_events_by_campaign",
    "campaign_events_by_employee",
    "inscriptions_by_company",
    "team_members_by_team",
    "course_sections_by_course",
    "api_keys_by_company",
}
V1_TRIGGERS = {
    "campaign_events_same_company",
    "inscriptions_same_company",
    "team_members_same_company",
}
DOWNGRADE = (
    "DROP TABLE campaign_targets",
    "ALTER TABLE campaign_events DROP COLUMN ip",
    "ALTER TABLE campaign_events DROP COLUMN user_agent",
    "ALTER TABLE campaign_events DROP COLUMN seq",
    "ALTER TABLE api_keys DROP COLUMN expires_at",
    "DELETE FROM meta WHERE key IN ('change_seq', 'cursor_secret')",
    "PRAGMA user_version = 1",
)


def version_1_copy(sample_db: Path, directory: Path) -> Path:
    """The sample as a version 1 file: what version 2 added, dropped again."""
    old = directory / "old.sqlite3"
    conn = sqlite3.connect(sample_db, isolation_level=None)
    conn.execute("VACUUM INTO ?", (str(old),))
    conn.close()
    conn = sqlite3.connect(old, isolation_level=None)
    added = [
        f'DROP {kind.upper()} "{name}"'
        for kind, name in conn.execute(
            "SELECT type, name FROM sqlite_master WHERE sql IS NOT NULL"
            " AND type IN ('index', 'trigger')"
        )
        if name not in (V1_INDEXES if kind == "index" else V1_TRIGGERS)
    ]
    for statement in (*added, *DOWNGRADE):
        conn.execute(statement)
    conn.execute("PRAGMA journal_mode = WAL")  # as every file version 1 wrote
    conn.close()
    return old


def test_a_version_1_file_is_upgraded_once_by_two_processes_at_once(
    sample_db: Path, tmp_path: Path
) -> None:
    old = version_1_copy(sample_db, tmp_path)
    assert query(old, "PRAGMA user_version") == [(1,)]
    script = (
        "import sys; from app.data.schema import upgrade_if_older; upgrade_if_older(sys.argv[1])"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(old)],
            env=clean_env(),
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert not upgrade_if_older(old)  # nothing left to do

    implied = {(e["campaign_id"], e["employee_id"]) for e in sample()["campaign_events"]}
    targets = set(query(old, "SELECT campaign_id, employee_id FROM campaign_targets"))
    assert targets == implied
    by_id = query(old, "SELECT id, seq FROM campaign_events ORDER BY id")
    assert [seq for _, seq in by_id] == list(range(1, len(by_id) + 1))
    assert query(old, "SELECT value FROM meta WHERE key = 'change_seq'") == [(str(len(by_id)),)]


def test_the_server_upgrades_an_old_file_and_serves_it(sample_db: Path, tmp_path: Path) -> None:
    old = version_1_copy(sample_db, tmp_path)
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(old)
        status, _, body = fetch(f"{server.base}{API}/campaigns/1/events", {"X-API-KEY": KEY_1})
        assert status == 200
        expected = [e["id"] for e in sample()["campaign_events"] if e["campaign_id"] == 1]
        assert sorted(e["id"] for e in json.loads(body)) == sorted(expected)
    assert "Upgraded" in server.output_text()[0]
