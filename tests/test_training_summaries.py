"""The training summaries (app/data/training.py) on both stores: after every load of
random batches they hold exactly what a recount of the raw rows gives; the upgrade to
version 8 fills them; the courses page, the training block and the inscriptions'
common totals read them, so the first page after a load counts nothing."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from app.data import training
from app.data.inscriptions import InscriptionFilters, inscriptions_listing
from app.data.pg.schema import ensure_schema
from app.data.pg.sql import numbered
from app.data.schema import SCHEMA_VERSION, upgrade_if_older
from app.keys import COUNTS
from app.tools.generator import Sizes, generate
from app.tools.pg_copy import copy_to_pg

from .support.factories import API, KEY_1
from .support.stores import EACH_STORE, Store, on_both_stores

store_kind = on_both_stores()

# Each summary recounted from the raw rows, written out plainly (not with the
# summaries' own SQL): its key, then its counts.
STATUSES = ", ".join(
    f"sum(CASE WHEN status = '{s}' THEN 1 ELSE 0 END)"
    for s in ("not_started", "in_progress", "completed")
)
RECOUNTS = {
    "training_courses": f"SELECT course_id, count(*), {STATUSES} FROM inscriptions"
    " GROUP BY course_id",
    "training_employees": f"SELECT employee_id, count(*), {STATUSES} FROM inscriptions"
    " GROUP BY employee_id",
    "training_due": "SELECT course_id, due_date, count(*),"
    " sum(CASE WHEN status <> 'completed' THEN 1 ELSE 0 END) FROM inscriptions"
    " WHERE due_date IS NOT NULL GROUP BY course_id, due_date",
    "training_starts": "SELECT course_id, start_date, count(*) FROM inscriptions"
    " GROUP BY course_id, start_date",
    "training_results": "SELECT section_id, result, count(*) FROM section_results"
    " WHERE result IS NOT NULL GROUP BY section_id, result",
    "training_people": "SELECT i.course_id, e.department_key, e.country_key, i.start_date,"
    " count(*) FROM inscriptions i JOIN employees e ON e.id = i.employee_id"
    " GROUP BY i.course_id, e.department_key, e.country_key, i.start_date",
    "training_people_totals": "SELECT i.course_id, e.department_key, e.country_key, count(*)"
    " FROM inscriptions i JOIN employees e ON e.id = i.employee_id"
    " GROUP BY i.course_id, e.department_key, e.country_key",
}
KEYS = {s.table: len(s.key) for s in training.SUMMARIES}
KEYS |= {"training_people": 4, "training_people_totals": 3}
# Where the batches move people to (an employee's department and country go into
# training_people's key).
PLACES = (("Finance", "Spain"), ("Sales", "France"), ("Research", "Norway"))


async def fetch(store: Store, sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query on the store, numbers as floats (PostgreSQL's numeric results)."""
    if store.url:
        conn = await asyncpg.connect(store.url)
        try:
            rows = [tuple(r) for r in await conn.fetch(numbered(sql))]
        finally:
            await conn.close()
    else:
        with sqlite3.connect(store.sqlite_path) as reader:
            rows = reader.execute(sql).fetchall()
        reader.close()
    return [tuple(float(v) if isinstance(v, Decimal) else v for v in row) for row in rows]


async def assert_summaries_are_recounts(store: Store) -> None:
    """Every summary row is its recount; rows whose counts came back to 0 are no rows."""
    for table, recount in RECOUNTS.items():
        kept = [r for r in await fetch(store, f"SELECT * FROM {table}") if any(r[KEYS[table] :])]
        assert sorted(kept) == sorted(await fetch(store, recount)), table


