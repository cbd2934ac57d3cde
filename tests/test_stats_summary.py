"""The stats' summaries stay exact: random loads, each followed by a recomputation.

Batches of random records (new people, teams, campaigns, sends, events, inscriptions and
results, and changes to stored ones: a department, a launch date, a status) are loaded
one after another into the sample, by the real loaders; after each load every row of the
answers' summaries must be what plain Python computes from the raw rows, and every
summary table what a rebuild from scratch gives (so nothing a load left behind lingers).
PostgreSQL, loaded with the same batches by its loader, must hold the same summaries.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import random
import sqlite3
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.data import stats_summary
from app.data.automation import EXCLUDED, Rules
from app.data.pg.schema import ensure_schema as ensure_pg
from app.data.schema import SCHEMA_VERSION, upgrade_if_older, write_transaction
from app.data.stats import INTERVALS
from app.data.vocabulary import AUTOMATION_FILTERS
from app.tools.loader import load_files
from app.tools.pg_loader import load_pg
from app.tools.reclassify import reclassify

from .support.factories import PG_UNDO_VERSION_11, UNDO_VERSION_11, older_copy
from .support.stats import bucket_of

DEPARTMENTS = ("Zeta", "alpha", "Ärzte", "HR")
COUNTRIES = ("Åland", "Spain", "Chile")
AGENTS = ("Mozilla/5.0 (Windows NT 10.0)", "python-requests/2.31", None)
START = dt.datetime(2025, 12, 20, tzinfo=dt.UTC)


def instant(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def batch(rng: random.Random, n: int, known: dict[str, list[int]]) -> dict[str, Any]:
    """Batch ``n``: new records of company 1, and changes to some of the earlier ones."""
    base = 70_000 + 1000 * n
    people = [base + i for i in range(rng.randint(1, 6))]
    employees = [
        {"id": p, "company_id": 1, "first_name": "R", "last_name": str(p),
         "email": f"r{p}@example.com", "department": rng.choice(DEPARTMENTS),
         "country": rng.choice(COUNTRIES)}
        for p in [*people, *rng.sample(known["employees"], min(2, len(known["employees"])))]
    ]  # fmt: skip
    known["employees"] += people
    teams = [{"id": base, "company_id": 1, "name": rng.choice(("Night", "Day", "Ops"))}]
    known["teams"].append(base)
    pairs = {(rng.choice(known["employees"]), rng.choice(known["teams"])) for _ in range(4)}
    members = [{"employee_id": e, "team_id": t} for e, t in pairs]
    launches = {}
    for cid in [base + i for i in range(rng.randint(1, 3))]:
        launches[cid] = START + dt.timedelta(days=rng.randint(0, 30), seconds=rng.randint(0, 86399))
        known["campaigns"].append(cid)
    for cid in rng.sample(known["campaigns"], 1):  # a new or moved launch date
        launches[cid] = START + dt.timedelta(days=rng.randint(0, 30), seconds=rng.randint(0, 86399))
    campaigns = [
        {"id": cid, "company_id": 1, "title": f"R{cid}", "launch_date": instant(at)}
        for cid, at in launches.items()
    ]
    sends = {(rng.choice(known["campaigns"]), rng.choice(known["employees"])) for _ in range(8)}
    targets = [{"campaign_id": c, "employee_id": e} for c, e in sends]
    events = []
    earlier = set(known["events"])
    for i in range(rng.randint(5, 25)):
        send = rng.choice(targets)
        at = START + dt.timedelta(days=rng.randint(0, 40), seconds=rng.randint(0, 86399))
        event_id = earlier.pop() if earlier and rng.random() < 0.2 else base + i
        known["events"].append(event_id)
        events.append({
            "id": event_id, **send, "type": rng.choice(("open", "click", "report", "fail")),
            "timestamp": instant(at), "with_captcha": rng.random() < 0.2,
            "ip": "10.0.0.1", "user_agent": rng.choice(AGENTS),
        })  # fmt: skip
    inscriptions = []
    for iid in [base + i for i in range(rng.randint(1, 5))] + rng.sample(known["inscriptions"], 1):
        start = dt.date(2025, 12, 1) + dt.timedelta(days=rng.randint(0, 60))
        due = start + dt.timedelta(days=rng.randint(0, 40)) if rng.random() < 0.8 else None
        inscriptions.append({
            "id": iid, "employee_id": rng.choice(known["employees"]), "course_id": 1,
            "start_date": start.isoformat(), "due_date": due and due.isoformat(),
            "status": rng.choice(("not_started", "in_progress", "completed")),
        })  # fmt: skip
        if iid not in known["inscriptions"]:
            known["inscriptions"].append(iid)
    results = [
        {"inscription_id": i["id"], "section_id": rng.choice((1, 2)),
         "completed_at": (dt.date(2025, 12, 1) + dt.timedelta(days=rng.randint(0, 90))).isoformat(),
         "result": rng.choice((0, 33.3, 70.25, 100)), "status": "APPROVED"}
        for i in inscriptions if rng.random() < 0.7
    ]  # fmt: skip
    return {
        "employees": employees, "teams": teams, "team_members": members, "campaigns": campaigns,
        "campaign_targets": targets, "campaign_events": events, "inscriptions": inscriptions,
        "section_results": results,
    }  # fmt: skip


def seconds(at: str, launch: str) -> int:
    parse = dt.datetime.fromisoformat
    return max(0, int((parse(at) - parse(launch)).total_seconds()))


def groups(conn: sqlite3.Connection) -> dict[int, set[tuple[str, str]]]:
    found: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for pid, department, country in conn.execute("SELECT id, department, country FROM employees"):
        found[pid] |= {("", ""), ("department", department), ("country", country)}
    for pid, name in conn.execute(
        "SELECT m.employee_id, t.name FROM team_members m JOIN teams t ON t.id = m.team_id"
    ):
        found[pid].add(("team", name))
    return found


def lower_median(values: list[int]) -> int | None:
    return sorted(values)[(len(values) + 1) // 2 - 1] if values else None


def expected_phishing(conn: sqlite3.Connection) -> set[tuple[Any, ...]]:
    """Every row of stats_phishing, from the raw rows by Python."""
    events: dict[tuple[int, int], list[tuple[str, str, str]]] = defaultdict(list)
    for cid, pid, kind, at, verdict in conn.execute(
        "SELECT campaign_id, employee_id, type, timestamp, verdict FROM campaign_events"
    ):
        events[cid, pid].append((kind, at, verdict))
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    member_of = groups(conn)
    for cid, pid, company, launch in conn.execute(
        "SELECT t.campaign_id, t.employee_id, c.company_id, c.launch_date"
        " FROM campaign_targets t JOIN campaigns c ON c.id = t.campaign_id"
    ):
        for automation in AUTOMATION_FILTERS:
            kept = [e for e in events[cid, pid] if e[2] not in EXCLUDED[automation]]
            firsts = {k: min((at for kind, at, _ in kept if kind == k), default=None)
                      for k in ("open", "click", "report", "fail")}  # fmt: skip
            for interval in INTERVALS:
                for gk, gv in member_of[pid]:
                    key = (*period(company, interval, launch[:10], gk, gv), automation)
                    row = rows.setdefault(key, defaultdict(list))
                    row["campaigns"].append(cid)
                    row["people"].append(pid)
                    row["sends"].append(1)
                    for kind, name in (("open", "opened"), ("fail", "failed")):
                        row[name].append(firsts[kind] is not None)
                    for kind, name in (("click", "clicked"), ("report", "reported")):
                        if firsts[kind] is not None:
                            row[name].append(seconds(firsts[kind], launch))
    return {
        (*key, len(set(r["campaigns"])), len(r["sends"]), len(set(r["people"])),
         sum(r["opened"]), len(r["clicked"]), len(r["reported"]), sum(r["failed"]),
         lower_median(r["clicked"]), lower_median(r["reported"]))
        for key, r in rows.items()
    }  # fmt: skip


def period(company: int, interval: str, day: str, gk: str, gv: str) -> tuple[Any, ...]:
    """A summary row's key: the bucket of ``interval`` holding ``day``."""
    return company, interval, str(bucket_of(dt.date.fromisoformat(day), interval)[0]), gk, gv


