"""contract.md 1: keys are random, shown once, stored as SHA-256, managed by a tool.

The key tool's real ``main`` writes to the same database file the running app reads;
revocation and rotation must reach the app within 5 seconds, without a restart.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import sqlite3
import time
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient

from app.tools.keytool import main

from .support.factories import API, sample

KEY_PATTERN = re.compile(r"rk_[A-Za-z0-9_-]+")
INSCRIPTIONS = f"{API}/course-inscriptions?per_page=500"
REVOCATION_SECONDS = 5.0


def run_tool(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the key tool as the command line would; return exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def new_key(capsys: pytest.CaptureFixture[str], db: Path, *argv: str) -> str:
    """The one key a create/rotate printed (the only time it is shown)."""
    code, out, err = run_tool(capsys, "--db", str(db), *argv)
    assert code == 0, err
    found = [k for k in KEY_PATTERN.findall(out) if len(k) > 20]
    assert len(found) == 1, out
    assert "not shown again" in out
    return found[0]


def key_id_of(db: Path, key: str) -> int:
    """The id of a key, found by its SHA-256 hash computed here."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT id FROM api_keys WHERE key_hash = ?",
            (hashlib.sha256(key.encode()).hexdigest(),),
        ).fetchone()
    finally:
        conn.close()
    assert row is not None, "the hash of the new key is not stored"
    return int(row[0])


def company_2_emails() -> set[str]:
    """Emails of company 2's employees, from the fixture."""
    return {e["email"] for e in sample()["employees"] if e["company_id"] == 2}


def company_2_inscription_count() -> int:
    """How many inscriptions company 2 has, from the fixture."""
    owner = {e["id"]: e["company_id"] for e in sample()["employees"]}
    return sum(1 for i in sample()["inscriptions"] if owner[i["employee_id"]] == 2)


async def status_with(client: TestClient, key: str) -> int:
    """The status of the inscriptions endpoint for a key."""
    async with client.get(INSCRIPTIONS, headers={"X-API-KEY": key}) as resp:
        return resp.status


async def wait_for_status(client: TestClient, key: str, expected: int) -> int:
    """Poll until the key gets ``expected`` or the contract's 5 seconds are up."""
    deadline = time.monotonic() + REVOCATION_SECONDS
    status = await status_with(client, key)
    while status != expected and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        status = await status_with(client, key)
    return status


async def test_created_key_serves_its_company_only(
    client: TestClient, sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = new_key(capsys, sample_db, "create", "--company", "2", "--label", "reports")
    resp = await client.get(INSCRIPTIONS, headers={"X-API-KEY": key})
    assert resp.status == 200
    body = await resp.json()
    assert len(body) == company_2_inscription_count()
    assert {row["victim_email"] for row in body} <= company_2_emails()


async def test_list_shows_prefix_never_the_secret(
    sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = new_key(capsys, sample_db, "create", "--company", "2", "--label", "reports")
    key_id = key_id_of(sample_db, key)
    code, out, _ = run_tool(capsys, "--db", str(sample_db), "list")
    assert code == 0
    line = next(line for line in out.splitlines() if line.split()[:1] == [str(key_id)])
    assert "Bluefin Health" in line and "reports" in line and key[:12] in line
    assert line.rstrip().endswith("-")  # not revoked
    assert key not in out
    assert hashlib.sha256(key.encode()).hexdigest() not in out
    for sample_key in sample()["api_keys"]:
        assert sample_key["key"] not in out


def test_database_holds_only_the_hash(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = new_key(capsys, sample_db, "create", "--company", "2", "--label", "reports")
    files = [p for p in (sample_db, Path(f"{sample_db}-wal")) if p.exists()]
    stored = b"".join(p.read_bytes() for p in files)
    assert key.encode() not in stored
    assert key[12:].encode() not in stored  # not even the part after the prefix
    assert hashlib.sha256(key.encode()).hexdigest().encode() in stored


async def test_revoked_key_gets_401_without_restart(
    client: TestClient, sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = new_key(capsys, sample_db, "create", "--company", "2", "--label", "reports")
    assert await status_with(client, key) == 200  # now cached by the app
    code, _, err = run_tool(
        capsys, "--db", str(sample_db), "revoke", str(key_id_of(sample_db, key))
    )
    assert code == 0, err
    assert await wait_for_status(client, key, 401) == 401
    code, out, _ = run_tool(capsys, "--db", str(sample_db), "list")
    line = next(line for line in out.splitlines() if key[:12] in line)
    assert not line.rstrip().endswith("-")  # the revocation time is listed


async def test_rotate_revokes_old_and_serves_new(
    client: TestClient, sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = new_key(capsys, sample_db, "create", "--company", "2", "--label", "reports")
    assert await status_with(client, old) == 200
    new = new_key(capsys, sample_db, "rotate", str(key_id_of(sample_db, old)))
    assert new != old
    assert await wait_for_status(client, old, 401) == 401
    resp = await client.get(INSCRIPTIONS, headers={"X-API-KEY": new})
    assert resp.status == 200
    assert {row["victim_email"] for row in await resp.json()} <= company_2_emails()
    conn = sqlite3.connect(sample_db)
    try:
        rows = conn.execute(
            "SELECT company_id, label FROM api_keys WHERE id IN (?, ?)",
            (key_id_of(sample_db, old), key_id_of(sample_db, new)),
        ).fetchall()
    finally:
        conn.close()
    assert rows == [(2, "reports"), (2, "reports")]


def test_keys_are_random_and_long(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = new_key(capsys, sample_db, "create", "--company", "1", "--label", "a")
    second = new_key(capsys, sample_db, "create", "--company", "1", "--label", "a")
    assert first != second
    for key in (first, second):
        assert key.startswith("rk_")
        assert len(key) - len("rk_") >= 43  # 32 random bytes in URL-safe base64


@pytest.mark.parametrize("command", ["revoke", "rotate"])
def test_unknown_key_id_is_refused(
    sample_db: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    before = sample_db.read_bytes()
    code, out, err = run_tool(capsys, "--db", str(sample_db), command, "999")
    assert code == 1
    assert "999" in err and len(err.strip().splitlines()) == 1
    assert out == ""
    assert sample_db.read_bytes() == before


def test_unknown_company_is_refused(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_tool(
        capsys, "--db", str(sample_db), "create", "--company", "9", "--label", "x"
    )
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and not KEY_PATTERN.search(out)


@pytest.mark.parametrize("argv", [["list"], ["revoke", "1"], ["rotate", "1"]])
def test_missing_database_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    missing = tmp_path / "missing.sqlite3"
    code, _, err = run_tool(capsys, "--db", str(missing), *argv)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_list_takes_no_write_lock(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 10 item 6: reading the keys neither takes nor waits for the write lock."""
    writer = sqlite3.connect(sample_db, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a writer (a load, a key change) is busy
        writer.execute("UPDATE api_keys SET label = 'uncommitted'")
        code, out, err = run_tool(capsys, "--db", str(sample_db), "list")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert code == 0, err
    assert "uncommitted" not in out
    for entry in sample()["api_keys"]:
        assert entry["key"][:12] in out