def random_batch(rng: random.Random, state: dict[str, list[tuple[Any, ...]]], n: int) -> Any:
    """A fixture of new inscriptions, stored ones given again changed (those without
    results, so that their results stay in their course), and results new and changed."""
    employees, courses, sections = state["employees"], state["courses"], state["sections"]
    stored, with_results = state["inscriptions"], {r[0] for r in state["results"]}
    next_id = max(i[0] for i in stored) + 1
    inscriptions = []
    free = [i for i in stored if i[0] not in with_results]
    for k in range(n):
        company = rng.choice((1, 2))
        own_course = rng.choice([c for c, co in courses if co == company])
        own_employee = rng.choice([e for e, co in employees if co == company])
        if k % 3 == 0 and free:
            ident, company = free.pop(rng.randrange(len(free)))[:2]
            own_course = rng.choice([c for c, co in courses if co == company])
            own_employee = rng.choice([e for e, co in employees if co == company])
        else:
            ident, next_id = next_id, next_id + 1
        start = f"2025-0{rng.randint(1, 5)}-{rng.randint(10, 28)}"
        due = rng.choice((None, f"2025-0{rng.randint(6, 9)}-{rng.randint(10, 28)}"))
        inscriptions.append(
            {
                "id": ident,
                "employee_id": own_employee,
                "course_id": own_course,
                "start_date": start,
                "due_date": due,
                "status": rng.choice(("not_started", "in_progress", "completed")),
            }
        )
    given = {i["id"]: i for i in inscriptions}
    course_of = {i[0]: i[2] for i in stored} | {i: r["course_id"] for i, r in given.items()}
    results = {}
    for _ in range(n * 2):
        ident = rng.choice(list(course_of))
        if ident in given or rng.random() < 0.5:
            options = [s for s, c in sections if c == course_of[ident]]
            if not options:
                continue
            section = rng.choice(options)
            value = rng.choice((None, 0, 55, 70.25, 88.5, 100, rng.randint(0, 100)))
            results[ident, section] = {
                "inscription_id": ident,
                "section_id": section,
                "completed_at": f"2025-10-{rng.randint(10, 28)}",
                "result": value,
                "status": None if value is None else rng.choice(("APPROVED", "DISAPPROVED")),
            }
    people = rng.sample(state["people"], 2)
    moved = [
        {**dict(zip(PERSON, person, strict=True)), "department": place[0], "country": place[1]}
        for person, place in zip(people, rng.sample(PLACES, 2), strict=True)
    ]
    return {
        "employees": moved,
        "inscriptions": inscriptions,
        "section_results": list(results.values()),
    }


PERSON = ("id", "company_id", "first_name", "last_name", "email", "department", "country")