def expected_training(conn: sqlite3.Connection) -> set[tuple[Any, ...]]:
    """Every row of stats_training, from the raw rows by Python (sums to 6 decimals)."""
    results: dict[int, list[float]] = defaultdict(list)
    for iid, result in conn.execute(
        "SELECT inscription_id, result FROM section_results WHERE result IS NOT NULL"
    ):
        results[iid].append(result)
    member_of = groups(conn)
    rows: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0] * 8)
    for iid, company, pid, start, due, status, done_at in conn.execute(
        "SELECT id, company_id, employee_id, start_date, due_date, status, completed_at"
        " FROM inscriptions"
    ):
        for interval in INTERVALS:
            for gk, gv in member_of[pid]:
                if due is not None:
                    row = rows[period(company, interval, due, gk, gv)]
                    done = status == "completed"
                    on_time = done and (done_at is None or done_at <= due)
                    row[0] += 1
                    row[1] += on_time
                    row[2] += done and not on_time
                    row[3] += not done
                    row[6] += sum(results[iid])
                    row[7] += len(results[iid])
                row = rows[period(company, interval, start, gk, gv)]
                row[4] += due is None
                row[5] += 1
    return {
        (*key, *map(int, r[:6]), round(r[6], 6) if r[7] else None, int(r[7]))
        for key, r in rows.items()
    }


