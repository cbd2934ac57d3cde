"""Contract.md 15 (PostgreSQL): loads all or nothing with the change sequence and data
version in one commit, the tenancy checks in the database, the tools' --database-url,
and a server that only reads (a read-only role).
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.data.inscriptions import InscriptionFilters, inscriptions_listing
from app.data.listings import Paging
from app.data.pg.api_keys import create_key
from app.data.pg.store import PgStore
from app.tools.loader import SAMPLE_FIXTURE, LoadError
from app.tools.pg_loader import load_pg
from app.tools.staging import CHANGED

from .support.factories import KEY_1, ONE_ROW_EDITS, query, sample
from .support.servers import clean_env, run_python
from .support.stores import Store, activity, fetch_all, read_only_role

EVENT = {"id": 700001, "campaign_id": 1, "employee_id": 1, "type": "open",
         "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False}  # fmt: skip


async def state(url: str) -> tuple[Any, ...]:
    """What a load may change: the counts of every table and the meta values."""
    meta = await fetch_all(url, "SELECT key, value FROM meta ORDER BY key")
    counts = await fetch_all(
        url,
        "SELECT (SELECT count(*) FROM campaign_events), (SELECT count(*) FROM employees),"
        " (SELECT count(*) FROM campaign_targets), (SELECT sum(seq) FROM campaign_events)",
    )
    return tuple(meta), tuple(counts[0])


def fixture(tmp_path: Path, name: str, document: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


async def test_a_bad_record_changes_nothing_and_is_named(pg_database: str, tmp_path: Path) -> None:
    before = await state(pg_database)
    bad = fixture(
        tmp_path,
        "bad.json",
        {"campaign_events": [EVENT, {**EVENT, "id": 700002, "campaign_id": 424242},
                             {**EVENT, "id": 700003, "campaign_id": 3}]},
    )  # fmt: skip
    with pytest.raises(LoadError) as refused:
        await load_pg(pg_database, [bad])
    assert refused.value.problems == [
        f"{bad}: campaign_events[1].campaign_id: unknown campaign 424242",
        f"{bad}: campaign_events[2]: campaign_id and employee_id belong to different companies",
    ]
    assert await state(pg_database) == before


@pytest.mark.parametrize("table", [None, *ONE_ROW_EDITS])
async def test_only_a_load_that_changes_a_row_moves_the_data_version(
    pg_database: str, tmp_path: Path, table: str | None
) -> None:
    """The sample again (None) keeps every ETag; one changed row of any table moves it."""
    document = copy.deepcopy(sample())
    if table is not None:
        ONE_ROW_EDITS[table](document)
    before = await state(pg_database)
    counts = await load_pg(pg_database, [fixture(tmp_path, "again.json", document)])
    meta_before, meta_after = dict(before[0]), dict((await state(pg_database))[0])
    moved = int(meta_after["data_version"]) - int(meta_before["data_version"])
    assert (moved, counts[CHANGED] > 0) == ((0, False) if table is None else (1, True))
    assert (meta_after["data_token"] == meta_before["data_token"]) == (table is None)


async def test_change_sequence_and_data_version_move_with_the_load(
    pg_database: str, tmp_path: Path
) -> None:
    """New or changed events take the next places; an unchanged one keeps its place."""

    async def seqs() -> dict[int, int]:
        rows = await fetch_all(pg_database, "SELECT id, seq FROM campaign_events")
        return {r["id"]: r["seq"] for r in rows}

    async def meta(key: str) -> str:
        rows = await fetch_all(pg_database, "SELECT value FROM meta WHERE key = $1", key)
        return str(rows[0][0])

    top = int(await meta("change_seq"))
    # The events first, then every inscription and employee (the change feeds).
    assert max((await seqs()).values()) == len(sample()["campaign_events"])
    assert top == sum(len(sample()[t]) for t in ("campaign_events", "inscriptions", "employees"))
    first = fixture(tmp_path, "one.json", {"campaign_events": [EVENT]})
    await load_pg(pg_database, [first])
    assert (await seqs())[EVENT["id"]] == top + 1 and await meta("change_seq") == str(top + 1)
    token, version = await meta("data_token"), int(await meta("data_version"))
    await load_pg(pg_database, [first])  # unchanged: the feed and the data version stay
    assert (await seqs())[EVENT["id"]] == top + 1 and await meta("change_seq") == str(top + 1)
    assert await meta("data_token") == token and int(await meta("data_version")) == version
    changed = fixture(tmp_path, "two.json", {"campaign_events": [{**EVENT, "type": "click"}]})
    await load_pg(pg_database, [changed])
    assert (await seqs())[EVENT["id"]] == top + 2
    targets = await fetch_all(
        pg_database, "SELECT 1 FROM campaign_targets WHERE campaign_id = 1 AND employee_id = 1"
    )
    assert targets  # an event implies its employee was a target


@pytest.mark.parametrize(
    ("table", "row"),
    [
        ("campaign_events", "(700009, 3, 1, 'open', '2025-01-01T00:00:00Z', 0)"),
        ("team_members", "(1, (SELECT id FROM teams WHERE company_id = 2 LIMIT 1))"),
    ],
)
async def test_the_database_refuses_rows_across_companies(
    pg_database: str, table: str, row: str
) -> None:
    """Whoever writes, not only the loader: PL/pgSQL triggers, like SQLite's."""
    columns = {"campaign_events": "(id, campaign_id, employee_id, type, timestamp, with_captcha)",
               "team_members": "(employee_id, team_id)"}  # fmt: skip
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="different compan"):
        await fetch_all(pg_database, f"INSERT INTO {table} {columns[table]} VALUES {row}")


