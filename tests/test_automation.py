"""Automated clicks: every writer decides each event's verdict and reasons at load time.

The rules and their thresholds (fast_after_sent, scanner_agent, scanner_network, burst,
shared_address; a captcha-verified event and a report are human), the settings recorded
with the verdicts, an incremental load deciding its campaigns again, the same verdicts
from both loaders, the generator and the GoPhish importer (each into either store),
reclassifying after a change of settings (the changed event, and only it, takes a new
place in the change sequence and comes again on the feed), one-line refusals, and the
upgrade of a version 4 database on both stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from app.data.automation import RULES_KEY, Rules, rules_from_env
from app.data.schema import SCHEMA_VERSION, connect_writer
from app.tools import export, generator, gophish, loader, reclassify
from app.tools.loader import load_files
from app.tools.pg_copy import copy_to_pg
from app.tools.pg_loader import load_pg

from .support.clients import MakeClient
from .support.factories import PG_SINCE_VERSION_6, SINCE_VERSION_6, get, query
from .support.feeds import FEED
from .support.gateway import (
    COMPANY,
    GATEWAY_KEY,
    done_when,
    event,
)
from .support.loads import write_fixture
from .support.stores import fresh_database
from .support.verdicts import sample_verdicts

# What the issue's fixture must give, with each rule's boundary beside it.
EXPECTED = {
    90001: ("automated", ["fast_after_sent"]),  # 3 s after sending
    90002: ("automated", ["scanner_agent"]),  # python-requests
    90003: ("suspected", ["burst"]),  # four clicks within 2 s
    90004: ("suspected", ["burst"]),
    90005: ("suspected", ["burst"]),
    90006: ("suspected", ["burst"]),
    90007: ("human", []),  # captcha-verified, 2 s after sending
    90008: ("human", []),  # a desktop browser
    90009: ("human", []),  # a report, 1 s after sending
    90010: ("human", []),  # exactly 10 s after sending: not less than 10
    90011: ("human", []),  # four clicks spread over 4 s: no burst
    90012: ("human", []),
    90013: ("human", []),
    90014: ("human", []),
    90015: ("automated", ["fast_after_sent", "scanner_agent"]),  # reasons in their order
    90016: ("automated", ["scanner_agent"]),  # an agent of blanks
    90017: ("automated", ["scanner_agent"]),  # "Googlebot", in any case
    90018: ("human", []),  # no agent recorded: no evidence
    # one address, three employees within 60 s; a fourth click 61 s after the third
    90020: ("suspected", ["shared_address"]),
    90021: ("suspected", ["shared_address"]),
    90022: ("suspected", ["shared_address"]),
    90023: ("human", []),
    90024: ("human", []),  # the same address in another campaign
    **dict.fromkeys(range(90025, 90029), ("suspected", ["burst"])),  # four spanning 3 s
}


def verdicts_in(db: Path, where: str = "campaign_id > 9000") -> dict[int, tuple[str, list[str]]]:
    rows = query(db, f"SELECT id, verdict, reasons FROM campaign_events WHERE {where}")
    return {i: (v, json.loads(r)) for i, v, r in rows}


async def pg_verdicts(url: str, where: str = "campaign_id > 9000") -> dict[int, Any]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(f"SELECT id, verdict, reasons FROM campaign_events WHERE {where}")
        return {r["id"]: (r["verdict"], json.loads(r["reasons"])) for r in rows}
    finally:
        await conn.close()


def test_the_sqlite_loader_decides_every_rule(sample_db: Path, tmp_path: Path) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", done_when())])
    assert verdicts_in(sample_db) == EXPECTED
    oracle = {i: (a["verdict"], a["reasons"]) for i, a in sample_verdicts().items()}
    assert verdicts_in(sample_db, "campaign_id < 9000") == oracle
    record = json.loads(
        query(sample_db, "SELECT value FROM meta WHERE key = ?", f"{RULES_KEY}{COMPANY}")[0][0]
    )
    assert record["fast_seconds"] == 10 and record["networks"] == []
    assert "python-requests" in record["agents"]


def test_the_postgresql_loader_gives_the_same_verdicts(pg_database: str, tmp_path: Path) -> None:
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "gw.json", done_when())]))
    assert asyncio.run(pg_verdicts(pg_database)) == EXPECTED


def test_a_network_setting_marks_its_addresses(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTING_BOT_NETWORKS", "192.0.2.0/25, 2001:db8::/32")
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", done_when())])
    found = verdicts_in(sample_db)
    assert found[90020] == ("automated", ["scanner_network", "shared_address"])
    assert found[90024] == ("automated", ["scanner_network"])
    assert found[90008] == ("human", [])


def test_the_fast_rule_is_off_at_zero_and_settings_are_checked(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", done_when())])
    assert verdicts_in(sample_db)[90001] == ("human", [])
    assert verdicts_in(sample_db)[90015] == ("automated", ["scanner_agent"])
    with pytest.raises(ValueError, match="REPORTING_BOT_FAST_SECONDS"):
        rules_from_env({"REPORTING_BOT_FAST_SECONDS": "-1"})
    with pytest.raises(ValueError, match=r"REPORTING_BOT_NETWORKS: .10\.0\.0\.0/33."):
        rules_from_env({"REPORTING_BOT_NETWORKS": "10.0.0.0/33"})
    assert Rules().scanner_addresses(["x"]) == []
    assert Rules(networks=("10.0.0.0/8",)).scanner_addresses(
        ["10.1.2.3", "::ffff:10.0.0.1", "11.0.0.1", "10.0.0.1:443"]
    ) == ["10.1.2.3", "::ffff:10.0.0.1"]


def test_a_bad_setting_is_one_line_and_writes_nothing(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    before = query(sample_db, "SELECT count(*), max(seq) FROM campaign_events")
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "ten")
    fixture = write_fixture(tmp_path / "gw.json", done_when())
    assert loader.main([str(fixture), "--db", str(sample_db), "--no-progress"]) == 1
    assert capsys.readouterr().err == (
        "load refused, database unchanged: REPORTING_BOT_FAST_SECONDS: 'ten' is not a number"
        " of seconds from 0 to 86400\n"
    )
    assert query(sample_db, "SELECT count(*), max(seq) FROM campaign_events") == before


def test_a_later_sending_time_decides_the_campaign_again(sample_db: Path, tmp_path: Path) -> None:
    """A load of targets alone (their sent_at) turns the fast click automated and moves it."""
    document = issue_fixture()
    targets = document.pop("campaign_targets")
    load_files(sample_db, [write_fixture(tmp_path / "a.json", document)])
    assert verdicts_in(sample_db)[90001] == ("human", [])  # no sending time yet
    top = int(query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0])
    load_files(sample_db, [write_fixture(tmp_path / "b.json", {"campaign_targets": targets})])
    assert verdicts_in(sample_db)[90001] == ("automated", ["fast_after_sent"])
    assert query(sample_db, "SELECT id FROM campaign_events WHERE seq > ?", top) == [(90001,)]


def test_a_load_with_other_settings_decides_the_whole_company_again(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "a.json", done_when())])
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    late = event(90030, 9006, "11:00:00", campaign=9003)  # another campaign of the company
    load_files(sample_db, [write_fixture(tmp_path / "b.json", {"campaign_events": [late]})])
    assert verdicts_in(sample_db)[90001] == ("human", [])
    record = query(sample_db, "SELECT value FROM meta WHERE key = ?", f"{RULES_KEY}{COMPANY}")
    assert json.loads(record[0][0])["fast_seconds"] == 0
    # Company 1 was not written: its verdicts and their settings stay.
    assert (
        json.loads(query(sample_db, "SELECT value FROM meta WHERE key = ?", f"{RULES_KEY}1")[0][0])[
            "fast_seconds"
        ]
        == 10
    )
    assert query(sample_db, "SELECT verdict FROM campaign_events WHERE id = 438") == [
        ("automated",)
    ]


def test_a_load_that_decides_none_of_a_company_s_events_keeps_its_settings(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other settings with only employees given: no event is decided, so the verdicts
    and the settings they were made with stay together (docs/data.md)."""
    first = done_when()
    load_files(sample_db, [write_fixture(tmp_path / "a.json", first)])
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    moved = [{**first["employees"][0], "department": "Security"}]
    load_files(sample_db, [write_fixture(tmp_path / "b.json", {"employees": moved})])
    assert verdicts_in(sample_db)[90001] == EXPECTED[90001]  # still fast_after_sent
    record = query(sample_db, "SELECT value FROM meta WHERE key = ?", f"{RULES_KEY}{COMPANY}")
    assert json.loads(record[0][0])["fast_seconds"] == 10


