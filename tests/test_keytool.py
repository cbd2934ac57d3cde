"""contract.md 1: keys are random, shown once, stored as SHA-256, managed by a tool.

The key tool's real ``main`` writes to the same database file the running app reads;
revocation and rotation must reach the app within 5 seconds, without a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.data.api_keys import CACHE_SECONDS
from app.data.fields import MAX_SAFE_ID
from app.tools.keytool import build_parser, main
from app.tools.loader import LoadError, load_files

from .support.factories import API, assert_problem, dump_tables, query, sample, version_6_copy
from .support.stores import EACH_STORE, Store, fetch_all

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
    code, said, err = run_tool(
        capsys, "--db", str(sample_db), "revoke", str(key_id_of(sample_db, key))
    )
    assert code == 0, err
    assert re.findall(r"([0-9.]+) seconds?", said) == [f"{CACHE_SECONDS:g}"], said  # the docs'
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


@pytest.mark.parametrize("label", ["two\nlines", "a\ttab", "x" * 501])
def test_a_label_is_one_line_of_at_most_500_characters(
    sample_db: Path, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    before = sample_db.read_bytes()
    code, out, err = run_tool(
        capsys, "--db", str(sample_db), "create", "--company", "1", "--label", label
    )
    assert code == 1 and "one line of at most 500" in err
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert sample_db.read_bytes() == before
    new_key(capsys, sample_db, "create", "--company", "1", "--label", "é" * 500)


@pytest.mark.parametrize("label", ["two\nlines", "a\ttab", "x" * 501, "   "])
def test_a_loaded_key_takes_the_same_labels(
    sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    """A label the tool refuses is refused by the loader too: the list shows each key on
    one line, and rotate (which keeps the label) would refuse a key it could not make."""
    fixture = tmp_path / "keys.json"
    key = {"company_id": 1, "label": label, "key": "rk_loaded_with_its_label_0001"}
    fixture.write_text(json.dumps({"api_keys": [key]}))
    before = sample_db.read_bytes()
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [fixture])
    assert "api_keys[0].label" in str(caught.value)
    assert sample_db.read_bytes() == before
    fixture.write_text(json.dumps({"api_keys": [key | {"label": " SIEM export "}]}))
    load_files(sample_db, [fixture])
    key_id = key_id_of(sample_db, key["key"])
    new_key(capsys, sample_db, "rotate", str(key_id))


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


def test_list_upgrades_an_older_file(
    sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As every other subcommand, and as list does on PostgreSQL."""
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    code, out, err = run_tool(capsys, "--db", str(old), "list")
    assert code == 0, err
    for entry in sample()["api_keys"]:
        if "company_id" in entry:  # version 6 had no partners
            assert entry["key"][:12] in out


# ---- issue 12 item 3: revoked keys stay revoked, labels, expiry, help ----------------


def key_row(db: Path, key_id: int) -> tuple[str, str | None, str | None]:
    """A key's created_at, expires_at and revoked_at, as stored."""
    rows = query(db, "SELECT created_at, expires_at, revoked_at FROM api_keys WHERE id = ?", key_id)
    assert len(rows) == 1
    return rows[0]


def utc_seconds(stamp: str) -> float:
    """A stored UTC timestamp (YYYY-MM-DDTHH:MM:SSZ) as seconds since the epoch."""
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()


def lifetime_of(db: Path, key_id: int) -> float:
    """Seconds from a key's creation to its expiry."""
    created, expires, _ = key_row(db, key_id)
    assert expires is not None
    return utc_seconds(expires) - utc_seconds(created)