async def test_the_server_reads_through_a_read_only_role(
    make_client: Any, pg_database: str, store: Store
) -> None:
    """The reading role of docs/operations.md: it may read and nothing else, and the server
    needs no more."""
    reader = await read_only_role(pg_database)
    client = await make_client(database_url=reader)
    resp = await client.get("/api/companies/v1/campaigns/1/events", headers={"X-API-KEY": KEY_1})
    assert resp.status == 200 and len(await resp.json()) > 0
    assert (await client.get("/readyz")).status == 200
    with pytest.raises(asyncpg.PostgresError):
        await fetch_all(reader, "UPDATE api_keys SET label = 'x'")


# Counts the generated events through the PostgreSQL store (the server's own reads).
SERVES = """
import asyncio, sys
from app.data.events import campaign_listing
from app.data.pg.store import PgStore
async def main():
    store = await PgStore.open(sys.argv[1], 2, 5.0)
    async with store.whole(campaign_listing(1, 1), lambda t, f: b"") as result:
        print(len(result.texts) if hasattr(result, "texts") else 999)
    await store.close()
asyncio.run(main())
"""


SIZES = ("--companies", "1", "--employees", "20", "--campaigns", "2", "--events-per-campaign")
SIZES += ("30", "--courses", "2", "--inscriptions", "10", "--sections", "2", "--seed", "3")
SIZES += ("--no-progress",)


ALL_VISIBLE = """SELECT relname, relpages, relallvisible FROM pg_class
    WHERE relname IN ('campaign_events', 'inscriptions', 'section_results')
    AND relallvisible < relpages"""


@pytest.mark.system
def test_tools_take_a_database_url(pg_url: str, tmp_path: Path) -> None:
    """The loader and the generator write to PostgreSQL with --database-url."""
    from .support.stores import fresh_database, run_apart

    databases = fresh_database(pg_url, template="template0")
    url = next(databases)
    try:
        generated = run_python("scripts/generate_fixtures.py", "--database-url", url, *SIZES)
        assert generated.returncode == 0, generated.stderr
        # Vacuumed to the end: every page known all-visible, for the reports' index-only scans.
        unmarked = run_apart(fetch_all(url, ALL_VISIBLE))
        assert not unmarked, unmarked
        again = run_python("scripts/generate_fixtures.py", "--database-url", url, *SIZES)
        assert again.returncode == 1 and "already holds" in again.stderr
        bad = fixture(tmp_path, "bad.json", {"campaign_events": [{**EVENT, "employee_id": 99}]})
        refused = run_python("scripts/load_fixtures.py", str(bad), "--database-url", url)
        assert refused.returncode == 1
        assert "campaign_events[0].employee_id: unknown employee 99" in refused.stderr
        by_env = run_python(
            "scripts/load_fixtures.py", str(bad), env=clean_env(REPORTING_DATABASE_URL=url)
        )
        assert by_env.returncode == 1 and "unknown employee 99" in by_env.stderr
        served = run_python("-c", SERVES, url)
        assert served.returncode == 0 and int(served.stdout) > 0, served.stderr
    finally:
        next(databases, None)


def test_a_refused_load_leaves_a_new_database_without_the_schema(
    pg_url: str, tmp_path: Path
) -> None:
    """The schema used to be made (and committed) before the load's own transaction: a
    refused load left the tables behind, and a server's first start then served them
    empty instead of filling the database from the sample."""
    from .support.stores import fresh_database, run_apart

    databases = fresh_database(pg_url, template="template0")
    url = next(databases)
    try:
        bad = fixture(tmp_path, "bad.json", {"campaign_events": [{**EVENT, "employee_id": 99}]})
        with pytest.raises(LoadError):
            asyncio.run(load_pg(url, [bad]))
        tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        assert run_apart(fetch_all(url, tables)) == []
    finally:
        next(databases, None)