def test_a_small_load_decides_its_campaign_again(sample_db: Path, tmp_path: Path) -> None:
    """A fourth click turns three earlier ones into a burst: they move in the feed."""
    document = done_when()
    fourth = document["campaign_events"].pop(5)  # 90006, the burst's last click
    load_files(sample_db, [write_fixture(tmp_path / "a.json", document)])
    assert verdicts_in(sample_db)[90003] == ("human", [])
    top = int(query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0])
    load_files(sample_db, [write_fixture(tmp_path / "b.json", {"campaign_events": [fourth]})])
    assert verdicts_in(sample_db) == EXPECTED
    moved = query(sample_db, "SELECT seq, id FROM campaign_events WHERE seq > ? ORDER BY seq", top)
    assert moved == [(top + 1, 90006), (top + 2, 90003), (top + 3, 90004), (top + 4, 90005)]
    assert query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'") == [(str(top + 4),)]


def issue_fixture() -> dict[str, Any]:
    """The issue's five clicks alone (with a key to read the feed of their company)."""
    document = done_when()
    document["api_keys"] = [{"company_id": COMPANY, "label": "gw", "key": GATEWAY_KEY}]
    document["campaign_events"] = [e for e in document["campaign_events"] if e["id"] <= 90008]
    return document


async def feed_after(client: TestClient, cursor: str | None) -> tuple[list[Any], str]:
    """The records of the feed after ``cursor`` (all of them), and the cursor at the end."""
    records: list[Any] = []
    while True:
        query_ = {"limit": "1000"} | ({"cursor": cursor} if cursor else {})
        response = await get(client, str(URL(FEED).with_query(query_)), GATEWAY_KEY)
        assert response.status == 200, await response.text()
        body = await response.json()
        cursor = response.headers["X-Next-Cursor"]
        if not body:
            return records, cursor
        records += body