def summaries(
    conn: sqlite3.Connection | None, table: str, rows: list[Any] | None = None
) -> set[tuple[Any, ...]]:
    """A summary table's rows, sums of results to 6 decimals (None without results)."""
    found = rows if rows is not None else conn.execute(f"SELECT * FROM {table}").fetchall()
    if table == "stats_training":
        return {(*r[:-2], round(float(r[-2]), 6) if r[-1] else None, r[-1]) for r in found}
    if table == "stats_inscriptions":
        return {(*r[:-2], round(float(r[-2]), 6) if r[-1] else None, r[-1]) for r in found}
    return {tuple(r) for r in found}


def by_hour(conn: sqlite3.Connection) -> set[tuple[Any, ...]]:
    """stats_seconds' counts (per launch day) summed per period of each interval and hour
    (seconds // 3600), the rows without any left out."""
    hours: dict[tuple[Any, ...], list[int]] = {}
    for row in conn.execute("SELECT * FROM stats_seconds"):
        (company, gk, gv, hour, day, seconds), counts = row[:6], row[6:]
        assert hour == seconds // 3600
        for interval in INTERVALS:
            start = str(bucket_of(dt.date.fromisoformat(day), interval)[0])
            sums = hours.setdefault((company, interval, start, gk, gv, hour), [0] * len(counts))
            for at, count in enumerate(counts):
                sums[at] += count
    return {(*key, *sums) for key, sums in hours.items() if any(sums)}


def rebuilt(db: Path, tmp_path: Path) -> sqlite3.Connection:
    """A copy of the database whose summaries are made again from scratch."""
    copy = sqlite3.connect(tmp_path / "rebuilt.sqlite3", isolation_level=None)
    with sqlite3.connect(db) as source:
        source.backup(copy)
    with write_transaction(copy):
        stats_summary.refresh(copy, 0, stats_summary.EVERYTHING)
    return copy


