"""Contract.md 15: every answer from PostgreSQL is byte-identical to SQLite's.

Every listing runs on both stores over the same fixtures (the sample, plus records
made to be awkward: escapes, non-ASCII, code-point order of names, null and
fractional values, several employees with one timestamp), and the record bytes must
be equal, as must the database-built whole array (the benchmark floor) and counts.
The reports (contract.md 11, 12) run with every filter over figures made to be
awkward too (support/identity.py): rates such as 1/3, 2/3, 1/800, 1.0 and 0, ties in
medians and means, null figures, titles that fold alike ("Straße", "STRASSE") and
overdue on fixed dates.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from bench_floors import pg_whole_array

from app.data import campaigns, changes, courses, employees, events, inscriptions
from app.data.feed import START
from app.data.listings import Listing, Record
from app.data.pg import sql
from app.data.vocabulary import AUTOMATION_FILTERS
from app.tools.loader import SAMPLE_FIXTURE
from app.tools.pg_loader import load_pg, sqlite_decimal

from .support import reports as oracle
from .support.factories import DATA_TABLES, by_id, sample
from .support.identity import CAMPAIGNS as REPORT_CAMPAIGNS
from .support.identity import COURSES, CROWD, DAYS, REPORT_PATHS, report_fixture, report_listings
from .support.stores import Store, fetch_all, fresh_database

AWKWARD_NAMES = [
    'Zoë "Q" O\'Neil',
    "back\\slash",
    "tab\there",
    "line\nbreak",
    "bell\x07",
    "Ünïcødé ✓",
]
TABLES = (*DATA_TABLES, "campaign_targets")
REPORT_COURSES = [course for course, *_ in COURSES]
RESULTS = [0.0, 100.0, 33.33, 12.3456789012345678, 0.1 + 0.2, 99.5, 7.0, 0.0001]


# The requests whose answers must be the same bytes from either store.
HTTP_PATHS = [
    "/api/companies/v1/campaigns/1/events",
    "/api/companies/v1/campaigns/1/events?filter[type]=open,click&per_page=7&page=2",
    "/api/companies/v1/victimsapi/7/events",
    "/api/companies/v1/course-inscriptions?per_page=500",
    "/api/companies/v1/course-inscriptions?filter[department]=finance&per_page=3&page=2",
    "/api/companies/v1/campaigns/3/events",
    "/api/companies/v1/campaigns/1/events?format=csv",  # the exports' ids (campaign...)
    "/api/companies/v1/victimsapi/7/events?format=csv&per_page=5",
    "/api/companies/v1/course-inscriptions?per_page=500&format=csv",
    "/api/companies/v1/course-inscriptions/changes?limit=1000&format=csv",
    "/api/companies/v1/course-inscriptions/changes?limit=1000&format=ndjson",
    "/api/companies/v1/victimsapi/changes?limit=1000&format=csv",
    *REPORT_PATHS,
]

# The stats too, by month and by quarter and team.
STATS_PATHS = [
    f"/api/companies/v1/stats/{kind}?interval={interval}&filter[from_date]=2025-01-01"
    f"&filter[to_date]=2025-12-31{grouping}"
    for kind in ("phishing", "training")
    for interval, grouping in (("month", ""), ("quarter", "&group_by=team"))
]
# Backslashes in the schema's checks and the statements mean what they say only with
# standard-conforming strings (the loader refused every instant without them).
NON_STANDARD_STRINGS = ["standard_conforming_strings = off"]
EVERY_OUTPUT_SETTING = [
    *NON_STANDARD_STRINGS,
    "extra_float_digits = 0",
    "DateStyle = 'SQL, DMY'",
    "IntervalStyle = 'postgres_verbose'",
    "TimeZone = 'Pacific/Kiritimati'",
    "bytea_output = 'escape'",
    "default_transaction_isolation = 'serializable'",
]


def awkward_fixture(path: Path) -> None:
    """Company 1 records whose JSON is easy to get subtly wrong."""
    employees = [
        {
            "id": 9000 + i,
            "company_id": 1,
            "first_name": name,
            "last_name": name[::-1],
            "email": f"odd{i}@example.com",
            "department": name,
            "country": "Åland",
        }
        for i, name in enumerate(AWKWARD_NAMES)
    ]
    teams = [
        {"id": 900 + i, "company_id": 1, "name": name}
        for i, name in enumerate(["beta", "Beta", "alpha", "Älpha", "Zulu"])
    ]
    members = [{"employee_id": e["id"], "team_id": t["id"]} for e in employees for t in teams]
    events_ = [
        {
            "id": 800000 + i,
            "campaign_id": 1,
            "employee_id": employees[i % len(employees)]["id"],
            "type": "click",
            "timestamp": "2025-03-03T03:03:03Z",
            "with_captcha": i % 2 == 0,
        }
        for i in range(12)
    ]
    course = {"id": 900, "company_id": 1, "title": 'Ünïcødé "quoted" course'}
    sections = [
        {"id": 9000 + i, "course_id": 900, "title": f"part {i} ✓", "section_type": "quiz",
         "position": 10 - i}
        for i in range(len(RESULTS))
    ]  # fmt: skip
    inscriptions_ = [
        {"id": 90000 + i, "employee_id": e["id"], "course_id": 900, "start_date": "2025-02-02",
         "due_date": None if i % 2 else "2025-12-31", "status": "in_progress"}
        for i, e in enumerate(employees)
    ]  # fmt: skip
    results = [
        {"inscription_id": 90000, "section_id": s["id"], "completed_at": "2025-03-01",
         "result": r, "status": "APPROVED"}
        for s, r in zip(sections, RESULTS, strict=True)
    ]  # fmt: skip
    document = {
        "employees": employees,
        "teams": teams,
        "team_members": members,
        "campaign_events": events_,
        "courses": [course],
        "course_sections": sections,
        "inscriptions": inscriptions_,
        "section_results": results,
    }
    path.write_text(json.dumps(document), encoding="utf-8")


def every_listing() -> list[Listing]:
    """Each listing of the three endpoints, for every campaign and employee, filtered too."""
    listings: list[Listing] = []
    for campaign in by_id("campaigns"):
        company = by_id("campaigns")[campaign]["company_id"]
        listings.append(events.campaign_listing(company, campaign))
        listings.append(events.campaign_listing(company, campaign, ("open", "fail"), True))
        for automation in AUTOMATION_FILTERS[1:]:
            listings.append(events.campaign_listing(company, campaign, (), False, automation))
    for employee in [*by_id("employees"), 9000, 9001]:
        company = by_id("employees").get(employee, {"company_id": 1})["company_id"]
        listings.append(events.employee_listing(company, employee))
        listings.append(events.employee_listing(company, employee, "exclude_suspected"))
    for company in (1, 2):
        for filters in (
            inscriptions.InscriptionFilters(),
            inscriptions.InscriptionFilters(lists={"teams": ["beta", "blue team"]}),
            inscriptions.InscriptionFilters(lists={"country": ["åland", "spain"]}),
        ):
            listings.append(inscriptions.inscriptions_listing(company, filters))
            people = changes.ChangeFilters.of(filters.lists)
            listings.append(changes.inscription_changes(company, people, START))
            listings.append(changes.employee_changes(company, people, START))
    return [*listings, *report_listings()]


@pytest.fixture
async def both(store: Store, pg_database: str, tmp_path: Path) -> tuple[Path, str]:
    """The sample plus the awkward records, loaded into a SQLite file and PostgreSQL."""
    extra, reports = tmp_path / "awkward.json", tmp_path / "reports.json"
    awkward_fixture(extra)
    report_fixture(reports)
    await store.load([extra, reports])
    await load_pg(pg_database, [extra, reports])
    return store.sqlite_path, pg_database


async def test_every_listing_answers_the_same_bytes(both: tuple[Path, str]) -> None:
    db, url = both
    lite = sqlite3.connect(db)
    pg = await asyncpg.connect(url)
    try:
        checked = 0
        for listing in every_listing():
            params = listing.select_params
            expected = [row[0] for row in lite.execute(listing.select(), params)]
            got = [row[0] for row in await pg.fetch(sql.select(listing), *params)]
            assert got == expected, (listing.rows_from, listing.params)
            count = await pg.fetchval(sql.count(listing), *listing.count_params)
            assert count == lite.execute(listing.count(), listing.count_params).fetchone()[0]
            floor = await pg.fetchval(pg_whole_array(listing), *params)
            assert floor.encode() == b"[" + b",".join(expected) + b"]"
            checked += len(expected)
        assert checked > 3000  # the listings above really hold records
    finally:
        lite.close()
        await pg.close()


async def test_an_export_joins_each_events_campaign_and_employee_once(
    both: tuple[Path, str],
) -> None:
    """PostgreSQL runs a subquery in the SELECT list as a plan of its own for every row:
    the exports of a campaign's and an employee's events join both rows instead, so no
    table is read inside such a subplan (building a record's JSON is one without any)."""
    _, url = both
    pg = await asyncpg.connect(url)
    try:
        for listing in (events.campaign_listing(1, 1), events.employee_listing(1, 1)):
            for exported in (listing.exported(), listing.csv_lines()):
                assert exported is not None
                steps = await pg.fetch(f"EXPLAIN {sql.select(exported)}", *exported.select_params)
                lines = [step[0] for step in steps]
                assert not tables_read_in_subplans(lines), lines
    finally:
        await pg.close()


def tables_read_in_subplans(plan: list[str]) -> list[str]:
    """The steps of an EXPLAIN that scan a table within a SubPlan (by indentation)."""
    found, subplan_depth = [], None
    for line in plan:
        depth = len(line) - len(line.lstrip())
        if subplan_depth is not None and depth <= subplan_depth:
            subplan_depth = None
        if "SubPlan" in line and subplan_depth is None:
            subplan_depth = depth
        elif subplan_depth is not None and "Scan" in line and " on " in line:
            found.append(line)
    return found


async def test_the_awkward_records_are_there(both: tuple[Path, str]) -> None:
    """The awkward fixture reached the answers compared above (not filtered away)."""
    _, url = both
    pg = await asyncpg.connect(url)
    try:
        listing = inscriptions.inscriptions_listing(1, inscriptions.InscriptionFilters())
        texts = [json.loads(r[0]) for r in await pg.fetch(sql.select(listing), *listing.params)]
    finally:
        await pg.close()
    odd = [t for t in texts if t["victim_country"] == "Åland"]
    assert len(odd) == len(AWKWARD_NAMES)
    assert odd[0]["groups"] == [{"name": n} for n in ["Beta", "Zulu", "alpha", "beta", "Älpha"]]
    assert [s["result"] for s in odd[0]["events"]] == [
        float(sqlite_decimal(r)) for r in RESULTS[::-1]
    ]


async def test_the_awkward_report_figures_are_the_oracles(pg_database: str, tmp_path: Path) -> None:
    """PostgreSQL's reports over the awkward figures are the oracle's (so the comparison
    above compares them, and they are right): rates, ties, nulls, overdue on both days."""
    document = report_fixture(tmp_path / "reports.json")
    await load_pg(pg_database, [tmp_path / "reports.json"])
    data = {table: [*sample().get(table, []), *document.get(table, [])] for table in TABLES}
    pg = await asyncpg.connect(pg_database)

    async def records(listing: Listing) -> list[Any]:
        rows = await pg.fetch(sql.select(listing), *listing.select_params)
        return [json.loads(row[0]) for row in rows]

    rates: set[float | None] = set()
    try:
        for campaign, *_ in REPORT_CAMPAIGNS:
            for without in (False, True):
                [got] = await records(campaigns.campaign_report(1, campaign, without))
                assert got == oracle.campaign_report(data, campaign, without)
                rates |= {got[f"{kind}_rate"] for kind in oracle.TYPES}
        for day in DAYS:
            listed = await records(courses.courses_listing(1, [], day))
            assert [c for c in listed if c["id"] in REPORT_COURSES] == [
                oracle.course(data, course, day) for course in REPORT_COURSES
            ]
            for person in CROWD[:7]:
                [got] = await records(employees.employee_report(1, person, day))
                assert got == oracle.employee(data, person, day)
    finally:
        await pg.close()
    assert {0.0013, 0.3333, 0.6667, 1.0, 0.0, None} <= rates


def test_results_keep_sqlite_s_digits() -> None:
    lite = sqlite3.connect(":memory:")
    for value in RESULTS:
        printed = lite.execute("SELECT json_object('r', ?)", (value,)).fetchone()[0]
        assert printed == f'{{"r":{sqlite_decimal(value)}}}'


async def test_http_answers_are_the_same_bytes(make_client: Any, both: tuple[Path, str]) -> None:
    """Through the server: the same requests, the same bodies from either store."""
    lite = await make_client(database_url="")  # the store's SQLite file, which `both` fed
    pg = await make_client(database_url=both[1])
    headers = {"X-API-KEY": sample()["api_keys"][0]["key"], "Accept-Encoding": "identity"}
    headers["X-Request-ID"] = "same-request"
    statuses = []
    for path in HTTP_PATHS:
        a, b = await asyncio.gather(lite.get(path, headers=headers), pg.get(path, headers=headers))
        assert (a.status, await a.read()) == (b.status, await b.read()), path
        # A feed's Link holds a cursor, which each store signs with its own secret.
        for name in ("X-Total-Count", "X-Total-Pages", *(() if "changes" in path else ("Link",))):
            assert a.headers.get(name) == b.headers.get(name), (path, name)
        statuses.append(a.status)
    assert statuses.count(200) == len(HTTP_PATHS) - 2  # two ask for company 2's campaign 3


async def walk_feed(
    client: Any, headers: dict[str, str], query: str, feed: str = "events"
) -> list[Any]:
    """Every record of the feed (contract.md 13), following X-Next-Cursor to its end."""
    records: list[Any] = []
    url = f"/api/companies/v1/{feed}?{query}"
    while True:
        response = await client.get(url, headers=headers)
        assert response.status == 200, await response.text()
        page = await response.json()
        if not page:
            return records
        records += page
        url = f"/api/companies/v1/{feed}?{query}&cursor={response.headers['X-Next-Cursor']}"


@pytest.mark.parametrize(
    "query",
    [
        "limit=7",
        "limit=1000",
        "limit=5&filter[type]=click,report&filter[with_captcha]=false",
        "limit=9&filter[automation]=exclude_automated",
        "limit=1000&filter[automation]=exclude_suspected&filter[type]=click",
    ],
)
async def test_the_event_feed_is_the_same_on_both_stores(
    make_client: Any, pg_database: str, query: str
) -> None:
    """The feed's records and their order (change sequence, then id) from either store;
    each store signs its cursors with its own secret, so the walks are compared."""
    lite = await make_client(database_url="")
    pg = await make_client(database_url=pg_database)
    headers = {"X-API-KEY": sample()["api_keys"][0]["key"]}
    on_sqlite = await walk_feed(lite, headers, query)
    assert on_sqlite
    assert await walk_feed(pg, headers, query) == on_sqlite


def test_every_record_json_has_a_postgresql_counterpart() -> None:
    """A listing added for SQLite (a :class:`Record` of app/data) must be ported too."""
    import importlib
    import pkgutil

    import app.data
    from app.data.pg.records import RECORDS

    missing, seen = [], []
    for info in pkgutil.iter_modules(app.data.__path__):
        module = importlib.import_module(f"app.data.{info.name}")
        for name, value in vars(module).items():
            found = value.values() if isinstance(value, dict) else [value]
            for record in (r for r in found if isinstance(r, Record)):
                seen.append(record.name)
                if record.name not in RECORDS:
                    missing.append(f"app.data.{info.name}.{name}: {record.name}")
    assert len(seen) >= 10  # the events, feed, inscriptions, reports (4 campaign variants)
    assert not missing, f"no PostgreSQL JSON (app/data/pg/records.py) for {missing}"


def test_a_record_without_postgresql_json_is_refused() -> None:
    """A listing whose JSON has no counterpart is NotPorted (a 501), never guessed at."""
    record = Record("meta_key", "json_object('key', key)")
    listing = Listing(record, "FROM meta", "FROM meta", "key", ())
    with pytest.raises(sql.NotPorted):
        sql.one_statement(listing, True, "LIMIT ?")


@pytest.mark.parametrize("feed", ["course-inscriptions/changes", "victimsapi/changes"])
@pytest.mark.parametrize("query", ["limit=7", "limit=3&filter[department]=finance,it"])
async def test_the_change_feeds_are_the_same_on_both_stores(
    make_client: Any, pg_database: str, feed: str, query: str
) -> None:
    """The change feeds' records and order from either store, walked as the event feed."""
    lite = await make_client(database_url="")
    pg = await make_client(database_url=pg_database)
    headers = {"X-API-KEY": sample()["api_keys"][0]["key"]}
    on_sqlite = await walk_feed(lite, headers, query, feed)
    assert on_sqlite
    assert await walk_feed(pg, headers, query, feed) == on_sqlite


BIGGEST = 2**53 - 1  # the largest id the fixture format allows (docs/data.md)


def biggest_company_fixture(path: Path) -> str:
    """A company whose id (and its records') is 2^53-1, past PostgreSQL's INTEGER; its key."""
    key = "rk_test_biggest_company_0123456789"
    person = {"id": BIGGEST, "company_id": BIGGEST, "first_name": "Max", "last_name": "Id",
              "email": "max@biggest.example", "department": "Ops", "country": "Chile"}  # fmt: skip
    document = {
        "companies": [{"id": BIGGEST, "name": "Biggest"}],
        "api_keys": [{"company_id": BIGGEST, "label": "test", "key": key}],
        "employees": [person],
        "teams": [{"id": BIGGEST, "company_id": BIGGEST, "name": "Blue"}],
        "team_members": [{"team_id": BIGGEST, "employee_id": BIGGEST}],
        "campaigns": [{"id": BIGGEST, "company_id": BIGGEST, "title": "T",
                       "launch_date": "2025-03-03T09:00:00Z"}],
        "campaign_events": [{"id": BIGGEST, "campaign_id": BIGGEST, "employee_id": BIGGEST,
                             "type": "click", "timestamp": "2025-03-03T10:00:00Z",
                             "with_captcha": False}],
        "courses": [{"id": BIGGEST, "company_id": BIGGEST, "title": "C"}],
        "inscriptions": [{"id": BIGGEST, "employee_id": BIGGEST, "course_id": BIGGEST,
                          "start_date": "2025-03-03", "due_date": "2025-04-01",
                          "status": "completed"}],
    }  # fmt: skip
    path.write_text(json.dumps(document), encoding="utf-8")
    return key


async def test_the_stats_of_a_company_numbered_2_to_the_53_minus_1(
    make_client: Any, store: Store, pg_database: str, tmp_path: Path
) -> None:
    """The stats' summaries took the company id as a 32-bit INTEGER: PostgreSQL could not
    send 2^53-1 and answered 500 where SQLite answered the grid."""
    key = biggest_company_fixture(tmp_path / "biggest.json")
    await store.load([tmp_path / "biggest.json"])
    await load_pg(pg_database, [tmp_path / "biggest.json"])
    lite = await make_client(database_url="")
    pg = await make_client(database_url=pg_database)
    headers = {"X-API-KEY": key, "Accept-Encoding": "identity"}
    window = "filter[from_date]=2025-01-01&filter[to_date]=2025-12-31"
    for stats in ("phishing", "training"):
        for grouping in ("", "&group_by=team"):
            path = f"/api/companies/v1/stats/{stats}?interval=quarter&{window}{grouping}"
            a, b = await asyncio.gather(
                lite.get(path, headers=headers), pg.get(path, headers=headers)
            )
            assert (a.status, b.status) == (200, 200), (path, await b.text())
            body = await a.read()
            assert body == await b.read(), path
            counted = "campaigns" if stats == "phishing" else "due"
            assert sum(row[counted] for row in json.loads(body)) == 1


@pytest.fixture
def empty_database(pg_url: str) -> Iterator[str]:
    yield from fresh_database(pg_url, "template0")


@pytest.mark.parametrize(
    "settings", [NON_STANDARD_STRINGS, EVERY_OUTPUT_SETTING], ids=["strings", "every"]
)
async def test_the_answers_hold_under_a_database_s_own_defaults(
    settings: list[str],
    store: Store,
    pg_url: str,
    empty_database: str,
    make_client: Any,
    tmp_path: Path,
) -> None:
    """Defaults a database administrator may set on the database (or a role, or in
    postgresql.conf) apply to every session that does not ask otherwise: the loader and
    the server work on such a database as on a default one, with the same answers
    (docs/operations.md, session settings). With ``standard_conforming_strings = off``
    the loader made the schema's checks refuse every instant."""
    extra, reports = tmp_path / "awkward.json", tmp_path / "reports.json"
    awkward_fixture(extra)
    report_fixture(reports)
    await store.load([extra, reports])
    name = empty_database.rsplit("/", 1)[1]
    for setting in settings:
        await fetch_all(pg_url, f"ALTER DATABASE {name} SET {setting}")
    await load_pg(empty_database, [SAMPLE_FIXTURE, extra, reports])

    lite = await make_client(database_url="")
    pg = await make_client(database_url=empty_database)
    headers = {"X-API-KEY": sample()["api_keys"][0]["key"], "Accept-Encoding": "identity"}
    headers["X-Request-ID"] = "same-request"
    statuses = []
    for path in [*HTTP_PATHS, *STATS_PATHS]:
        a, b = await asyncio.gather(lite.get(path, headers=headers), pg.get(path, headers=headers))
        assert (a.status, await a.read()) == (b.status, await b.read()), path
        statuses.append(a.status)
    assert statuses.count(200) == len(statuses) - 2  # two ask for company 2's campaign 3