async def test_reclassify_turns_the_fast_click_human_and_the_feed_sends_it_alone(
    sample_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
    make_client: MakeClient,
) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", issue_fixture())])
    client = await make_client()
    first, cursor = await feed_after(client, None)
    assert {r["id"]: r["automation"] for r in first}[90001] == {
        "verdict": "automated",
        "reasons": ["fast_after_sent"],
    }
    version = query(sample_db, "SELECT value FROM meta WHERE key = 'data_version'")
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    assert reclassify.main(["--db", str(sample_db), "--company", str(COMPANY)]) == 0
    assert capsys.readouterr().out == (
        f"reclassified company {COMPANY}: 1 event moved between verdicts (automated to human 1)\n"
    )
    again, cursor = await feed_after(client, cursor)
    before = next(r for r in first if r["id"] == 90001)
    assert again == [before | {"automation": {"verdict": "human", "reasons": []}}]
    assert query(sample_db, "SELECT value FROM meta WHERE key = 'data_version'") != version
    # Again with the same settings: nothing moves, nothing is written.
    assert reclassify.main(["--db", str(sample_db), "--company", str(COMPANY)]) == 0
    out = capsys.readouterr().out
    assert out == f"reclassified company {COMPANY}: 0 events moved between verdicts\n"
    assert (await feed_after(client, cursor))[0] == []


