"""A database of an older schema version is upgraded in place (contract.md 10, 11, 13, 15).

Version 1 had no campaign targets, no event ip/user_agent/change sequence and no key
expiry. The upgrade adds them: every (campaign, employee) with an event becomes a
target (an event implies it), existing events take their feed places in id order, and
two processes starting on the same old file at once upgrade it exactly once.
Version 2 had no case-folded campaign title (``title_key``, the title filter's column):
the upgrade fills it with Python's casefold, as the loaders write it ("Straße" matches
"STRASSE", which SQL's lower() would miss), on SQLite and on PostgreSQL, where the tools
and the server's start upgrade a version 2 database in one transaction.
Version 4 had no verdicts: the upgrade decides them, and an event that is not human comes
again on the feed (tests/test_automation.py upgrades version 4 files on both stores).
Version 5's index of each type's events had no verdict: the upgrade makes it again with
it, deciding no verdict again.
Version 6 had no partners and unscoped company keys: the upgrade keeps every key, which
then holds every scope, and folds each company's name (tests/test_completion_dates.py
checks the same step's completion dates).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.data import schema
from app.data.api_keys import ALL_SCOPES
from app.data.pg.schema import ensure_schema
from app.data.schema import SCHEMA_VERSION, connect_writer, upgrade_if_older, write_transaction
from app.tools import generator, gophish, keytool, loader, reclassify, webhooks
from app.tools.gophish_mapping import stable_id
from app.tools.pg_loader import load_pg

from .support.clients import MakeClient
from .support.factories import (
    API,
    KEY_1,
    PG_SINCE_VERSION_6,
    SINCE_VERSION_6,
    get,
    older_copy,
    query,
    sample,
    to_version_6,
    version_6_copy,
)
from .support.servers import GUARD_SECONDS, ROOT, Launcher, clean_env, fetch
from .support.stores import read_only_role
from .support.verdicts import decide

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
# What version 5 added: the events' verdicts and the settings they were made with (and
# version 6, the verdict in the campaigns' index of each type's events).
DOWNGRADE_TO_4 = (
    *SINCE_VERSION_6,
    "DROP INDEX IF EXISTS campaign_events_by_type",
    "ALTER TABLE campaign_events DROP COLUMN verdict",
    "ALTER TABLE campaign_events DROP COLUMN reasons",
    "DELETE FROM meta WHERE key LIKE 'automation_rules:%'",
)
DOWNGRADE = (
    *DOWNGRADE_TO_4,
    "ALTER TABLE campaigns DROP COLUMN title_key",
    "DROP TABLE campaign_targets",
    "ALTER TABLE campaign_events DROP COLUMN ip",
    "ALTER TABLE campaign_events DROP COLUMN user_agent",
    "ALTER TABLE campaign_events DROP COLUMN seq",
    "ALTER TABLE api_keys DROP COLUMN expires_at",
    "DELETE FROM meta WHERE key IN ('change_seq', 'cursor_secret')",
    "PRAGMA user_version = 1",
)


def copy_into(sample_db: Path, target: Path) -> Path:
    """A consistent copy of the sample file (VACUUM INTO), to be aged by a test."""
    conn = sqlite3.connect(sample_db, isolation_level=None)
    conn.execute("VACUUM INTO ?", (str(target),))
    conn.close()
    return target


def version_1_copy(sample_db: Path, directory: Path) -> Path:
    """The sample as a version 1 file: what version 2 added, dropped again."""
    old = copy_into(sample_db, directory / "old.sqlite3")
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
    # Events take their places in id order; then version 5 decides their verdicts (no
    # sending times, addresses or agents in version 1) and those that are not human come
    # again after them.
    bare = [
        {k: v for k, v in e.items() if k not in ("ip", "user_agent")}
        for e in sample()["campaign_events"]
    ]
    verdicts = decide(bare)
    moved = sorted(i for i, a in verdicts.items() if a["verdict"] != "human")
    places = {i: n for n, i in enumerate(sorted(verdicts), start=1)}
    places |= {i: len(places) + n for n, i in enumerate(moved, start=1)}
    assert dict(query(old, "SELECT id, seq FROM campaign_events")) == places
    # Then every inscription and employee takes its place in the change feeds.
    top = len(verdicts) + len(moved) + len(sample()["inscriptions"]) + len(sample()["employees"])
    assert query(old, "SELECT value FROM meta WHERE key = 'change_seq'") == [(str(top),)]


def test_the_server_upgrades_an_old_file_and_serves_it(sample_db: Path, tmp_path: Path) -> None:
    old = version_1_copy(sample_db, tmp_path)
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(old)
        status, _, body = fetch(f"{server.base}{API}/campaigns/1/events", {"X-API-KEY": KEY_1})
        assert status == 200
        expected = [e["id"] for e in sample()["campaign_events"] if e["campaign_id"] == 1]
        assert sorted(e["id"] for e in json.loads(body)) == sorted(expected)
    assert "Upgraded" in server.output_text()[0]


def test_a_server_started_while_a_write_upgrades_the_file_waits_for_it(
    sample_db: Path, tmp_path: Path
) -> None:
    """A writer upgrades an older file in its write, which may take minutes (a large
    load): a server starting meanwhile waits for it, then serves the file it upgraded."""
    old = older_copy(sample_db, tmp_path / "old.sqlite3", [], SCHEMA_VERSION - 1)
    with Launcher(tmp_path) as launcher:
        conn = connect_writer(old, schema_in_write=True)
        try:
            with write_transaction(conn):
                assert schema.ensure_schema(conn, in_write=True)
                server = launcher.start(old)
                deadline = time.monotonic() + GUARD_SECONDS
                while "Waiting for a write" not in server.output_text()[0]:
                    assert server.proc.poll() is None, server.output_text()
                    assert time.monotonic() < deadline, "never said it waits"
                    time.sleep(0.05)
                time.sleep(2)  # two of its one-second turns: still waiting, not gone
                assert server.proc.poll() is None, server.output_text()
        finally:
            conn.close()
        assert server.serving(), server.output_text()
        status, _, _ = fetch(f"{server.base}{API}/campaigns", {"X-API-KEY": KEY_1})
        assert status == 200
    assert "Upgraded" not in server.output_text()[0]  # the writer did


def test_an_upgrade_gives_every_answer_a_new_etag(sample_db: Path, tmp_path: Path) -> None:
    """The upgrade may decide verdicts, place events again on the feed and add fields: a
    tag given before it (by the older server) must not get a 304 for a stale answer."""
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")  # the sample's data token
    url, key = f"{API}/campaigns", {"X-API-KEY": KEY_1}
    with Launcher(tmp_path) as launcher:
        _, headers, _ = fetch(f"{launcher.serve(sample_db).base}{url}", key)
        server = launcher.serve(old)
        status, _, _ = fetch(f"{server.base}{url}", key | {"If-None-Match": headers["ETag"]})
    assert status == 200


def test_another_release_gives_every_answer_a_new_etag(sample_db: Path, tmp_path: Path) -> None:
    """A release may change an answer's bytes with the same data (a field added, a figure
    counted otherwise): a tag the last release gave must not get a 304 from the next."""
    release = tmp_path / "__pycache__" / "release"  # only the package's own caches are skipped
    shutil.copytree(ROOT / "app", release / "app", ignore=shutil.ignore_patterns("__pycache__"))
    url, key = f"{API}/campaigns", {"X-API-KEY": KEY_1}
    with Launcher(tmp_path) as launcher:
        _, headers, _ = fetch(f"{launcher.serve(sample_db).base}{url}", key)
    views = release / "app" / "web" / "views.py"
    for changed in (False, True):  # the same code keeps the tag; one line more does not
        if changed:
            views.write_text(views.read_text() + "# the next release\n")
        logs = tmp_path / f"logs-{changed}"
        logs.mkdir()
        with Launcher(logs, release) as launcher:
            server = launcher.serve(sample_db)
            status, _, _ = fetch(f"{server.base}{url}", key | {"If-None-Match": headers["ETag"]})
        assert status == (200 if changed else 304)


# Titles whose case folding differs from lower(): what the migration must get right.
ODD_TITLES = {900: "Straße Ünïcødé", 901: "ΣΊΣΥΦΟΣ İlker"}
ODD_CAMPAIGNS = "INSERT INTO campaigns (id, company_id, title, launch_date) VALUES " + ", ".join(
    f"({i}, 1, '{title}', '2026-01-01T08:00:00Z')" for i, title in ODD_TITLES.items()
)


def version_2_copy(sample_db: Path, directory: Path) -> Path:
    """The sample as a version 2 file (no title_key), with the odd titles."""
    old = copy_into(sample_db, directory / "v2.sqlite3")
    conn = sqlite3.connect(old, isolation_level=None)
    for statement in (
        *DOWNGRADE_TO_4,
        "ALTER TABLE campaigns DROP COLUMN title_key",
        ODD_CAMPAIGNS,
        "PRAGMA user_version = 2",
    ):
        conn.execute(statement)
    conn.close()
    return old


async def found_by_title(client: Any, title: str) -> list[int]:
    """The campaign ids the title filter finds for ``title``."""
    response = await get(client, f"{API}/campaigns?filter[title]={title}")
    assert response.status == 200, await response.text()
    return [c["id"] for c in await response.json()]


async def test_a_version_2_file_gets_python_s_folded_titles(
    sample_db: Path, tmp_path: Path, make_client: MakeClient
) -> None:
    old = version_2_copy(sample_db, tmp_path)
    assert upgrade_if_older(old)
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    rows = query(old, "SELECT title, title_key FROM campaigns")
    assert len(rows) == len(sample()["campaigns"]) + len(ODD_TITLES)
    assert all(key == title.casefold() for title, key in rows)
    client = await make_client(db=str(old))
    assert await found_by_title(client, "STRASSE ÜNÏCØDÉ") == [900]
    assert await found_by_title(client, "σίσυφος i̇lker") == [901]


DOWNGRADE_PG_TO_4 = (
    *PG_SINCE_VERSION_6,
    "DROP INDEX campaign_events_by_type",  # version 6's, with the verdict
    "ALTER TABLE campaign_events DROP COLUMN verdict, DROP COLUMN reasons",
    "DELETE FROM meta WHERE key LIKE 'automation_rules:%'",
)
DOWNGRADE_PG = (
    *DOWNGRADE_PG_TO_4,
    "ALTER TABLE campaigns DROP COLUMN title_key",
    "DROP INDEX campaigns_by_company, courses_by_company, campaign_events_by_employee_type,"
    " inscriptions_by_employee, inscriptions_by_course,"
    " section_results_by_section",
    "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    ODD_CAMPAIGNS,
)


async def pg_version_2(url: str) -> None:
    """The PostgreSQL database at ``url`` made a version 2 one, with the odd titles."""
    conn = await asyncpg.connect(url)
    try:
        for statement in DOWNGRADE_PG:
            await conn.execute(statement)
    finally:
        await conn.close()


async def test_a_version_2_postgresql_database_is_upgraded_once(
    pg_database: str, make_client: MakeClient, tmp_path: Path
) -> None:
    """Two tools at once: one upgrades, in one transaction; the other finds it done."""
    await pg_version_2(pg_database)
    a, b = await asyncpg.connect(pg_database), await asyncpg.connect(pg_database)
    try:
        assert sorted(await asyncio.gather(ensure_schema(a), ensure_schema(b))) == [False, True]
        rows = await a.fetch("SELECT title, title_key FROM campaigns")
        version = await a.fetchval("SELECT value FROM meta WHERE key = 'schema_version'")
        indexes = await a.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'campaign_events_by_type'"
        )
    finally:
        await a.close()
        await b.close()
    assert version == str(SCHEMA_VERSION) and indexes == 1
    assert len(rows) == len(sample()["campaigns"]) + len(ODD_TITLES)
    assert all(row["title_key"] == row["title"].casefold() for row in rows)
    client = await make_client(database_url=pg_database)
    assert await found_by_title(client, "STRASSE ÜNÏCØDÉ") == [900]
    extra = tmp_path / "more.json"
    extra.write_text(json.dumps({"campaigns": [{"id": 902, "company_id": 1,
        "title": "Maße", "launch_date": "2026-01-02T08:00:00Z"}]}), encoding="utf-8")  # fmt: skip
    await load_pg(pg_database, [extra])
    assert await found_by_title(client, "MASSE") == [902]


async def stored_version(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        return str(await conn.fetchval("SELECT value FROM meta WHERE key = 'schema_version'"))
    finally:
        await conn.close()


def test_the_key_tool_upgrades_a_version_2_postgresql_database(
    pg_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(pg_version_2(pg_database))
    assert keytool.main(["--database-url", pg_database, "list"]) == 0
    assert sample()["api_keys"][0]["key"][:12] in capsys.readouterr().out
    assert asyncio.run(stored_version(pg_database)) == str(SCHEMA_VERSION)


def test_the_server_upgrades_a_version_2_postgresql_database(
    pg_database: str, tmp_path: Path
) -> None:
    asyncio.run(pg_version_2(pg_database))
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(tmp_path / "unused.sqlite3", "--database-url", pg_database)
        url = f"{server.base}{API}/campaigns?filter[title]=STRASSE%20%C3%9CN%C3%8FC%C3%98D%C3%89"
        status, _, body = fetch(url, {"X-API-KEY": KEY_1})
    assert status == 200 and [c["id"] for c in json.loads(body)] == [900]
    assert "Upgraded the PostgreSQL database" in server.output_text()[0]


def test_a_read_only_role_cannot_upgrade_and_says_what_to_do(
    pg_database: str, tmp_path: Path
) -> None:
    asyncio.run(pg_version_2(pg_database))
    reader = asyncio.run(read_only_role(pg_database))
    with Launcher(tmp_path) as launcher:
        server = launcher.start(tmp_path / "unused.sqlite3", "--database-url", reader)
        assert server.proc.wait(timeout=60) == 2
    err = server.output_text()[1]
    assert (
        err.count("\n") == 1 and f"schema version 2, not {SCHEMA_VERSION}" in err and "owner" in err
    ), err


# Version 5's index of each type's events, without the verdict version 6 added to it.
VERSION_5_INDEX = (
    "CREATE INDEX campaign_events_by_type"
    " ON campaign_events (campaign_id, type, employee_id, timestamp, with_captcha)"
)
VERDICTS_AND_PLACES = "SELECT id, seq, verdict, reasons FROM campaign_events ORDER BY id"


def test_a_version_5_file_gets_the_verdict_in_its_index(sample_db: Path, tmp_path: Path) -> None:
    """The campaigns count verdicts from the index; the verdicts are not decided again."""
    old = copy_into(sample_db, tmp_path / "v5.sqlite3")
    conn = sqlite3.connect(old, isolation_level=None)
    for statement in (*SINCE_VERSION_6, "DROP INDEX campaign_events_by_type", VERSION_5_INDEX):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 5")
    conn.close()
    before = query(old, VERDICTS_AND_PLACES)
    assert upgrade_if_older(old)
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    [(sql,)] = query(old, "SELECT sql FROM sqlite_master WHERE name = 'campaign_events_by_type'")
    assert sql.replace("\n", " ").split("(", 1)[1].split() == [
        "campaign_id,", "type,", "employee_id,", "timestamp,", "with_captcha,", "verdict)",
    ]  # fmt: skip
    assert query(old, VERDICTS_AND_PLACES) == before


async def test_a_version_5_postgresql_database_gets_the_verdict_in_its_index(
    pg_database: str,
) -> None:
    conn = await asyncpg.connect(pg_database)
    try:
        for statement in PG_SINCE_VERSION_6:
            await conn.execute(statement)
        await conn.execute(f"DROP INDEX campaign_events_by_type; {VERSION_5_INDEX}")
        await conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        before = await conn.fetch(VERDICTS_AND_PLACES)
        assert await ensure_schema(conn)
        definition = await conn.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'campaign_events_by_type'"
        )
        after = await conn.fetch(VERDICTS_AND_PLACES)
    finally:
        await conn.close()
    columns = "(campaign_id, type, employee_id, timestamp, with_captcha, verdict)"
    assert definition.replace('"', "").endswith(columns)
    assert after == before
    assert await stored_version(pg_database) == str(SCHEMA_VERSION)


# After a version 6 upgrade: every company key, now with every scope; the folded names.
KEYS_AFTER_6 = "SELECT id, company_id, partner_id, scopes FROM api_keys ORDER BY id"
NAMES_AFTER_6 = "SELECT name, name_key FROM companies ORDER BY id"


def expected_keys(before: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(key_id, company, None, ALL_SCOPES) for key_id, company in before]


def test_a_version_6_file_keeps_its_keys_with_every_scope(sample_db: Path, tmp_path: Path) -> None:
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    before = query(old, "SELECT id, company_id FROM api_keys ORDER BY id")
    assert before
    assert upgrade_if_older(old)
    assert query(old, KEYS_AFTER_6) == expected_keys(before)
    assert all(key == name.casefold() for name, key in query(old, NAMES_AFTER_6))


async def test_a_version_6_postgresql_database_keeps_its_keys_with_every_scope(
    pg_database: str,
) -> None:
    conn = await asyncpg.connect(pg_database)
    try:
        await to_version_6(conn)
        before = [
            tuple(r) for r in await conn.fetch("SELECT id, company_id FROM api_keys ORDER BY id")
        ]
        assert await ensure_schema(conn)
        keys = [tuple(r) for r in await conn.fetch(KEYS_AFTER_6)]
        names = await conn.fetch(NAMES_AFTER_6)
    finally:
        await conn.close()
    assert before and keys == expected_keys(before)
    assert all(row["name_key"] == row["name"].casefold() for row in names)


async def test_a_postgresql_upgrade_moves_the_data_token(pg_database: str) -> None:
    """As on SQLite: no ETag given before the upgrade holds after it."""
    conn = await asyncpg.connect(pg_database)
    try:
        await to_version_6(conn)
        token = await conn.fetchval("SELECT value FROM meta WHERE key = 'data_token'")
        assert await ensure_schema(conn)
        assert await conn.fetchval("SELECT value FROM meta WHERE key = 'data_token'") != token
    finally:
        await conn.close()


PLACES = "SELECT count(*), count(seq), count(DISTINCT seq) FROM {}"


def test_a_version_6_file_gets_the_change_feeds(sample_db: Path, tmp_path: Path) -> None:
    """Every inscription and employee takes a place after the events; webhooks come."""
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    seq = int(query(old, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0])
    events = query(old, "SELECT id, seq FROM campaign_events ORDER BY id")
    assert upgrade_if_older(old)
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    placed = 0
    for table in ("inscriptions", "employees"):
        [(rows, with_seq, distinct)] = query(old, PLACES.format(table))
        assert rows == with_seq == distinct
        assert query(old, f"SELECT min(seq) FROM {table}")[0][0] > seq
        placed += rows
    assert int(query(old, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0]) == seq + placed
    assert query(old, "SELECT id, seq FROM campaign_events ORDER BY id") == events
    assert query(old, "SELECT count(*) FROM webhooks") == [(0,)]


async def test_a_version_6_postgresql_database_gets_the_change_feeds(pg_database: str) -> None:
    conn = await asyncpg.connect(pg_database)
    try:
        await to_version_6(conn)
        assert await ensure_schema(conn)
        for table in ("inscriptions", "employees"):
            rows, with_seq, distinct = await conn.fetchrow(PLACES.format(table))
            assert rows == with_seq == distinct > 0
        assert await conn.fetchval("SELECT count(*) FROM webhooks") == 0
    finally:
        await conn.close()
    assert await stored_version(pg_database) == str(SCHEMA_VERSION)


# A write refused on an older file leaves it as it was: the upgrade is part of the write.
BAD_LOAD = {"campaigns": [{"id": 900, "company_id": 999, "title": "Orphan",
                           "launch_date": "2026-01-01T08:00:00Z"}]}  # fmt: skip
GOOD_LOAD = {"campaigns": [{"id": 900, "company_id": 1, "title": "Added",
                            "launch_date": "2026-01-01T08:00:00Z"}]}  # fmt: skip
HOOK = ["--url", "https://hooks.example.com/in", "--events", "fail", "--label", "SOC"]
GOPHISH_EXPORT = Path(__file__).parent / "data" / "gophish_export.json"
Tool = Callable[[list[str]], int]
GENERATE = [f"--{size}=1" for size in ("companies", "employees", "campaigns", "courses")] + [
    "--events-per-campaign=1",
    "--inscriptions=1",
]
# Each tool's refused command after the store's arguments; "BAD" is BAD_LOAD's file.
REFUSED_WRITES: dict[str, tuple[Tool, list[str]]] = {
    "load": (loader.main, ["BAD", "--no-progress"]),
    "key create": (keytool.main, ["create", "--company", "77", "--label", "SOC"]),
    "key revoke": (keytool.main, ["revoke", "999"]),
    "partner add-company": (keytool.main, ["partner", "add-company", "999", "1"]),
    "reclassify": (reclassify.main, ["--company", "77"]),
    "webhook create": (webhooks.main, ["create", "--company", "77", *HOOK]),
    "webhook delete": (webhooks.main, ["delete", "999"]),
}
SQLITE_ONLY: dict[str, tuple[Tool, list[str]]] = {
    "generate": (generator.main, [*GENERATE, "--seed=1", "--no-progress"]),  # holds data
    "gophish import": (gophish.main, [str(GOPHISH_EXPORT), "--company", "1"]),
}


def refused(tool: tuple[Tool, list[str]], store: list[str], bad_load: Path) -> int:
    """Run the tool's refused command (BAD_LOAD written to ``bad_load``); its exit code."""
    bad_load.write_text(json.dumps(BAD_LOAD), encoding="utf-8")
    main, argv = tool
    return main([*store, *(str(bad_load) if arg == "BAD" else arg for arg in argv)])