def test_a_revoked_key_is_not_rotated(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key_id = key_id_of(
        sample_db, new_key(capsys, sample_db, "create", "--company", "2", "--label", "x")
    )
    assert run_tool(capsys, "--db", str(sample_db), "revoke", str(key_id))[0] == 0
    before = dump_tables(sample_db)
    code, out, err = run_tool(capsys, "--db", str(sample_db), "rotate", str(key_id))
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "revoked" in err
    assert dump_tables(sample_db) == before


def test_revoking_a_revoked_key_says_so(
    sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_id = key_id_of(
        sample_db, new_key(capsys, sample_db, "create", "--company", "2", "--label", "x")
    )
    assert run_tool(capsys, "--db", str(sample_db), "revoke", str(key_id))[0] == 0
    revoked_at = key_row(sample_db, key_id)[2]
    code, out, err = run_tool(capsys, "--db", str(sample_db), "revoke", str(key_id))
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "already revoked" in err
    assert revoked_at is not None and revoked_at in err
    assert key_row(sample_db, key_id)[2] == revoked_at


@pytest.mark.parametrize("label", ["", "   ", "\t\n"])
def test_a_blank_label_is_refused(
    sample_db: Path, capsys: pytest.CaptureFixture[str], label: str
) -> None:
    before = dump_tables(sample_db)
    code, out, err = run_tool(
        capsys, "--db", str(sample_db), "create", "--company", "1", "--label", label
    )
    assert code == 1 and not KEY_PATTERN.search(out)
    assert len(err.strip().splitlines()) == 1 and "label" in err
    assert dump_tables(sample_db) == before


@pytest.mark.parametrize(("text", "seconds"), [("90d", 90 * 86400), ("12h", 43200), ("30m", 1800)])
def test_expiry_is_stored_in_utc_and_printed(
    sample_db: Path, capsys: pytest.CaptureFixture[str], text: str, seconds: int
) -> None:
    code, out, err = run_tool(
        capsys, "--db", str(sample_db), "create", "--company", "1", "--label", "a",
        "--expires-in", text,
    )  # fmt: skip
    assert code == 0, err
    key_id = key_id_of(sample_db, KEY_PATTERN.findall(out)[-1])
    _, expires, _ = key_row(sample_db, key_id)
    assert expires is not None and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", expires)
    assert f"expires at {expires}" in out
    assert lifetime_of(sample_db, key_id) == seconds
    listed = run_tool(capsys, "--db", str(sample_db), "list")[1]
    line = next(line for line in listed.splitlines() if line.split()[:1] == [str(key_id)])
    assert expires in line and "expired" not in line


def test_rotation_keeps_the_lifetime_unless_told(
    sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = new_key(
        capsys, sample_db, "create", "--company", "1", "--label", "a", "--expires-in", "90d"
    )
    second = new_key(capsys, sample_db, "rotate", str(key_id_of(sample_db, first)))
    assert lifetime_of(sample_db, key_id_of(sample_db, second)) == 90 * 86400
    third = new_key(
        capsys, sample_db, "rotate", str(key_id_of(sample_db, second)), "--expires-in", "2h"
    )
    assert lifetime_of(sample_db, key_id_of(sample_db, third)) == 2 * 3600
    plain = new_key(capsys, sample_db, "create", "--company", "1", "--label", "b")
    rotated = new_key(capsys, sample_db, "rotate", str(key_id_of(sample_db, plain)))
    assert key_row(sample_db, key_id_of(sample_db, rotated))[1] is None


@pytest.mark.parametrize("text", ["0d", "90", "d", "1y", "-5d", "1.5h", "90 days", "36501d"])
def test_a_bad_lifetime_is_one_line_and_exit_2(
    sample_db: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    create = ["--db", str(sample_db), "create", "--company", "1", "--label", "a"]
    before = dump_tables(sample_db)
    with pytest.raises(SystemExit) as exited:
        main([*create, f"--expires-in={text}"])  # '=': "-5d" must not look like a flag
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "lifetime" in err and "Traceback" not in err
    assert dump_tables(sample_db) == before


async def sleep_until(moment: float) -> None:
    """Wait until the wall clock passes ``moment`` (seconds since the epoch)."""
    await asyncio.sleep(max(0.0, moment - time.time()))


async def test_an_expired_key_gets_401_like_a_revoked_one_even_when_cached(
    client: TestClient, sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = new_key(
        capsys, sample_db, "create", "--company", "2", "--label", "x", "--expires-in", "3s"
    )
    _, expires, _ = key_row(sample_db, key_id_of(sample_db, key))
    assert expires is not None
    deadline = utc_seconds(expires)
    await sleep_until(deadline - 0.6)
    assert await status_with(client, key) == 200  # cached now, for less than the usual 2 s
    await sleep_until(deadline + 0.05)
    expired = await client.get(INSCRIPTIONS, headers={"X-API-KEY": key})
    revoked_key = new_key(capsys, sample_db, "create", "--company", "2", "--label", "y")
    run_tool(capsys, "--db", str(sample_db), "revoke", str(key_id_of(sample_db, revoked_key)))
    revoked = await client.get(INSCRIPTIONS, headers={"X-API-KEY": revoked_key})
    expired_body, revoked_body = (
        await assert_problem(expired, 401),
        await assert_problem(revoked, 401),
    )
    assert {**expired_body, "request_id": ""} == {**revoked_body, "request_id": ""}
    listed = run_tool(capsys, "--db", str(sample_db), "list")[1]
    line = next(line for line in listed.splitlines() if key[:12] in line)
    assert f"{expires} (expired)" in line
    assert line.rstrip().endswith("-")  # expired, not revoked


def test_every_argument_of_every_subcommand_has_help() -> None:
    parser = build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subcommands.choices) == {"create", "list", "revoke", "rotate", "partner"}
    partner = subcommands.choices["partner"]
    nested = next(a for a in partner._actions if isinstance(a, argparse._SubParsersAction))
    assert set(nested.choices) == {"create", "add-company"}
    parsers = [*subcommands.choices.items(), *nested.choices.items()]
    for name, sub in [("", parser), *parsers]:
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                assert action.help and action.help.strip(), (name, action.dest)
    for choice in subcommands._choices_actions:
        assert choice.help, choice.dest


# ---- ids past 2^53-1, and a partner's company given twice, on both stores ----------------


async def run_on(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run the key tool on the store; its exit code and its output (stdout, then stderr)."""
    where = ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]
    code = await asyncio.to_thread(main, [*where, *argv])
    out, err = capsys.readouterr()
    return code, out + err


async def stored(store: Store) -> dict[str, list[Any]]:
    """What the key tool writes, and meta (the data version): comparable before and after."""
    tables = ("partners", "partner_companies", "api_keys", "meta")
    if not store.url:
        return dump_tables(store.sqlite_path, tables)
    return {
        t: [tuple(r) for r in await fetch_all(store.url, f"SELECT * FROM {t} ORDER BY 1, 2")]
        for t in tables
    }


@EACH_STORE
async def test_no_partner_takes_an_id_past_2_53(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fixture may give a partner the largest id a client reads exactly; the next one
    would be shown wrong by /key and its export would not load: refused, nothing written."""
    await store.execute("INSERT INTO partners (id, name) VALUES (?, 'Edge')", MAX_SAFE_ID)
    before = await stored(store)
    code, said = await run_on(store, capsys, "partner", "create", "--name", "MSP")
    assert code == 1 and len(said.strip().splitlines()) == 1, said
    assert f"would take id {MAX_SAFE_ID + 1}" in said and "Traceback" not in said
    assert await stored(store) == before


@EACH_STORE
@pytest.mark.parametrize("argv", [["create", "--company", "1", "--label", "x"], ["rotate", "1"]])
async def test_no_key_takes_an_id_past_2_53(
    store: Store, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Keys are numbered the same way (SQLite: the next after the largest; PostgreSQL: a
    sequence): the same refusal, and a rotation revokes nothing."""
    if store.url:
        await store.execute(
            "SELECT setval(pg_get_serial_sequence('api_keys', 'id'), ?)", MAX_SAFE_ID
        )
    else:
        await store.execute("UPDATE api_keys SET id = ? WHERE id = 3", MAX_SAFE_ID)
    before = await stored(store)
    code, said = await run_on(store, capsys, *argv)
    assert code == 1 and len(said.strip().splitlines()) == 1, said
    assert f"would take id {MAX_SAFE_ID + 1}" in said and not KEY_PATTERN.search(said)
    assert await stored(store) == before


@EACH_STORE
async def test_a_company_the_partner_reads_already_changes_nothing(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Adding it again would move the data version: every company's ETag for nothing."""
    first = await stored(store)
    assert await run_on(store, capsys, "partner", "create", "--name", "MSP") == (
        0,
        "Created partner 2.\n",
    )
    assert await run_on(store, capsys, "partner", "add-company", "2", "1") == (
        0,
        "Partner 2 reads company 1.\n",
    )
    before = await stored(store)
    assert before["meta"] != first["meta"]  # a company added: a new data version
    for partner, company in (("2", "1"), ("1", "2")):  # the sample's partner reads 1 and 2
        assert await run_on(store, capsys, "partner", "add-company", partner, company) == (
            0,
            f"Partner {partner} already reads company {company}; nothing changed.\n",
        )
        assert await stored(store) == before


@EACH_STORE
@pytest.mark.parametrize("name", ["two\nlines", "a\ttab", "\x1b[31mred", "x" * 501])
async def test_a_partner_name_is_one_line_of_at_most_500_characters(
    store: Store, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """As a fixture's partner name must be (docs/data.md): the list shows it on one line,
    and an export of a partner the tool made loads back."""
    before = await stored(store)
    code, said = await run_on(store, capsys, "partner", "create", "--name", name)
    assert code == 1 and said == (
        "error: a partner's name is one line of at most 500 printable characters\n"
    )
    assert await stored(store) == before
    assert await run_on(store, capsys, "partner", "create", "--name", " é" * 250) == (
        0,
        "Created partner 2.\n",
    )