def test_a_load_whose_only_change_is_a_verdict_moves_the_data_version(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same files under other settings change no row they give, but a verdict: the
    answers change, so the data version moves; under the same settings again, it stays."""
    fixture = write_fixture(tmp_path / "gw.json", issue_fixture())
    load_files(sample_db, [fixture])

    def version() -> str:
        return str(query(sample_db, "SELECT value FROM meta WHERE key = 'data_version'"))

    first = version()
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    load_files(sample_db, [fixture])
    assert verdicts_in(sample_db)[90001] == ("human", [])
    second = version()
    load_files(sample_db, [fixture])
    assert first != second == version()


def test_reclassify_counts_reasons_that_change_apart(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", done_when())])
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    assert reclassify.main(["--db", str(sample_db), "--company", str(COMPANY)]) == 0
    assert capsys.readouterr().out == (
        f"reclassified company {COMPANY}: 1 event moved between verdicts (automated to"
        " human 1); 1 event kept its verdict with other reasons\n"
    )
    assert verdicts_in(sample_db)[90015] == ("automated", ["scanner_agent"])
    # Every company: the sample's own fast events move too.
    assert reclassify.main(["--db", str(sample_db)]) == 0
    expected = sum(1 for a in sample_verdicts().values() if a["reasons"] == ["fast_after_sent"])
    assert capsys.readouterr().out.startswith(
        f"reclassified every company: {expected} events moved between verdicts"
    )


def test_reclassify_refuses_an_unknown_company_in_one_line(sample_db: Path, capsys: Any) -> None:
    before = query(sample_db, "SELECT id, seq, verdict FROM campaign_events")
    assert reclassify.main(["--db", str(sample_db), "--company", "77"]) == 1
    assert capsys.readouterr().err == "reclassify refused, database unchanged: unknown company 77\n"
    assert query(sample_db, "SELECT id, seq, verdict FROM campaign_events") == before


def test_reclassify_on_postgresql(
    pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "gw.json", done_when())]))
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "0")
    assert reclassify.main(["--database-url", pg_database, "--company", str(COMPANY)]) == 0
    assert "1 event moved between verdicts (automated to human 1)" in capsys.readouterr().out
    assert asyncio.run(pg_verdicts(pg_database))[90001] == ("human", [])


def generated_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small generated database, its writer given a scanner network."""
    monkeypatch.setenv("REPORTING_BOT_NETWORKS", "192.0.2.0/24")
    generated = tmp_path / "gen.sqlite3"
    sizes = generator.Sizes(
        companies=2, employees=40, campaigns=4, events_per_campaign=60, courses=2, inscriptions=4
    )
    generator.generate(generated, sizes, seed=3)
    return generated


def test_the_generator_and_the_loader_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated = generated_set(tmp_path, monkeypatch)
    fixture = tmp_path / "gen.json"
    export.export_fixture(generated, fixture)
    loaded = tmp_path / "loaded.sqlite3"
    load_files(loaded, [fixture])
    found = verdicts_in(generated, "1")
    assert found == verdicts_in(loaded, "1")
    assert ("automated", ["scanner_network"]) in found.values()


def test_the_gophish_importer_and_the_loader_agree(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "86400")  # every event is fast here
    export_file = Path(__file__).parent / "data" / "gophish_export.json"
    assert gophish.main([str(export_file), "--company", "1", "--db", str(sample_db)]) == 0
    fixture = tmp_path / "company1.json"
    export.export_fixture(sample_db, fixture, company=1)
    loaded = tmp_path / "loaded.sqlite3"
    load_files(loaded, [fixture])
    company_1 = "campaign_id IN (SELECT id FROM campaigns WHERE company_id = 1)"
    found = verdicts_in(sample_db, company_1)
    assert found == verdicts_in(loaded, company_1)
    assert ("automated", ["fast_after_sent"]) in found.values()


def test_a_version_4_database_is_upgraded_and_classified(sample_db: Path, tmp_path: Path) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "gw.json", done_when())])
    conn = sqlite3.connect(sample_db)
    conn.executescript(
        "".join(f"{statement};" for statement in SINCE_VERSION_6)
        + "DROP INDEX campaign_events_by_type;"
        " ALTER TABLE campaign_events DROP COLUMN verdict;"
        " ALTER TABLE campaign_events DROP COLUMN reasons;"
        f" DELETE FROM meta WHERE key LIKE '{RULES_KEY}%'; PRAGMA user_version = 4;"
    )
    conn.close()
    top = int(query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0])
    connect_writer(sample_db).close()
    assert query(sample_db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert verdicts_in(sample_db) == EXPECTED
    # The events that are not human come again on the feed, in id order.
    found = {i: a["verdict"] for i, a in sample_verdicts().items()}
    found |= {i: verdict for i, (verdict, _) in EXPECTED.items()}
    not_human = sorted(i for i, verdict in found.items() if verdict != "human")
    moved = query(sample_db, "SELECT id FROM campaign_events WHERE seq > ? ORDER BY seq", top)
    assert [i for (i,) in moved] == not_human


async def pg_version_4(url: str) -> None:
    """The PostgreSQL database at ``url`` made a version 4 one."""
    conn = await asyncpg.connect(url)
    try:
        for statement in PG_SINCE_VERSION_6:
            await conn.execute(statement)
        await conn.execute(
            "ALTER TABLE campaign_events DROP COLUMN verdict, DROP COLUMN reasons;"
            f" DELETE FROM meta WHERE key LIKE '{RULES_KEY}%';"
            " UPDATE meta SET value = '4' WHERE key = 'schema_version'"
        )
    finally:
        await conn.close()


def test_a_version_4_postgresql_database_is_upgraded_and_classified(
    pg_database: str, tmp_path: Path
) -> None:
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "gw.json", done_when())]))
    asyncio.run(pg_version_4(pg_database))
    assert reclassify.main(["--database-url", pg_database]) == 0  # any writer upgrades
    assert asyncio.run(pg_verdicts(pg_database)) == EXPECTED