META = "SELECT key, value FROM meta WHERE key IN ('data_version', 'data_token') ORDER BY key"


def file_state(db: Path) -> tuple[Any, ...]:
    return (
        db.read_bytes(),
        query(db, "PRAGMA user_version"),
        query(db, META),
        query(db, "SELECT * FROM sqlite_master ORDER BY type, name"),
    )


@pytest.mark.parametrize("tool", [*REFUSED_WRITES, *SQLITE_ONLY])
def test_a_refused_write_leaves_an_older_file_as_it_was(
    sample_db: Path, tmp_path: Path, tool: str
) -> None:
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    conn = sqlite3.connect(old, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")  # as every writer of version 6 left it
    # The import's first campaign, already another company's: the loader refuses it.
    taken = stable_id("campaign", 1, "gophish", json.loads(GOPHISH_EXPORT.read_text())[0]["id"])
    conn.execute(
        "INSERT INTO campaigns (id, company_id, title, launch_date, title_key)"
        " VALUES (?, 2, 'Taken', '2026-01-01T08:00:00Z', 'taken')",
        (taken,),
    )
    conn.close()
    before = file_state(old)
    tools = REFUSED_WRITES | SQLITE_ONLY
    assert refused(tools[tool], ["--db", str(old)], tmp_path / "bad.json") == 1
    assert file_state(old) == before
    assert not Path(f"{old}-wal").exists()


def test_a_load_into_an_older_file_upgrades_it_with_its_rows(
    sample_db: Path, tmp_path: Path
) -> None:
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    version = query(old, "SELECT value FROM meta WHERE key = 'data_version'")[0][0]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD_LOAD), encoding="utf-8")
    assert loader.main([str(good), "--db", str(old), "--no-progress"]) == 0
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(old, "SELECT title FROM campaigns WHERE id = 900") == [("Added",)]
    assert query(old, KEYS_AFTER_6)  # the keys' version 7 table
    assert query(old, "SELECT value FROM meta WHERE key = 'data_version'")[0][0] != version


async def pg_state(url: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch("SELECT key, value FROM meta ORDER BY key")]
    finally:
        await conn.close()


@pytest.mark.parametrize("tool", REFUSED_WRITES)
def test_a_refused_write_leaves_an_older_postgresql_database_as_it_was(
    pg_database: str, tmp_path: Path, tool: str
) -> None:
    async def age() -> None:
        conn = await asyncpg.connect(pg_database)
        try:
            await to_version_6(conn)
        finally:
            await conn.close()

    asyncio.run(age())
    before = asyncio.run(pg_state(pg_database))
    store = ["--database-url", pg_database]
    assert refused(REFUSED_WRITES[tool], store, tmp_path / "bad.json") == 1
    assert asyncio.run(pg_state(pg_database)) == before
    assert asyncio.run(stored_version(pg_database)) == "6"