def check(db: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert summaries(conn, "stats_phishing") == expected_phishing(conn)
        assert summaries(conn, "stats_training") == expected_training(conn)
        assert summaries(conn, "stats_seconds_hours") == by_hour(conn)
        fresh = rebuilt(db, tmp_path)
        for table in stats_summary.SUMMARIES:
            assert summaries(conn, table) == summaries(fresh, table), table
        fresh.close()
    finally:
        conn.close()


async def assert_same_summaries(lite: sqlite3.Connection, pg: asyncpg.Connection) -> None:
    """Every stats' summary table holds the same rows on both stores."""
    for table in stats_summary.SUMMARIES:
        theirs = [tuple(r) for r in await pg.fetch(f"SELECT * FROM {table}")]
        assert summaries(lite, table) == summaries(None, table, theirs), table


async def load_both_stores(
    sample_db: Path, pg_database: str, tmp_path: Path, seed: int, loads: int, checked: bool
) -> None:
    """Random batches loaded into the SQLite sample (each load checked against the raw
    rows when ``checked``) and into PostgreSQL's: after each, the same summaries."""
    rng = random.Random(seed)
    known = known_ids(sample_db)
    pg = await asyncpg.connect(pg_database)
    try:
        for n in range(loads):
            path = write(tmp_path, n, batch(rng, n, known))
            load_files(sample_db, [path])
            if checked:
                check(sample_db, tmp_path)
            await load_pg(pg_database, [path])
            lite = sqlite3.connect(sample_db)
            await assert_same_summaries(lite, pg)
            lite.close()
    finally:
        await pg.close()


def check_before_and_after_a_load(db: Path, tmp_path: Path, seed: int) -> None:
    """check(), then a random batch loaded, then check() again."""
    check(db, tmp_path)
    load_files(db, [write(tmp_path, 0, batch(random.Random(seed), 0, known_ids(db)))])
    check(db, tmp_path)


def known_ids(db: Path) -> dict[str, list[int]]:
    with sqlite3.connect(db) as conn:

        def ids(sql: str) -> list[int]:
            return [i for (i,) in conn.execute(sql)]

        return {
            "employees": ids("SELECT id FROM employees WHERE company_id = 1"),
            "teams": ids("SELECT id FROM teams WHERE company_id = 1"),
            "campaigns": ids("SELECT id FROM campaigns WHERE company_id = 1"),
            "events": [],
            # Of course 1, the batches' course: one with results may not move to another.
            "inscriptions": ids(
                "SELECT id FROM inscriptions WHERE company_id = 1 AND course_id = 1"
            ),
        }


def write(tmp_path: Path, n: int, records: dict[str, Any]) -> Path:
    path = tmp_path / f"batch{n}.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_the_sample_s_summaries_are_exact(sample_db: Path, tmp_path: Path) -> None:
    check(sample_db, tmp_path)


def test_random_loads_keep_every_summary_exact(sample_db: Path, tmp_path: Path) -> None:
    rng = random.Random(20261126)
    known = known_ids(sample_db)
    for n in range(6):
        load_files(sample_db, [write(tmp_path, n, batch(rng, n, known))])
        check(sample_db, tmp_path)


def test_a_new_send_in_a_period_the_person_is_already_in(sample_db: Path, tmp_path: Path) -> None:
    """People are distinct: employee 1's new send, a day after campaign 1's (the only
    send the load touches), must not count them again in the periods they were in."""
    campaign = {
        "id": 900,
        "company_id": 1,
        "title": "Next day",
        "launch_date": "2025-02-12T09:00:00Z",
    }
    load_files(sample_db, [write(tmp_path, 0, {
        "campaigns": [campaign], "campaign_targets": [{"campaign_id": 900, "employee_id": 1}]
    })])  # fmt: skip
    check(sample_db, tmp_path)


def test_reclassify_moves_the_summaries_with_the_verdicts(sample_db: Path, tmp_path: Path) -> None:
    rng = random.Random(7)
    load_files(sample_db, [write(tmp_path, 0, batch(rng, 0, known_ids(sample_db)))])
    before = sqlite3.connect(sample_db).execute("SELECT count(*) FROM stats_phishing").fetchone()
    moved = reclassify(str(sample_db), None, Rules(fast_seconds=86_400, networks=("10.0.0.0/8",)))
    assert moved  # the rules now make most clicks automated
    check(sample_db, tmp_path)
    assert before[0] > 0


async def test_medians_found_a_few_rows_at_a_time_are_exact(
    sample_db: Path, pg_database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load finds its rows' medians in batches of keys, each finished before the next:
    with batches of two rows, the summaries are still exact on both stores."""
    monkeypatch.setattr(stats_summary, "MEDIAN_KEYS_A_BATCH", 2)
    await load_both_stores(sample_db, pg_database, tmp_path, seed=3, loads=2, checked=True)


def test_a_rows_hours_may_come_in_any_order() -> None:
    """The histograms come by row, each row's hours in no set order (PostgreSQL may give
    them in any): the median's hour and rank are the same either way."""
    key = (1, "week", "department", "2025-01-06", "IT")
    by_hour = {12: (2, 0, 0, 1, 0, 0), 7: (2, 1, 0, 0, 0, 0), 9: (0, 0, 0, 0, 0, 0)}
    by_hour[8] = (3, 0, 0, 0, 0, 0)
    rows = [(*key, hour, *counts) for hour, counts in by_hour.items()]
    in_order = list(stats_summary.median_hours(sorted(rows, key=lambda row: row[5])))
    assert list(stats_summary.median_hours(rows)) == in_order
    # 7 values, in hours 7, 7, 8, 8, 8, 12, 12: the 4th smallest is the 2nd of hour 8.
    assert in_order[0][key, 0] == (8, 2)


async def test_postgresql_keeps_the_same_summaries(
    sample_db: Path, pg_database: str, tmp_path: Path
) -> None:
    await load_both_stores(sample_db, pg_database, tmp_path, seed=99, loads=4, checked=False)


# What version 8 added: the summaries, the table of moved sends and its trigger.
SINCE_VERSION_8 = (
    *(f"DROP TABLE {table}" for table in (*stats_summary.SUMMARIES, "stats_moved_sends")),
    "DROP TRIGGER stats_event_moved",
)


def test_a_version_7_file_is_upgraded_with_its_summaries(sample_db: Path, tmp_path: Path) -> None:
    old = older_copy(sample_db, tmp_path / "v7.sqlite3", SINCE_VERSION_8, 7)
    assert upgrade_if_older(old)
    assert sqlite3.connect(old).execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    check(old, tmp_path)
    lite = sqlite3.connect(sample_db)
    for table in stats_summary.SUMMARIES:
        assert summaries(sqlite3.connect(old), table) == summaries(lite, table), table


async def test_a_version_7_postgresql_database_is_upgraded_with_its_summaries(
    sample_db: Path, pg_database: str
) -> None:
    undo = ";".join((*SINCE_VERSION_8[:-1], "DROP TRIGGER stats_event_moved ON campaign_events"))
    async with upgraded_from(pg_database, [undo], 7) as pg:
        await assert_same_summaries(sqlite3.connect(sample_db), pg)


@contextlib.asynccontextmanager
async def upgraded_from(
    url: str, undo: Sequence[str], version: int
) -> AsyncIterator[asyncpg.Connection]:
    """The PostgreSQL sample made ``version`` again by the statements ``undo``, then
    upgraded (the upgrade must run); its connection closes after the block."""
    pg = await asyncpg.connect(url)
    try:
        for statement in undo:
            await pg.execute(statement)
        await pg.execute("UPDATE meta SET value = $1 WHERE key = 'schema_version'", str(version))
        assert await ensure_pg(pg)
        yield pg
    finally:
        await pg.close()


def test_a_version_9_file_gets_its_hours(sample_db: Path, tmp_path: Path) -> None:
    undo = [*UNDO_VERSION_11, "DROP TABLE stats_seconds_hours"]
    old = older_copy(sample_db, tmp_path / "v9.sqlite3", undo, 9)
    assert upgrade_if_older(old)
    check(old, tmp_path)


async def test_a_version_9_postgresql_database_gets_its_hours(
    sample_db: Path, pg_database: str
) -> None:
    undo = [*PG_UNDO_VERSION_11, "DROP TABLE stats_seconds_hours"]
    async with upgraded_from(pg_database, undo, 9) as pg:
        theirs = [tuple(r) for r in await pg.fetch("SELECT * FROM stats_seconds_hours")]
        lite = sqlite3.connect(sample_db)
        assert theirs and summaries(None, "stats_seconds_hours", theirs) == by_hour(lite)


def test_a_version_10_file_keeps_its_campaign_counts(sample_db: Path, tmp_path: Path) -> None:
    old = older_copy(sample_db, tmp_path / "v10.sqlite3", UNDO_VERSION_11, 10)
    assert upgrade_if_older(old)
    tables = {name for (name,) in sqlite3.connect(old).execute("SELECT name FROM sqlite_master")}
    assert "stats_members" not in tables
    check_before_and_after_a_load(old, tmp_path, 10)


async def test_a_version_10_postgresql_database_keeps_its_campaign_counts(
    sample_db: Path, pg_database: str
) -> None:
    async with upgraded_from(pg_database, PG_UNDO_VERSION_11, 10) as pg:
        assert await pg.fetchval("SELECT to_regclass('stats_members')") is None
        theirs = [tuple(r) for r in await pg.fetch("SELECT * FROM stats_campaigns")]
        lite = sqlite3.connect(sample_db)
        assert theirs and summaries(None, "stats_campaigns", theirs) == summaries(
            lite, "stats_campaigns"
        )


# Version 13's histogram of seconds: one row per period of each interval (not per day).
VERSION_13_SECONDS = (
    "DROP TABLE stats_seconds",
    "CREATE TABLE stats_seconds (company_id BIGINT NOT NULL, span TEXT NOT NULL,"
    " period_start TEXT NOT NULL, gk TEXT NOT NULL, gv TEXT NOT NULL, seconds BIGINT NOT NULL,"
    " c0 BIGINT NOT NULL, c1 BIGINT NOT NULL, c2 BIGINT NOT NULL, r0 BIGINT NOT NULL,"
    " r1 BIGINT NOT NULL, r2 BIGINT NOT NULL,"
    " PRIMARY KEY (company_id, span, gk, period_start, gv, seconds))",
    "INSERT INTO stats_seconds VALUES (1, 'year', '2025-01-01', '', '', 60, 1, 1, 1, 0, 0, 0)",
)


def test_a_version_13_file_gets_its_seconds_per_day(sample_db: Path, tmp_path: Path) -> None:
    old = older_copy(sample_db, tmp_path / "v13.sqlite3", VERSION_13_SECONDS, 13)
    assert upgrade_if_older(old)
    columns = [row[1] for row in sqlite3.connect(old).execute("PRAGMA table_info(stats_seconds)")]
    assert columns[:6] == ["company_id", "gk", "gv", "hour", "day", "seconds"]
    check_before_and_after_a_load(old, tmp_path, 13)


async def test_a_version_13_postgresql_database_gets_its_seconds_per_day(
    sample_db: Path, pg_database: str
) -> None:
    async with upgraded_from(pg_database, VERSION_13_SECONDS, 13) as pg:
        await assert_same_summaries(sqlite3.connect(sample_db), pg)
