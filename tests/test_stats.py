"""/stats/phishing and /stats/training: every row is the oracle's, at the boundaries too.

The sample plus a fixture of campaigns launched on the edges of buckets (31 December at
23:59:59Z and 1 January at 00:00:00Z, a quarter's last second and the next one's first,
ISO week 53 of 2026, which ends on 3 January 2027), events that arrive after their
bucket ended or before the launch, an employee in two teams and inscriptions due on
either side of a year. The rows the database builds equal the response schema's dump of
the oracle's rows (support/stats.py) for every interval, grouping and filter, and over
random windows; the HTTP tests cover the window's defaults and limits, CSV, the ETag
and both stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.data import stats
from app.data.listings import Listing, Paging, read_page
from app.data.pg import sql
from app.data.pool import ReadPool
from app.data.schema import configure
from app.tools.loader import load_files
from app.tools.pg_loader import load_pg
from app.web.schemas import PhishingStatsSchema, TrainingStatsSchema, stats_rows

from .support import stats as oracle
from .support.factories import API, Day, get, sample
from .support.reports import verdicts as verdicts_of
from .support.stores import EACH_STORE, Store

INTERVALS = ("week", "month", "quarter", "year")
GROUPINGS = (None, "department", "country", "team")
# The boundary fixture's people, by their departments (and the sample's Finance).
OURS = {"department": ["zeta ops", "ärzte nord", "alpha team"]}
FILTERS: list[tuple[dict[str, list[str]], bool]] = [
    ({}, False),
    ({}, True),
    (OURS, False),
    ({"teams": ["night"], "country": ["spain", "åland"]}, True),
]
WIDE = (dt.date(2025, 1, 1), dt.date(2027, 1, 31))  # every interval fits in 120 buckets


def boundary_fixture() -> dict[str, Any]:
    """Company 1 records on the edges of buckets (see the module's docstring)."""
    people = [
        (9950, "Zeta Ops", "Åland"),
        (9951, "Zeta Ops", "Spain"),
        (9952, "Ärzte Nord", "Spain"),
        (9953, "alpha team", "Åland"),
    ]
    employees = [
        {
            "id": pid,
            "company_id": 1,
            "first_name": f"Edge{pid}",
            "last_name": "Case",
            "email": f"edge{pid}@example.com",
            "department": department,
            "country": country,
        }
        for pid, department, country in people
    ]
    campaigns = [
        (9601, "2025-12-31T23:59:59Z", [9950, 9951, 9952]),  # a month's and year's last second
        (9602, "2026-01-01T00:00:00Z", [9950, 9953]),
        (9603, "2026-03-31T23:59:59Z", [9951]),  # a quarter's last second
        (9604, "2026-04-01T00:00:00Z", [9952]),
        (9605, "2026-12-28T00:00:00Z", [9950]),  # ISO week 53 of 2026 starts
        (9606, "2027-01-03T23:59:59Z", [9951]),  # ... and ends
    ]
    events = [
        (9601, 9950, "open", "2026-01-01T00:00:05Z", False),  # after its bucket ended
        (9601, 9950, "click", "2026-01-01T00:00:10Z", False),  # 11 s
        (9601, 9951, "click", "2025-12-31T23:00:00Z", True),  # before the launch: 0 s
        (9601, 9951, "report", "2026-01-02T00:00:00Z", False),
        (9602, 9953, "click", "2026-01-01T00:01:00Z", False),
        (9602, 9953, "fail", "2026-01-01T00:02:00Z", False),
        (9603, 9951, "report", "2026-04-01T00:00:01Z", False),
        (9605, 9950, "click", "2026-12-28T01:00:00Z", False),
    ]
    inscriptions = [
        # Due on 31 December, completed on 2 January (given): late.
        {"id": 9601, "employee_id": 9950, "course_id": 9601, "start_date": "2025-12-01",
         "due_date": "2025-12-31", "status": "completed", "completed_at": "2026-01-02"},
        # Due on 1 January, completed that day (its section's date): on time.
        {"id": 9602, "employee_id": 9951, "course_id": 9601, "start_date": "2025-12-15",
         "due_date": "2026-01-01", "status": "completed"},
        {"id": 9603, "employee_id": 9952, "course_id": 9601, "start_date": "2026-03-31",
         "due_date": None, "status": "in_progress"},
        {"id": 9604, "employee_id": 9953, "course_id": 9601, "start_date": "2026-04-01",
         "due_date": "2026-06-30", "status": "not_started"},
    ]  # fmt: skip
    return {
        "employees": employees,
        "teams": [
            {"id": 9950, "company_id": 1, "name": "Night"},
            {"id": 9951, "company_id": 1, "name": "Day"},
        ],
        "team_members": [
            {"employee_id": 9950, "team_id": 9950},
            {"employee_id": 9950, "team_id": 9951},
            {"employee_id": 9951, "team_id": 9950},
            {"employee_id": 9953, "team_id": 9951},
        ],
        "campaigns": [
            {"id": cid, "company_id": 1, "title": f"Edge {cid}", "launch_date": launch}
            for cid, launch, _ in campaigns
        ],
        "campaign_targets": [
            {"campaign_id": cid, "employee_id": pid}
            for cid, _, people in campaigns
            for pid in people
        ],
        "campaign_events": [
            {
                "id": 960000 + n,
                "campaign_id": cid,
                "employee_id": pid,
                "type": kind,
                "timestamp": at,
                "with_captcha": captcha,
            }
            for n, (cid, pid, kind, at, captcha) in enumerate(events)
        ],
        "courses": [{"id": 9601, "company_id": 1, "title": "Edge course"}],
        "course_sections": [
            {"id": 9601, "course_id": 9601, "title": "Quiz", "section_type": "quiz", "position": 1}
        ],
        "inscriptions": inscriptions,
        "section_results": [
            {
                "inscription_id": 9601,
                "section_id": 9601,
                "completed_at": "2025-12-20",
                "result": 90.0,
                "status": "APPROVED",
            },
            {
                "inscription_id": 9602,
                "section_id": 9601,
                "completed_at": "2026-01-01",
                "result": 80.25,
                "status": "APPROVED",
            },
        ],
    }


def data(*later: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The sample, then the boundary fixture (then ``later`` loads): what the oracle reads."""
    return oracle.loaded(sample(), boundary_fixture(), *later)


def write_fixture(directory: Path) -> Path:
    path = directory / "edges.json"
    path.write_text(json.dumps(boundary_fixture()), encoding="utf-8")
    return path


@pytest.fixture
def edges(sample_db: Path, tmp_path: Path) -> sqlite3.Connection:
    """A reader on the sample plus the boundary fixture."""
    load_files(sample_db, [write_fixture(tmp_path)])
    conn = sqlite3.connect(sample_db, isolation_level=None)
    configure(conn)
    return conn


def compact(record: Any) -> str:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


def texts(conn: sqlite3.Connection, listing: Listing) -> list[str]:
    """Every record, and the count agrees; the first page is the listing's start."""
    found = [row[0] for row in conn.execute(listing.select(), listing.select_params)]
    assert conn.execute(listing.count(), listing.params).fetchone()[0] == len(found)
    assert read_page(conn, listing, Paging(1, 500), None).texts == found[:500]
    return [text.decode() for text in found]


def filters(
    interval: str,
    group_by: str | None = None,
    lists: dict[str, list[str]] | None = None,
    without_captcha: bool = False,
    window: tuple[dt.date, dt.date] = WIDE,
) -> stats.StatsFilters:
    found = stats.buckets(*window, interval, stats.MAX_BUCKETS)
    return stats.StatsFilters(found, group_by, lists or {}, without_captcha)


def expected(
    endpoint: str, f: stats.StatsFilters, company: int = 1, later: dict[str, Any] | None = None
) -> list[str]:
    """The oracle's rows dumped by the rows' response schema: the bytes to send (after the
    ``later`` load too, when given)."""
    spans = list(f.buckets)
    if endpoint == "phishing":
        rows = oracle.phishing(data(), company, spans, f.group_by, f.lists, f.without_captcha)
        schema = stats_rows(PhishingStatsSchema, f.group_by)()
    else:
        records = data(later) if later else data()
        rows = oracle.training(records, company, spans, f.group_by, f.lists)
        schema = stats_rows(TrainingStatsSchema, f.group_by)()
    return [compact(schema.dump(dated(row))) for row in rows]


def dated(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its days as dates, as the schemas take them."""
    return row | {k: dt.date.fromisoformat(row[k]) for k in ("period_start", "period_end")}


def listing(endpoint: str, f: stats.StatsFilters, company: int = 1) -> Listing:
    make = stats.phishing_listing if endpoint == "phishing" else stats.training_listing
    return make(company, f)


def test_the_oracle_s_buckets_are_the_server_s() -> None:
    """Walking the window day by day gives the same buckets as the server's arithmetic."""
    for interval in INTERVALS:
        walked = oracle.window(*WIDE, interval)
        assert stats.buckets(*WIDE, interval, stats.MAX_BUCKETS) == walked
    # ISO week 53 of 2026, from Monday 28 December to Sunday 3 January.
    assert oracle.bucket_of(dt.date(2027, 1, 3), "week") == (dt.date(2026, 12, 28),
                                                             dt.date(2027, 1, 3))  # fmt: skip
    assert dt.date(2026, 12, 28).isocalendar()[:2] == (2026, 53)


@pytest.mark.parametrize("interval", INTERVALS)
@pytest.mark.parametrize("group_by", GROUPINGS)
def test_every_row_is_the_oracle_s(
    edges: sqlite3.Connection, interval: str, group_by: str | None
) -> None:
    for lists, without_captcha in FILTERS:
        f = filters(interval, group_by, lists, without_captcha)
        assert texts(edges, listing("phishing", f)) == expected("phishing", f)
        for company in (1, 2):
            assert texts(edges, listing("phishing", f, company)) == expected("phishing", f, company)
        if not without_captcha:
            assert texts(edges, listing("training", f)) == expected("training", f)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),  # CI: a failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    first=st.dates(dt.date(2024, 6, 1), dt.date(2027, 6, 30)),
    days=st.integers(0, 900),
    interval=st.sampled_from(INTERVALS),
    group_by=st.sampled_from(GROUPINGS),
    without_captcha=st.booleans(),
)
def test_any_window_is_the_oracle_s(
    edges: sqlite3.Connection,
    first: dt.date,
    days: int,
    interval: str,
    group_by: str | None,
    without_captcha: bool,
) -> None:
    window = (first, first + dt.timedelta(days=days))
    if len(stats.buckets(*window, interval, stats.MAX_BUCKETS)) > stats.MAX_BUCKETS:
        return
    f = filters(interval, group_by, {}, without_captcha, window)
    assert f.buckets[0][0] <= first and f.buckets[-1][1] >= window[1]  # widened, whole
    assert texts(edges, listing("phishing", f)) == expected("phishing", f)
    assert texts(edges, listing("training", f)) == expected("training", f)


def rows(conn: sqlite3.Connection, endpoint: str, f: stats.StatsFilters) -> list[dict[str, Any]]:
    return [json.loads(text) for text in texts(conn, listing(endpoint, f))]


def cell(found: list[dict[str, Any]], start: str, **group: str) -> dict[str, Any]:
    return next(r for r in found if r["period_start"] == start and group.items() <= r.items())


def test_the_boundaries(edges: sqlite3.Connection) -> None:
    """Each campaign in its launch's bucket, whenever its events came; stated by hand."""
    ours = {"lists": OURS}
    month = rows(edges, "phishing", filters("month", **ours))
    december, january = cell(month, "2025-12-01"), cell(month, "2026-01-01")
    assert (december["campaigns"], december["sends"], december["clicked"]) == (1, 3, 2)
    assert december["median_seconds_to_first_click"] == 0  # 0 s and 11 s: the lower middle
    assert (january["campaigns"], january["sends"], january["failed"]) == (1, 2, 1)
    assert cell(month, "2026-03-01")["campaigns"] == 1  # launched at 23:59:59Z on the 31st
    february = cell(month, "2026-02-01")  # an empty bucket: zeros and nulls
    assert february["sends"] == 0 and february["click_rate"] is None
    assert february["median_seconds_to_first_report"] is None
    quarter = rows(edges, "phishing", filters("quarter", **ours))
    assert [cell(quarter, q)["campaigns"] for q in ("2026-01-01", "2026-04-01")] == [2, 1]
    year = rows(edges, "phishing", filters("year", **ours))
    assert [cell(year, y)["campaigns"] for y in ("2025-01-01", "2026-01-01", "2027-01-01")] == [
        1, 4, 1,
    ]  # fmt: skip
    week = rows(edges, "phishing", filters("week", **ours))
    first_2026 = cell(week, "2025-12-29")  # ISO week 1 of 2026 holds both new-year sends
    assert (first_2026["period_end"], first_2026["campaigns"]) == ("2026-01-04", 2)
    week_53 = cell(week, "2026-12-28")
    assert (week_53["period_end"], week_53["campaigns"], week_53["sends"]) == ("2027-01-03", 2, 2)


def test_a_person_in_two_teams_counts_in_both(edges: sqlite3.Connection) -> None:
    f = filters("month", "team", OURS)
    found = rows(edges, "phishing", f)
    night, day = cell(found, "2026-01-01", team="Night"), cell(found, "2026-01-01", team="Day")
    total = cell(rows(edges, "phishing", filters("month", None, OURS)), "2026-01-01")
    assert (night["sends"], day["sends"], total["sends"]) == (1, 2, 2)  # 3 > 2: no sum
    # The dense grid: each team in every bucket, by period then name.
    assert [(r["period_start"], r["team"]) for r in found[:2]] == [
        ("2025-01-01", "Day"), ("2025-01-01", "Night"),
    ]  # fmt: skip
    assert len(found) == 2 * len(f.buckets)


def test_training_boundaries(edges: sqlite3.Connection) -> None:
    found = rows(edges, "training", filters("month", None, OURS))
    december, january = cell(found, "2025-12-01"), cell(found, "2026-01-01")
    assert (december["due"], december["completed_late"], december["started"]) == (1, 1, 2)
    assert december["on_time_rate"] == 0.0 and december["average_result"] == 90.0
    assert (january["completed_on_time"], january["on_time_rate"]) == (1, 1.0)
    march = cell(found, "2026-03-01")
    assert (march["due"], march["no_due_date"], march["started"]) == (0, 1, 1)
    assert march["on_time_rate"] is None and march["average_result"] is None
    june = cell(found, "2026-06-01")
    assert (june["due"], june["not_completed"]) == (1, 1)


# Inscription 9602 done again on the 5th, past its due date, with another result.
REDONE = {
    "section_results": [
        {
            "inscription_id": 9602,
            "section_id": 9601,
            "completed_at": "2026-01-05",
            "result": 60.0,
            "status": "APPROVED",
        }
    ]
}


@EACH_STORE
async def test_section_results_alone_leave_the_completion_date(
    make_client: Any, store: Store, tmp_path: Path
) -> None:
    """A load of section results alone takes the new result but keeps the completion date
    (derived when the inscription was loaded): 9602 stays on time."""
    redone = tmp_path / "redone.json"
    redone.write_text(json.dumps(REDONE), encoding="utf-8")
    await store.load([write_fixture(tmp_path)])
    await store.load([redone])
    client = await make_client()
    window = (dt.date(2025, 12, 1), dt.date(2026, 1, 31))
    query = f"filter[from_date]={window[0]}&filter[to_date]={window[1]}&interval=month"
    found = await (await get(client, f"{TRAINING}?{query}&group_by=department")).json()
    f = filters("month", "department", window=window)
    assert found == [json.loads(text) for text in expected("training", f, later=REDONE)]
    january = cell(found, "2026-01-01", department="Zeta Ops")
    assert (january["completed_on_time"], january["completed_late"]) == (1, 0)
    assert january["average_result"] == 60.0


# Through HTTP: the window, its limits, the formats, the ETag.
PHISHING = f"{API}/stats/phishing"
TRAINING = f"{API}/stats/training"


async def test_the_default_window_is_13_months_to_the_current_one(
    dated: tuple[Any, Day],
) -> None:
    client, day = dated  # 1 September 2025
    for path in (PHISHING, TRAINING):
        response = await get(client, path)
        assert response.status == 200
        body = await response.json()
        assert (body[0]["period_start"], body[-1]["period_end"]) == ("2024-09-01", "2025-09-30")
        assert len(body) == 13 and response.headers["X-Total-Count"] == "13"
    before = (await get(client, PHISHING)).headers["ETag"]
    day.day = dt.date(2025, 10, 1)  # a new month: the window and the ETag move
    moved = await get(client, PHISHING, **{"If-None-Match": before})
    assert moved.status == 200 and moved.headers["ETag"] != before
    assert (await moved.json())[-1]["period_start"] == "2025-10-01"
    weeks = await (await get(client, f"{PHISHING}?interval=week")).json()
    assert weeks[0]["period_start"] == "2024-09-30"  # the Monday of 1 October 2024's week


@pytest.mark.parametrize("path", [PHISHING, TRAINING])
async def test_more_than_120_buckets_is_400_naming_the_parameters(client: Any, path: str) -> None:
    ok = await get(client, f"{path}?filter[from_date]=2016-01-01&filter[to_date]=2025-12-31")
    assert ok.status == 200 and ok.headers["X-Total-Count"] == "120"
    bad = await get(client, f"{path}?filter[from_date]=2015-12-31&filter[to_date]=2025-12-31")
    assert bad.status == 400
    problem = await bad.json()
    assert set(problem["errors"]) == {"interval", "filter[from_date]", "filter[to_date]"}
    weeks = await get(client, f"{path}?interval=week&filter[from_date]=2020-01-01")
    assert weeks.status == 400  # 2020 to the end of the current month: > 120 weeks
    for query in ("interval=day", "group_by=manager", "filter[from_date]=2025-02-30",
                  "filter[from_date]=2025-03-01&filter[to_date]=2025-02-01"):  # fmt: skip
        assert (await get(client, f"{path}?{query}")).status == 400, query


@pytest.mark.parametrize("path", [PHISHING, TRAINING])
async def test_interval_and_group_by_take_any_letter_case(client: Any, path: str) -> None:
    window = "filter[from_date]=2025-01-01&filter[to_date]=2025-03-31"
    lower = await (await get(client, f"{path}?{window}&interval=week&group_by=department")).json()
    upper = await get(client, f"{path}?{window}&interval=Week&group_by=DEPARTMENT")
    assert upper.status == 200 and await upper.json() == lower


async def test_the_csv_header_follows_the_openapi_schema(client: Any) -> None:
    document = await (await client.get("/api/docs/openapi.json")).json()
    for path, name in ((PHISHING, "PhishingStats"), (TRAINING, "TrainingStats")):
        properties = list(document["components"]["schemas"][name]["properties"])
        for group_by in GROUPINGS:
            query = "format=csv&filter[from_date]=2025-01-01&filter[to_date]=2025-03-31"
            query += f"&group_by={group_by}" if group_by else ""
            response = await get(client, f"{path}?{query}")
            assert response.status == 200
            header = (await response.text()).split("\r\n", 1)[0].split(",")
            others = {"department", "country", "team"} - {group_by}
            assert header == [p for p in properties if p not in others]


async def test_paging_ndjson_and_the_etag_after_a_load(
    make_client: Any, store: Store, tmp_path: Path
) -> None:
    client = await make_client()
    path = f"{PHISHING}?filter[from_date]=2025-10-01&filter[to_date]=2026-03-31&group_by=team"
    whole = await (await get(client, path)).json()
    page = await get(client, f"{path}&per_page=5&page=2")
    assert await page.json() == whole[5:10] and len(whole) > 10
    assert page.headers["X-Total-Pages"] == str(-(-len(whole) // 5))
    lines = (await (await get(client, f"{path}&format=ndjson")).text()).splitlines()
    assert [json.loads(line) for line in lines] == whole
    assert (await get(client, f"{path}&per_page=501")).status == 400
    before = await get(client, path)
    await store.load([write_fixture(tmp_path)])
    for _ in range(30):  # the server notices the load (files or NOTIFY); allow up to 3 s
        after = await get(client, path, **{"If-None-Match": before.headers["ETag"]})
        if after.status == 200:
            break
        await asyncio.sleep(0.1)
    assert after.status == 200 and after.headers["ETag"] != before.headers["ETag"]
    assert await after.json() != whole  # the new teams and sends are there


# Both stores: the same bytes for every interval and grouping.
async def test_postgresql_answers_the_same_bytes(
    edges: sqlite3.Connection, pg_database: str, tmp_path: Path
) -> None:
    await load_pg(pg_database, [write_fixture(tmp_path)])
    pg = await asyncpg.connect(pg_database)
    try:
        compared = 0
        for interval in INTERVALS:
            for group_by in GROUPINGS:
                for lists, without_captcha in FILTERS:
                    for endpoint in ("phishing", "training"):
                        f = filters(interval, group_by, lists, without_captcha)
                        made = listing(endpoint, f)
                        mine = [r[0] for r in edges.execute(made.select(), made.select_params)]
                        theirs = await pg.fetch(sql.select(made), *made.select_params)
                        assert [r[0] for r in theirs] == mine, (endpoint, interval, group_by)
                        total = await pg.fetchval(sql.count(made), *made.params)
                        assert total == len(mine)
                        compared += len(mine)
        assert compared > 5000
    finally:
        await pg.close()


async def test_http_answers_are_the_same_bytes_on_both_stores(
    make_client: Any, pg_database: str
) -> None:
    lite = await make_client(database_url="")
    pg = await make_client(database_url=pg_database)
    window = "filter[from_date]=2025-01-01&filter[to_date]=2026-03-31"
    for path in (PHISHING, TRAINING):
        for interval in INTERVALS:
            for group_by in ("", *GROUPINGS[1:]):
                for form in ("json", "csv"):
                    url = f"{path}?{window}&interval={interval}&format={form}&per_page=500"
                    url += f"&group_by={group_by}" if group_by else ""
                    a, b = await get(lite, url), await get(pg, url)
                    assert a.status == b.status == 200
                    assert await a.read() == await b.read(), url


@pytest.mark.parametrize(
    ("automation", "verdicts"),
    [("exclude_automated", {"automated"}), ("exclude_suspected", {"automated", "suspected"})],
)
def test_filter_automation_leaves_out_events_by_their_verdict(
    edges: sqlite3.Connection, automation: str, verdicts: set[str]
) -> None:
    """Events of the left-out verdicts count nowhere (sends stay), on both groupings."""
    found = verdicts_of(data())
    left_out = {event for event, verdict in found.items() if verdict in verdicts}
    assert left_out  # the sample has such events
    for group_by in (None, "department"):
        f = filters("month", group_by)
        f = stats.StatsFilters(f.buckets, group_by, {}, False, automation)
        rows = oracle.phishing(data(), 1, list(f.buckets), group_by, {}, False, left_out)
        schema = stats_rows(PhishingStatsSchema, group_by)()
        assert texts(edges, listing("phishing", f)) == [
            compact(schema.dump(dated(r))) for r in rows
        ]


@pytest.mark.parametrize("listing_of", [stats.phishing_listing, stats.training_listing])
@pytest.mark.parametrize("group_by", [None, "department"])
async def test_a_summary_page_and_its_total_are_one_short_read(
    sample_db: Path, listing_of: Any, group_by: str | None
) -> None:
    """A stats page from the summaries reads its total with its rows, in one statement on
    the event loop's own connection: even its first request (no total known yet) needs
    no pooled connection, here all taken, and no count of its own."""
    listing = listing_of(1, filters("month", group_by))
    pool = await ReadPool.open(sample_db, 2)
    try:
        async with pool.acquire(), pool.acquire():
            page = await asyncio.wait_for(pool.page(listing, Paging(1, 5), None), 10)
    finally:
        await pool.close()
    with contextlib.closing(sqlite3.connect(sample_db)) as conn:
        every = [row[0] for row in conn.execute(listing.select(), listing.select_params)]
    assert page.total == len(every) > 5 and page.texts == every[:5]