async def state_of(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    return {
        "employees": await fetch(store, "SELECT id, company_id FROM employees"),
        "people": await fetch(store, f"SELECT {', '.join(PERSON)} FROM employees"),
        "courses": await fetch(store, "SELECT id, company_id FROM courses"),
        "sections": await fetch(store, "SELECT id, course_id FROM course_sections"),
        "inscriptions": await fetch(store, "SELECT id, company_id, course_id FROM inscriptions"),
        "results": await fetch(store, "SELECT inscription_id FROM section_results"),
    }


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_load_keeps_every_summary_equal_to_a_recount(
    store: Store, tmp_path: Path, seed: int
) -> None:
    """Several loads of random batches, by the store's own loader: after each, every
    summary row is what a recount of the raw rows gives."""
    await assert_summaries_are_recounts(store)
    rng = random.Random(seed)
    for load in range(4):
        batch = random_batch(rng, await state_of(store), rng.randint(1, 40))
        file = tmp_path / f"batch-{load}.json"
        file.write_text(json.dumps(batch))
        await store.load([file])
        await assert_summaries_are_recounts(store)


@EACH_STORE
async def test_a_write_by_hand_moves_the_summaries_too(store: Store) -> None:
    """Whoever writes (a script, not a loader), the summaries follow the rows: an
    inscription moved to another course and employee, then deleted, a result changed."""
    moved = (await fetch(store, "SELECT id FROM inscriptions ORDER BY id LIMIT 1"))[0][0]
    await store.execute(
        "UPDATE inscriptions SET status = 'not_started', due_date = '2031-01-01' WHERE id = ?",
        moved,
    )
    await assert_summaries_are_recounts(store)
    await store.execute("UPDATE section_results SET result = 12.5, status = 'DISAPPROVED'")
    await assert_summaries_are_recounts(store)
    person = (await fetch(store, f"SELECT employee_id FROM inscriptions WHERE id = {moved}"))[0]
    await store.execute(
        "UPDATE employees SET department = 'Moved', department_key = 'moved' WHERE id = ?",
        person[0],
    )
    await assert_summaries_are_recounts(store)
    await store.execute("DELETE FROM section_results WHERE inscription_id = ?", moved)
    await store.execute("DELETE FROM inscriptions WHERE id = ?", moved)
    await assert_summaries_are_recounts(store)


def test_a_version_7_file_gets_its_summaries_on_upgrade(sample_db: Path) -> None:
    """The upgrade from version 7 creates the summaries, counted from the stored rows,
    and the triggers that keep them."""
    conn = sqlite3.connect(sample_db)
    for table in RECOUNTS:
        conn.execute(f"DROP TABLE {table}")
    for source in ("inscriptions", "section_results"):
        for event in ("insert", "update", "delete"):
            conn.execute(f"DROP TRIGGER {source}_training_{event}")
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    assert upgrade_if_older(sample_db)
    conn = sqlite3.connect(sample_db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    for table, recount in RECOUNTS.items():
        summary = conn.execute(f"SELECT * FROM {table}").fetchall()
        assert summary and sorted(summary) == sorted(conn.execute(recount).fetchall()), table
    conn.execute("UPDATE inscriptions SET status = 'completed'")  # its triggers are there
    assert conn.execute(
        "SELECT sum(completed) = sum(inscriptions) FROM training_courses"
    ).fetchone() == (1,)
    conn.close()


@pytest.mark.parametrize("store_kind", ["postgresql"])
async def test_a_version_7_postgresql_database_gets_its_summaries_on_upgrade(
    store: Store,
) -> None:
    """PostgreSQL's upgrade from version 7 does the same."""
    conn = await asyncpg.connect(store.url)
    try:
        await conn.execute(
            "DROP TABLE " + ", ".join(RECOUNTS)
            + "; DROP FUNCTION " + ", ".join(
                f"{source}_training_{event}()"
                for source in ("inscriptions", "section_results")
                for event in ("insert", "update", "delete")
            ) + " CASCADE; UPDATE meta SET value = '7' WHERE key = 'schema_version'"
        )  # fmt: skip
        assert await ensure_schema(conn)
    finally:
        await conn.close()
    await assert_summaries_are_recounts(store)
    assert await fetch(store, "SELECT count(*) > 0 FROM training_results") == [(True,)]
    await store.execute("UPDATE inscriptions SET status = 'completed'")
    await assert_summaries_are_recounts(store)


PEOPLE_TRIGGERS = training.PEOPLE_TRIGGER_NAMES
MOVE_ONE = "UPDATE employees SET country = 'Chile', country_key = 'chile' WHERE id = 1"


def around_a_move(conn: sqlite3.Connection, table: str) -> tuple[list[Any], ...]:
    """A people summary and its recount, sorted, before MOVE_ONE, then after it (the
    summary's rows whose count is not zero: a move may leave some at zero)."""
    recount = RECOUNTS[table]
    before = sorted(conn.execute(f"SELECT * FROM {table}")), sorted(conn.execute(recount))
    conn.execute(MOVE_ONE)
    kept = sorted(r for r in conn.execute(f"SELECT * FROM {table}") if r[-1])
    return (*before, kept, sorted(conn.execute(recount)))


def test_a_version_11_file_gets_the_people_summary_on_upgrade(sample_db: Path) -> None:
    """The upgrade from version 11 counts the inscriptions by department and country
    from the stored rows, and adds the triggers that keep them; the index of a
    campaign's events is made again to cover their listings."""
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TABLE training_people")
    for trigger in PEOPLE_TRIGGERS:
        conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute("DROP INDEX campaign_events_by_campaign")
    conn.execute(
        "CREATE INDEX campaign_events_by_campaign ON campaign_events (campaign_id, timestamp, id)"
    )
    conn.execute("PRAGMA user_version = 11")
    conn.commit()
    conn.close()
    assert upgrade_if_older(sample_db)
    conn = sqlite3.connect(sample_db)
    summary, recount, kept, recount_after = around_a_move(conn, "training_people")
    assert summary and summary == recount
    assert kept == recount_after  # its triggers are there
    columns = [r[2] for r in conn.execute("PRAGMA index_info(campaign_events_by_campaign)")]
    assert columns[:3] == ["campaign_id", "timestamp", "id"] and "verdict" in columns
    conn.close()


def test_a_version_12_file_gets_the_people_totals_on_upgrade(sample_db: Path) -> None:
    """The upgrade from version 12 counts the inscriptions by department and country
    without their start dates, and makes the people's triggers again to keep them too."""
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TABLE training_people_totals")
    for trigger in PEOPLE_TRIGGERS:  # version 12's kept training_people alone
        conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(f"CREATE TRIGGER {trigger} AFTER DELETE ON meta BEGIN SELECT 1; END")
    conn.execute("PRAGMA user_version = 12")
    conn.commit()
    conn.close()
    assert upgrade_if_older(sample_db)
    conn = sqlite3.connect(sample_db)
    summary, recount, kept, recount_after = around_a_move(conn, "training_people_totals")
    assert summary and summary == recount
    assert kept == recount_after != summary  # the triggers made again keep the totals
    conn.close()


@pytest.mark.parametrize("store_kind", ["postgresql"])
@pytest.mark.parametrize(
    ("version", "table"), [("11", "training_people"), ("12", "training_people_totals")]
)
async def test_an_older_postgresql_database_gets_the_people_summaries_on_upgrade(
    store: Store, version: str, table: str
) -> None:
    """From version 11 the upgrade adds training_people, from 12 its totals; either way
    both are counted and the triggers, made again, keep them."""
    conn = await asyncpg.connect(store.url)
    try:
        await conn.execute(
            f"DROP TABLE {table}; DROP FUNCTION "
            + ", ".join(f"{name}()" for name in PEOPLE_TRIGGERS)
            + f" CASCADE; UPDATE meta SET value = '{version}' WHERE key = 'schema_version'"
        )
        assert await ensure_schema(conn)
    finally:
        await conn.close()
    await assert_summaries_are_recounts(store)
    await store.execute(MOVE_ONE)
    await assert_summaries_are_recounts(store)


INSCRIPTIONS = f"{API}/course-inscriptions"


async def test_the_first_filtered_page_after_a_load_counts_nothing(
    client: TestClient, store: Store, tmp_path: Path
) -> None:
    """After a load, the first page filtered by course, dates, department or country
    takes its total from the summaries, and it is right; any other person filter, or one
    with due dates, is the slower path, counted. Either is kept for the data version."""
    counts = client.server.app[COUNTS]
    batch = random_batch(random.Random(3), await state_of(store), 30)
    file = tmp_path / "batch.json"
    file.write_text(json.dumps(batch))
    await store.load([file])
    wanted = {
        ("filter[courses]", "Phishing Fundamentals"): "c.title = 'Phishing Fundamentals'",
        ("filter[from_inscription_date]", "2025-03-01"): "i.start_date >= '2025-03-01'",
        ("filter[to_due_date]", "2025-07-15"): "i.due_date <= '2025-07-15'",
        ("per_page", "5"): "true",
        ("filter[department]", "finance"): "e.department = 'Finance'",
        ("filter[country]", "FRANCE,Spain"): "e.country IN ('France', 'Spain')",
    }
    since = {"filter[from_inscription_date]": "2025-03-01", "filter[country]": "France"}
    for params, condition in [
        *(({name: value}, condition) for (name, value), condition in wanted.items()),
        (since, "i.start_date >= '2025-03-01' AND e.country = 'France'"),
    ]:
        response = await client.get(
            INSCRIPTIONS, params={**params, "per_page": "5"}, headers={"X-API-KEY": KEY_1}
        )
        assert response.status == 200
        total = await fetch(
            store,
            "SELECT count(*) FROM inscriptions i JOIN courses c ON c.id = i.course_id"
            f" JOIN employees e ON e.id = i.employee_id WHERE i.company_id = 1 AND {condition}",
        )
        assert int(response.headers["X-Total-Count"]) == total[0][0] > 0, params
    email = {"filter[email]": "thomas.rousseau@northwind.example"}
    with_due = {"filter[department]": "Finance", "filter[to_due_date]": "2025-07-15"}
    for counted in (email, with_due):
        response = await client.get(INSCRIPTIONS, params=counted, headers={"X-API-KEY": KEY_1})
        assert response.status == 200
    assert len(counts) == len(wanted) + 3  # every total is kept for the data version
    march, july = dt.date(2025, 3, 1), dt.date(2025, 7, 15)
    assert summed({"department": ["finance"]}) and summed({"country": ["france", "spain"]})
    assert summed({"country": ["france"]}, from_inscription_date=march)
    assert not summed({"email": [email["filter[email]"]]})
    assert not summed({"department": ["finance"]}, to_due_date=july)


def summed(lists: dict[str, list[str]], **dates: dt.date) -> bool:
    """Whether the inscriptions' listing with these filters reads its total from a summary."""
    return bool(inscriptions_listing(1, InscriptionFilters(lists=lists, **dates)).summed)


async def test_the_generator_and_the_copy_to_postgresql_keep_them(
    store: Store, tmp_path: Path
) -> None:
    """The generator adds a set to the sample (SQLite), or copies its file into an empty
    PostgreSQL database: the summaries are the recounts either way."""
    sizes = Sizes(companies=2, employees=40, campaigns=4, events_per_campaign=5, courses=3,
                  inscriptions=80, sections=3, big_campaign=10, mid_campaign=5)  # fmt: skip
    if not store.url:
        await asyncio.to_thread(generate, store.sqlite_path, sizes, 5, False, True)
        await assert_summaries_are_recounts(store)
        return
    generated = tmp_path / "generated.sqlite3"
    await asyncio.to_thread(generate, generated, sizes, 5)
    async with store.scratch(tmp_path) as empty:
        await copy_to_pg(generated, empty.url)
        await assert_summaries_are_recounts(empty)
        assert (await fetch(empty, "SELECT sum(inscriptions) FROM training_courses")) == [(80,)]


def astral_text(seed: int) -> str:
    """500 characters of the astral planes (4 bytes each in UTF-8), too varied to compress."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x20000, 0x2A6DF)) for _ in range(500))


def longest_person(tmp_path: Path) -> Path:
    """A person whose department and country are both as long as the format allows, with
    an inscription: 4,000 bytes of key in the people summaries."""
    person = {"id": 9001, "company_id": 1, "first_name": "A", "last_name": "B",
              "email": "a.b@northwind.example", "department": astral_text(1),
              "country": astral_text(2)}  # fmt: skip
    inscription = {"id": 9001, "employee_id": 9001, "course_id": 1, "start_date": "2025-04-14",
                   "due_date": None, "status": "in_progress"}  # fmt: skip
    path = tmp_path / "longest.json"
    path.write_text(json.dumps({"employees": [person], "inscriptions": [inscription]}))
    return path


async def test_the_longest_department_and_country_load_and_are_counted(
    store: Store, tmp_path: Path
) -> None:
    """PostgreSQL refused them ("index row size ... exceeds btree version 4 maximum 2704"
    for training_people's primary key) where SQLite loaded them."""
    await store.load([longest_person(tmp_path)])
    await assert_summaries_are_recounts(store)
    await store.execute(MOVE_ONE.replace("id = 1", "id = 9001"))
    await assert_summaries_are_recounts(store)


@pytest.mark.parametrize("store_kind", ["postgresql"])
async def test_a_writer_gives_older_people_summaries_the_hashed_index(
    store: Store, tmp_path: Path
) -> None:
    """A database made before the hashed index (primary keys over the texts, triggers
    naming them): a writer's start replaces both, and the longest texts then load."""
    from app.data.pg import training as pg_training

    old_triggers = pg_training.PEOPLE_TRIGGERS
    for text in ("department_key", "country_key"):
        old_triggers = old_triggers.replace(f"md5({text})", text)
    conn = await asyncpg.connect(store.url)
    try:
        await conn.execute(
            "DROP INDEX training_people_hashed_key, training_people_totals_hashed_key;"
            f" ALTER TABLE training_people ADD PRIMARY KEY ({training.PEOPLE_KEY});"
            f" ALTER TABLE training_people_totals ADD PRIMARY KEY ({training.TOTALS_KEY});"
            + old_triggers
        )
        assert not await ensure_schema(conn)  # the current version: no upgrade, a repair
        assert await conn.fetchval(pg_training.OLD_PEOPLE_KEYS) == 0
    finally:
        await conn.close()
    await store.load([longest_person(tmp_path)])
    await store.execute(MOVE_ONE)
    await assert_summaries_are_recounts(store)
