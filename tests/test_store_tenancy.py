"""Tenancy in the databases themselves (contract.md 1), on SQLite and PostgreSQL alike.

Written directly, not through a loader: a row never moves to another company, and a
section result never ties one company's inscription to another company's section. And
should rows cross companies all the same (the rules switched off), the feed and the
answers that join events to people still show a company nothing of another's people.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import date
from typing import Any

import asyncpg
import pytest
from aiohttp.test_utils import TestClient

from app.data import events
from app.data.csv_lines import KEPT_TEXTS
from app.data.listings import Listing, Paging, RecordNotFound, read_page, read_small
from app.data.partners import year_before
from app.data.pg import sql
from app.data.pg.sql import numbered

from .support.clients import MakeClient
from .support.factories import API, KEY_2, KEY_PARTNER, Day, get, sample
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()
REFUSED = (sqlite3.IntegrityError, asyncpg.IntegrityConstraintViolationError)


def first_id(table: str, company_id: int) -> int:
    return int(next(r["id"] for r in sample()[table] if r.get("company_id") == company_id))


def course_section(company_id: int) -> int:
    """A section of one of the company's courses."""
    courses = {r["id"] for r in sample()["courses"] if r["company_id"] == company_id}
    return int(next(s["id"] for s in sample()["course_sections"] if s["course_id"] in courses))


