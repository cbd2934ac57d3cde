"""The fast path equals the contract: SQLite-built JSON == marshmallow's dump, byte for byte.

contract.md 5 (bodies exactly as reporting-api.md Part 2 lays them out). Every sample
record is dumped through the response schemas (the contract and the OpenAPI source)
from objects built out of the fixture file, and compared with the text the serving
path sends. Also pins that a page costs the same number of statements whatever its size.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from bench_floors import whole_array

from app.data import events, inscriptions
from app.data.feed import START, FeedFilters, feed_listing
from app.data.listings import Paging, RecordNotFound, read_page, read_small, read_window
from app.data.pool import ReadPool
from app.web.schemas import (
    CampaignEventSchema,
    EmployeeEventSchema,
    FeedEventSchema,
    InscriptionSchema,
)

from .support.factories import API, KEY_1, KEY_2, by_id, sample
from .support.verdicts import sample_verdicts

TS = "%Y-%m-%dT%H:%M:%SZ"


def compact(data: Any) -> str:
    """The JSON text SQLite's json_object produces: no spaces, UTF-8 kept as is."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def ts(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, TS)


def date(text: str | None) -> dt.date | None:
    return None if text is None else dt.date.fromisoformat(text)


def event_order(e: dict[str, Any]) -> tuple[str, int]:
    return (e["timestamp"], e["id"])


def expected_campaign_events(campaign_id: int) -> list[str]:
    employees = by_id("employees")
    schema = CampaignEventSchema()
    rows = sorted(
        (e for e in sample()["campaign_events"] if e["campaign_id"] == campaign_id),
        key=event_order,
    )
    return [
        compact(
            schema.dump(
                {
                    "id": e["id"],
                    "type": e["type"],
                    "timestamp": ts(e["timestamp"]),
                    "victim": employees[e["employee_id"]],
                }
            )
        )
        for e in rows
    ]


def expected_employee_events(employee_id: int) -> list[str]:
    campaigns = by_id("campaigns")
    schema = EmployeeEventSchema()
    rows = sorted(
        (e for e in sample()["campaign_events"] if e["employee_id"] == employee_id),
        key=event_order,
    )
    out = []
    for e in rows:
        c = campaigns[e["campaign_id"]]
        campaign = {"id": c["id"], "title": c["title"], "launch_date": ts(c["launch_date"])}
        out.append(
            compact(
                schema.dump(
                    {
                        "id": e["id"],
                        "type": e["type"],
                        "timestamp": ts(e["timestamp"]),
                        "campaign": campaign,
                    }
                )
            )
        )
    return out


def expected_inscriptions(company_id: int) -> list[str]:
    data = sample()
    employees, courses, teams = by_id("employees"), by_id("courses"), by_id("teams")
    results = {(r["inscription_id"], r["section_id"]): r for r in data["section_results"]}
    schema = InscriptionSchema()
    rows = sorted(
        (
            i
            for i in data["inscriptions"]
            if employees[i["employee_id"]]["company_id"] == company_id
        ),
        key=lambda i: (i["start_date"], i["id"]),
    )
    out = []
    for i in rows:
        e, c = employees[i["employee_id"]], courses[i["course_id"]]
        team_names = sorted(
            teams[m["team_id"]]["name"] for m in data["team_members"] if m["employee_id"] == e["id"]
        )
        sections = sorted(
            (s for s in data["course_sections"] if s["course_id"] == c["id"]),
            key=lambda s: s["position"],
        )
        section_entries = []
        for s in sections:
            r = results.get((i["id"], s["id"]), {})
            result = r.get("result")
            section_entries.append(
                {
                    "title": s["title"],
                    "section_type": s["section_type"],
                    "completed_at": date(r.get("completed_at")),
                    "result": None if result is None else float(result),
                    "status": r.get("status"),
                }
            )
        record = {
            "victim_name": f"{e['first_name']} {e['last_name']}",
            "victim_department": e["department"],
            "course_title": c["title"],
            "start_date": date(i["start_date"]),
            "due_date": date(i["due_date"]),
            "status": i["status"],
            "victim_email": e["email"],
            "groups": [{"name": n} for n in team_names],
            "victim_country": e["country"],
            "events": section_entries,
        }
        out.append(compact(schema.dump(record)))
    return out


def read_all(conn: sqlite3.Connection, listing: Any) -> Any:
    """Every record of a listing, read the way the server reads a short array."""
    records = read_small(conn, listing, 10_000)
    assert records is not None
    return records


def company_of_campaign(campaign_id: int) -> int:
    return by_id("campaigns")[campaign_id]["company_id"]


def test_every_campaign_event_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    for campaign in sample()["campaigns"]:
        rows = read_all(conn, events.campaign_listing(campaign["company_id"], campaign["id"]))
        assert [text.decode() for text in rows.texts] == expected_campaign_events(campaign["id"])


def test_every_employee_event_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    for employee in sample()["employees"]:
        rows = read_all(conn, events.employee_listing(employee["company_id"], employee["id"]))
        assert [text.decode() for text in rows.texts] == expected_employee_events(employee["id"])


def test_every_inscription_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    for company in (1, 2):
        listing = inscriptions.inscriptions_listing(company, inscriptions.InscriptionFilters())
        rows = read_page(conn, listing, Paging(1, 500), None)
        assert [text.decode() for text in rows.texts] == expected_inscriptions(company)


