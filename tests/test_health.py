"""contract.md 8 (health checks, configuration, SIGTERM) and 9 (first-start bootstrap).

/healthz and /readyz need no key and spend no token; /readyz turns 503 when the
database goes away. The real server, started as ``python -m app``, creates its database
from the sample on first start, prints the sample keys only then, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from app.data.schema import DatabaseError, check_readable

from .support.clients import MakeClient
from .support.factories import API, KEY_1, assert_problem, sample
from .support.servers import GUARD_SECONDS, VARIABLES, Launcher, fetch, run_python, stop

CONTRACT_DEFAULTS = {name: value for name, value in VARIABLES.items() if value is not None}
OTHER_VARIABLES = tuple(name for name, value in VARIABLES.items() if value is None)


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


@pytest.mark.system
def test_first_start_creates_the_database_and_prints_keys(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "new.sqlite3"
    app = launcher.serve(db, bootstrap=True)
    assert db.is_file()
    url = f"{app.base}{API}/course-inscriptions"
    for entry in sample()["api_keys"]:
        company = {"X-Company-ID": "1"} if "partner_id" in entry else {}
        assert fetch(url, {"X-API-KEY": entry["key"], **company})[0] == 200
    code = stop(app.proc)
    out, err = app.output_text()
    assert code == 0, err
    assert app.base in out and f"{app.base}/api/docs" in out
    for entry in sample()["api_keys"]:
        assert entry["key"] in out

    again = launcher.serve(db, bootstrap=True)
    code = stop(again.proc)
    out, err = again.output_text()
    assert code == 0, err
    assert again.base in out
    for entry in sample()["api_keys"]:
        assert entry["key"] not in out
        assert entry["key"] not in err


@pytest.mark.system
def test_help_lists_every_variable_with_its_default() -> None:
    result = run_python("-m", "app", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for variable, default in CONTRACT_DEFAULTS.items():
        found = re.search(rf"\[env {variable}\] \(default: ([^)]*)\)", text)
        assert found is not None, variable
        assert found.group(1) in (default, f"{default}.0"), (variable, found.group(1))
    for variable in OTHER_VARIABLES:
        assert re.search(rf"\[env {variable}\] \(default: ?[^)]*\)", text), variable


@pytest.mark.system
@pytest.mark.parametrize(
    "content", [None, b"garbage, not SQLite" * 100], ids=["missing", "garbage"]
)
def test_unusable_database_without_bootstrap(
    tmp_path: Path, launcher: Launcher, content: bytes | None
) -> None:
    db = tmp_path / "db.sqlite3"
    if content is not None:
        db.write_bytes(content)
    app = launcher.start(db)  # --bootstrap false
    code = app.proc.wait(timeout=GUARD_SECONDS)
    err = app.output_text()[1]
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert db.exists() == (content is not None)
    if content is not None:
        assert db.read_bytes() == content


@pytest.mark.parametrize(
    ("dropped", "path"),
    [
        ("DROP TABLE campaign_funnels", f"{API}/campaigns"),
        ("DROP INDEX employees_victims", f"{API}/campaigns/1/events"),  # read INDEXED BY it
    ],
)
async def test_a_table_dropped_behind_the_writers_back_is_503_and_not_ready(
    client: TestClient,
    sample_db: Path,
    dropped: str,
    path: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The file can no longer answer those reads: 503 and one log line, not a 500 and
    its traceback; /readyz names what is missing (and so would a start)."""
    caplog.set_level(logging.WARNING)
    assert (await client.get("/readyz")).status == 200
    with sqlite3.connect(sample_db) as conn:
        conn.execute(dropped)
    for _ in range(3):
        response = await client.get(path, headers={"X-API-KEY": KEY_1})
        await assert_problem(response, 503)
    assert not [r for r in caplog.records if r.exc_info], caplog.text  # no 500's traceback
    ready = await client.get("/readyz")
    assert ready.status == 503
    with pytest.raises(DatabaseError, match=dropped.split()[-1]):
        check_readable(sample_db)