async def read(store: Store, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query on the store (SQLite's ``?`` parameters)."""
    if not store.url:
        conn = sqlite3.connect(store.sqlite_path)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    pg = await asyncpg.connect(store.url)
    try:
        return [tuple(row) for row in await pg.fetch(numbered(sql), *params)]
    finally:
        await pg.close()


def moves() -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Writes that would give a row to another company, or tie two companies' rows."""
    courses_1 = {r["id"] for r in sample()["courses"] if r["company_id"] == 1}
    inscriptions_1 = {r["id"] for r in sample()["inscriptions"] if r["course_id"] in courses_1}
    results = sample()["section_results"]
    inscription_1 = next(
        r["inscription_id"] for r in results if r["inscription_id"] in inscriptions_1
    )
    return {
        "employee": ("UPDATE employees SET company_id = 2 WHERE id = ?", (1,)),
        "campaign": ("UPDATE campaigns SET company_id = 2 WHERE id = ?", (1,)),
        "team": ("UPDATE teams SET company_id = 2 WHERE id = ?", (first_id("teams", 1),)),
        "course": ("UPDATE courses SET company_id = 2 WHERE id = ?", (first_id("courses", 1),)),
        "api key": ("UPDATE api_keys SET company_id = 2 WHERE company_id = 1", ()),
        "inscription with its people": (
            "UPDATE inscriptions SET company_id = 2, employee_id = ?, course_id = ? WHERE id = ?",
            (first_id("employees", 2), first_id("courses", 2), inscription_1),
        ),
        "event with its people": (
            "UPDATE campaign_events SET campaign_id = ?, employee_id = ? WHERE campaign_id = 1",
            (first_id("campaigns", 2), first_id("employees", 2)),
        ),
        "section": (
            "UPDATE course_sections SET course_id = ?, position = position + 1000 WHERE id = ?",
            (first_id("courses", 2), course_section(1)),
        ),
        "section result inserted": (
            "INSERT INTO section_results (inscription_id, section_id, result, status)"
            " VALUES (?, ?, 100, 'APPROVED')",
            (inscription_1, course_section(2)),
        ),
        "section result moved": (
            "UPDATE section_results SET section_id = ? WHERE inscription_id = ?",
            (course_section(2), inscription_1),
        ),
    }


@pytest.mark.parametrize("case", list(moves()))
async def test_the_database_refuses_a_write_across_companies(case: str, store: Store) -> None:
    sql, params = moves()[case]
    table = sql.split()[2] if sql.startswith("INSERT") else sql.split()[1]
    before = await read(store, f"SELECT * FROM {table} ORDER BY 1, 2")
    with pytest.raises(REFUSED, match="compan"):
        await store.execute(sql, *params)
    assert await read(store, f"SELECT * FROM {table} ORDER BY 1, 2") == before


async def without_rules(store: Store, statements: list[str]) -> None:
    """Run ``statements`` with the tenancy triggers switched off, as a broken tool might."""
    if store.url:
        pg = await asyncpg.connect(store.url)
        try:
            await pg.execute("SET session_replication_role = replica")
            for statement in statements:
                await pg.execute(statement)
        finally:
            await pg.close()
        return
    conn = sqlite3.connect(store.sqlite_path)
    try:
        triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        saved = triggers.fetchall()
        with conn:
            for name, _ in saved:
                conn.execute(f"DROP TRIGGER {name}")
            for statement in statements:
                conn.execute(statement)
            for _, sql in saved:
                conn.execute(sql)
    finally:
        conn.close()


async def json_of(client: TestClient, path: str) -> Any:
    response = await get(client, f"{API}{path}", KEY_2)
    assert response.status == 200, await response.text()
    return await response.json(content_type=None)


async def test_answers_that_join_people_show_no_other_company_people_even_so(
    store: Store, make_client: MakeClient
) -> None:
    """Campaign 1 given to company 2 behind the rules' backs: company 2 sees the
    campaign, but none of company 1's people in its feed or its departments."""
    await without_rules(store, ["UPDATE campaigns SET company_id = 2 WHERE id = 1"])
    client = await make_client()
    people_1 = {r["id"] for r in sample()["employees"] if r["company_id"] == 1}
    feed = await json_of(client, "/events?limit=1000")
    assert {e["victim"]["id"] for e in feed}.isdisjoint(people_1)
    report = await json_of(client, "/campaigns/1")
    assert report["by_department"] == []


async def test_the_partner_rollup_counts_no_other_company_people_even_so(
    store: Store, dated: tuple[TestClient, Day]
) -> None:
    """The same move: company 2's line of the rollup counts the sends and the people of
    company 2's campaign reports, none of campaign 1's (company 1's people)."""
    await without_rules(store, ["UPDATE campaigns SET company_id = 2 WHERE id = 1"])
    client, clock = dated
    clock.day = date(2025, 9, 1)  # campaign 1 (2025-02-11) is of the last 12 months
    since = f"{year_before(clock.day).isoformat()}T00:00:00Z"
    partner = {"X-API-KEY": KEY_PARTNER}
    async with client.get("/api/partners/v1/companies", headers=partner) as response:
        line = next(row for row in await response.json() if row["id"] == 2)
    async with client.get(f"{API}/campaigns", headers={**partner, "X-Company-ID": "2"}) as r:
        recent = [c for c in await r.json() if c["launch_date"] >= since]
    assert 1 in {c["id"] for c in recent}
    assert line["sends"] == sum(c["targets"] for c in recent)


async def test_both_stores_carry_the_same_rules(store: Store) -> None:
    """Every trigger of one store has its twin on the other (SQLite needs two per rule
    that guards inserts and updates)."""
    if store.url:
        rows = await read(store, "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        other = sqlite3.connect(store.sqlite_path)
        try:
            twins = other.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            expected = {name.removesuffix("_on_update") for (name,) in twins}
            # The change feeds' deletions: one PostgreSQL trigger takes inserts and deletes.
            expected -= {"section_results_removed", "team_members_removed"}
            # The kept CSV cells: PostgreSQL makes them in a generated column.
            expected -= {f"{t}_csv_cells{end}" for t in KEPT_TEXTS for end in ("", "_again")}
        finally:
            other.close()
        assert {name for (name,) in rows} == expected
    else:
        rows = await read(store, "SELECT name FROM sqlite_master WHERE type = 'trigger'")
        names = {name for (name,) in rows}
        assert {"section_results_same_company", "employees_keeps_company"} <= names


def foreign_records() -> dict[str, Listing]:
    """Company 1 asking for company 2's records (each has events in the sample)."""
    return {
        "campaign events": events.campaign_listing(1, first_id("campaigns", 2)),
        "employee events": events.employee_listing(1, first_id("employees", 2)),
    }


def plan_nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A node of an EXPLAIN (FORMAT JSON) plan and every node below it."""
    return [node, *(n for child in node.get("Plans", ()) for n in plan_nodes(child))]


@pytest.mark.parametrize("case", list(foreign_records()))
async def test_another_company_s_record_is_refused_before_its_rows_are_read(
    case: str, store: Store
) -> None:
    """The 404 of another company's record reads none of that record's rows: they would
    all be walked (none is the asking company's), so the 404 would take as long as the
    record is large where a free id's takes no time, telling the two apart."""
    listing = foreign_records()[case]
    if store.url:
        pg = await asyncpg.connect(store.url)
        try:
            for count, window, bounds in (
                (True, "LIMIT ? OFFSET ?", (10, 0)),
                (False, "LIMIT ?", (200,)),
            ):
                statement, params = sql.one_statement(listing, count, window)
                explained = await pg.fetchval(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", *params, *bounds
                )
                nodes = plan_nodes(json.loads(explained)[0]["Plan"])
                read = [n for n in nodes if n.get("Relation Name") == "campaign_events"]
                assert read and all(n["Actual Loops"] == 0 for n in read), (count, read)
        finally:
            await pg.close()
        return
    conn = sqlite3.connect(store.sqlite_path)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        with pytest.raises(RecordNotFound):
            read_page(conn, listing, Paging(1, 10), None)
        with pytest.raises(RecordNotFound):
            read_small(conn, listing, 200)
    finally:
        conn.close()
    assert statements and not [s for s in statements if "campaign_events" in s]