async def test_keys_take_the_same_ids_on_both_stores(
    pg_database: str, sample_db: Path, tmp_path: Path
) -> None:
    """PostgreSQL's loader gave new keys their ids in the order of their hashes (the
    sample's key 1 was the partner's, company 1's on SQLite, so ``reporting-keys revoke
    1`` revoked another key), and each load of a stored key took a value of the identity
    (the next key's id moved on by 3 with every load of the sample)."""
    ids = "SELECT id, company_id, partner_id FROM api_keys ORDER BY id"
    await load_pg(pg_database, [SAMPLE_FIXTURE])
    on_pg = [tuple(row) for row in await fetch_all(pg_database, ids)]
    assert on_pg == query(sample_db, ids) == [(1, 1, None), (2, 2, None), (3, None, 1)]
    conn = await asyncpg.connect(pg_database)
    try:
        async with conn.transaction():
            created = await create_key(conn, 1, "after a load again")
    finally:
        await conn.close()
    assert created.key_id == 4


# Whether the key given on stdin is accepted by the PostgreSQL store (the server's lookup).
ACCEPTS = """
import asyncio, sys
from app.data.api_keys import hash_key
from app.data.pg.store import PgStore
async def main():
    store = await PgStore.open(sys.argv[1], 1, 5.0)
    print(await store.find_caller(hash_key(sys.stdin.read().strip())) is not None)
    await store.close()
asyncio.run(main())
"""


@pytest.mark.system
def test_the_key_tool_takes_a_database_url(pg_database: str) -> None:
    """Create, list, revoke and rotate on PostgreSQL, with the SQLite tool's rules."""
    import subprocess
    import sys

    from .support.servers import ROOT

    def keys(*args: str) -> Any:
        return run_python("scripts/manage_keys.py", "--database-url", pg_database, *args)

    def accepted(key: str) -> bool:
        done = subprocess.run(
            [sys.executable, "-c", ACCEPTS, pg_database], input=key, cwd=ROOT,
            capture_output=True, text=True, check=True, env=clean_env(),
        )  # fmt: skip
        return done.stdout.strip() == "True"

    made = keys("create", "--company", "2", "--label", "SIEM export", "--expires-in", "1d")
    assert made.returncode == 0, made.stderr
    key = made.stdout.splitlines()[1].strip()
    key_id = made.stdout.split()[2]
    assert accepted(key)
    listed = keys("list")
    assert "SIEM export" in listed.stdout and key not in listed.stdout
    rotated = keys("rotate", key_id)
    assert rotated.returncode == 0, rotated.stderr
    assert not accepted(key) and accepted(rotated.stdout.splitlines()[2].strip())
    again = keys("revoke", key_id)
    assert again.returncode == 1 and "already revoked" in again.stderr
    unknown = keys("create", "--company", "99", "--label", "x")
    assert unknown.returncode == 1 and "no company 99" in unknown.stderr


@pytest.mark.system
async def test_the_server_serves_from_a_hot_standby(
    make_client: Any, pg_url: str, pg_database: str, store: Store, tmp_path: Path
) -> None:
    """A streaming replica (read-only, no LISTEN): answers, and loads on the primary show."""
    from pgcluster import standby

    from .support.stores import database_url

    url = "/api/companies/v1/campaigns/1/events"
    headers = {"X-API-KEY": KEY_1}
    with standby(pg_url) as replica:
        client = await make_client(database_url=database_url(replica, pg_database.rsplit("/")[-1]))
        first = await client.get(url, headers=headers)
        assert first.status == 200
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await fetch_all(database_url(replica, "postgres"), "CREATE TABLE nope (x int)")
        await Store("postgresql", store.sqlite_path, pg_database).load(
            [fixture(tmp_path, "one.json", {"campaign_events": [EVENT]})]
        )
        for _ in range(50):  # replication, then the server's once-a-second look
            later = await client.get(
                url, headers={**headers, "If-None-Match": first.headers["ETag"]}
            )
            if later.status == 200:
                break
            await asyncio.sleep(0.1)
        assert later.status == 200
        assert EVENT["id"] in [e["id"] for e in await later.json()]
        await client.close()


async def test_readyz_says_503_when_the_database_is_gone(
    make_client: Any, pg_url: str, pg_database: str
) -> None:
    client = await make_client(database_url=pg_database)
    assert (await client.get("/readyz")).status == 200
    name = pg_database.rsplit("/", 1)[1]
    await fetch_all(pg_url, f"DROP DATABASE {name} WITH (FORCE)")
    resp = await client.get("/readyz")
    assert resp.status == 503
    assert (await resp.json())["status"] == "unavailable"
    assert (await client.get("/healthz")).status == 200


async def test_a_read_costs_no_reset_and_a_304_no_statement(pg_database: str) -> None:
    """A pooled connection goes back without asyncpg's reset statement (the reads change
    no session state), and a listing without a guard, as a 304 checks it, runs nothing."""
    store = await PgStore.open(pg_database, 2, 10.0)
    try:
        page = await store.page(inscriptions_listing(1, InscriptionFilters()), Paging(1, 5), None)
        assert page.total > 0
        after_read = await activity(pg_database)
        assert not any("RESET ALL" in query for _, query, _ in after_read), after_read
        await store.check_guard(None)
        assert await activity(pg_database) == after_read
    finally:
        await store.close()