async def test_http_bodies_are_the_same_bytes(client: Any) -> None:
    """What leaves the server is the same text, joined into an array."""
    response = await client.get(f"{API}/campaigns/1/events", headers={"X-API-KEY": KEY_1})
    assert await response.text() == "[" + ",".join(expected_campaign_events(1)) + "]"
    response = await client.get(
        f"{API}/course-inscriptions", params={"per_page": "500"}, headers={"X-API-KEY": KEY_2}
    )
    assert await response.text() == "[" + ",".join(expected_inscriptions(2)) + "]"


def test_statements_per_page_do_not_grow_with_page_size(conn: sqlite3.Connection) -> None:
    """One statement (token, ownership, count and page), whether the page holds 1 record
    or 100: SQLite reads one statement from one snapshot, so no BEGIN or COMMIT either."""
    for per_page in (1, 100):
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        listing = inscriptions.inscriptions_listing(1, inscriptions.InscriptionFilters())
        page = read_page(conn, listing, Paging(1, per_page), None)
        conn.set_trace_callback(None)
        assert len(statements) == 1
        assert len(page.texts) == min(per_page, page.total)


def test_a_known_total_is_trusted_only_at_its_token(conn: sqlite3.Connection) -> None:
    """A total counted before holds for the snapshot whose token it was counted at; at
    any other token (a load came in between) the page is read again with its count."""
    listing = inscriptions.inscriptions_listing(1, inscriptions.InscriptionFilters())
    counted = read_page(conn, listing, Paging(1, 5), None)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    kept = read_page(conn, listing, Paging(1, 5), (counted.token, 12345))
    assert (kept.total, len(statements)) == (12345, 1)
    stale = read_page(conn, listing, Paging(1, 5), ("an older token", 12345))
    conn.set_trace_callback(None)
    assert (stale.total, len(statements)) == (counted.total, 3)
    assert kept.texts == stale.texts == counted.texts
    assert kept.token == stale.token == counted.token != ""


def test_a_short_read_of_another_companys_record_finds_nothing(conn: sqlite3.Connection) -> None:
    """The ownership is read in the records' statement: another company's employee is
    not found (and the listing is not read as an empty one)."""
    employee = next(e for e in sample()["employees"] if e["company_id"] == 2)
    assert read_small(conn, events.employee_listing(2, employee["id"]), 10) is not None
    with pytest.raises(RecordNotFound):
        read_small(conn, events.employee_listing(1, employee["id"]), 10)
    with pytest.raises(RecordNotFound):
        read_page(conn, events.employee_listing(1, employee["id"]), Paging(1, 5), None)


def test_the_benchmark_floor_builds_the_same_array(conn: sqlite3.Connection) -> None:
    """The floor make bench measures is this very JSON, built whole by SQLite."""
    listing = events.campaign_listing(1, 1)
    whole = conn.execute(whole_array(listing), listing.params).fetchone()[0]
    assert json.loads(whole) == [json.loads(text) for text in expected_campaign_events(1)]
    page = inscriptions.inscriptions_listing(2, inscriptions.InscriptionFilters())
    first = conn.execute(whole_array(page, limit=True), [*page.params, 25]).fetchone()[0]
    assert json.loads(first) == [json.loads(text) for text in expected_inscriptions(2)[:25]]
    joined = conn.execute(whole_array(listing, joined=True), listing.params).fetchone()[0]
    assert joined == whole


def test_every_feed_event_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    """The feed's records (contract.md 13), in the database's (seq, id) order."""
    campaigns, people = by_id("campaigns"), by_id("employees")
    fixture = by_id("campaign_events")
    automation = sample_verdicts()
    schema = FeedEventSchema()
    for company in (1, 2):
        order = conn.execute(
            "SELECT ev.id FROM campaign_events ev JOIN campaigns c ON c.id = ev.campaign_id"
            " WHERE c.company_id = ? ORDER BY ev.seq, ev.id",
            (company,),
        )
        expected = []
        for (event_id,) in order:
            e = fixture[event_id]
            c = campaigns[e["campaign_id"]]
            campaign = {"id": c["id"], "title": c["title"], "launch_date": ts(c["launch_date"])}
            record = {k: e[k] for k in ("id", "type", "with_captcha")}
            record |= {"ip": e.get("ip"), "user_agent": e.get("user_agent")}
            record |= {"timestamp": ts(e["timestamp"]), "campaign": campaign}
            record["victim"] = people[e["employee_id"]]
            record["automation"] = automation[event_id]
            expected.append(compact(schema.dump(record)))
        window = read_window(conn, feed_listing(company, FeedFilters(), START), 10_000)
        assert [text.decode() for text in window.texts] == expected
        assert any('"ip":"' in text for text in expected)  # the sample has addresses


async def test_every_serving_connection_maps_the_file(sample_db: Path) -> None:
    """Short reads on the event loop's connection and streams on the pooled ones read the
    file through a memory map: a page missing from a connection's cache costs no system
    call (a stream's employees are read at random from their index)."""
    pool = await ReadPool.open(sample_db, 2)
    try:
        inline = pool.run_inline(lambda conn: conn.execute("PRAGMA mmap_size").fetchone()[0])
        async with pool.acquire() as conn, conn.execute("PRAGMA mmap_size") as cursor:
            pooled = await cursor.fetchone()
    finally:
        await pool.close()
    assert inline >= 1 << 30 and pooled is not None and pooled[0] >= 1 << 30