def test_the_generator_into_postgresql_keeps_its_verdicts_and_settings(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated = generated_set(tmp_path, monkeypatch)
    with contextlib.contextmanager(fresh_database)(pg_url, "template0") as url:
        asyncio.run(copy_to_pg(generated, url))
        assert asyncio.run(pg_verdicts(url, "true")) == verdicts_in(generated, "1")
        records = asyncio.run(pg_meta(url, f"{RULES_KEY}%"))
        stored = query(generated, "SELECT key, value FROM meta WHERE key LIKE ?", f"{RULES_KEY}%")
        assert records == dict(stored) and len(records) == 2


async def pg_meta(url: str, like: str) -> dict[str, str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT key, value FROM meta WHERE key LIKE $1", like)
        return {r["key"]: r["value"] for r in rows}
    finally:
        await conn.close()


def test_the_gophish_importer_gives_the_same_verdicts_on_both_stores(
    sample_db: Path, pg_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "86400")
    export_file = str(Path(__file__).parent / "data" / "gophish_export.json")
    assert gophish.main([export_file, "--company", "1", "--db", str(sample_db)]) == 0
    assert gophish.main([export_file, "--company", "1", "--database-url", pg_database]) == 0
    assert asyncio.run(pg_verdicts(pg_database, "true")) == verdicts_in(sample_db, "1")


async def pg_moved(url: str) -> list[int]:
    """The events that took the last places of the change sequence, by place."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT id FROM campaign_events WHERE campaign_id > 9000 ORDER BY seq DESC LIMIT 1"
        )
        return [r["id"] for r in rows]
    finally:
        await conn.close()


def test_postgresql_decides_a_campaign_again_on_a_later_sending_time(
    pg_database: str, tmp_path: Path
) -> None:
    document = issue_fixture()
    targets = document.pop("campaign_targets")
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "a.json", document)]))
    assert asyncio.run(pg_verdicts(pg_database))[90001] == ("human", [])
    asyncio.run(
        load_pg(pg_database, [write_fixture(tmp_path / "b.json", {"campaign_targets": targets})])
    )
    assert asyncio.run(pg_verdicts(pg_database))[90001] == ("automated", ["fast_after_sent"])
    assert asyncio.run(pg_moved(pg_database)) == [90001]


def moved_out_of_the_burst() -> list[dict[str, Any]]:
    """90006, the burst's last click, given another campaign: the three left are no burst."""
    return [event(90006, 9003, "09:20:02", campaign=9003)]


LEFT_BEHIND = dict.fromkeys((90003, 90004, 90005, 90006), ("human", []))


def test_an_event_moved_to_another_campaign_decides_the_one_it_left(
    sample_db: Path, tmp_path: Path, capsys: Any
) -> None:
    load_files(sample_db, [write_fixture(tmp_path / "a.json", done_when())])
    later = {"campaign_events": moved_out_of_the_burst()}
    load_files(sample_db, [write_fixture(tmp_path / "b.json", later)])
    found = verdicts_in(sample_db)
    assert {i: found[i] for i in LEFT_BEHIND} == LEFT_BEHIND
    # The loader and reclassify agree: with the same settings nothing moves.
    assert reclassify.main(["--db", str(sample_db), "--company", str(COMPANY)]) == 0
    out = capsys.readouterr().out
    assert out == f"reclassified company {COMPANY}: 0 events moved between verdicts\n"


def test_postgresql_decides_the_campaign_an_event_left(pg_database: str, tmp_path: Path) -> None:
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "a.json", done_when())]))
    later = {"campaign_events": moved_out_of_the_burst()}
    asyncio.run(load_pg(pg_database, [write_fixture(tmp_path / "b.json", later)]))
    found = asyncio.run(pg_verdicts(pg_database))
    assert {i: found[i] for i in LEFT_BEHIND} == LEFT_BEHIND
