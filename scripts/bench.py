"""The service's benchmark: ``bench.py --db PATH`` or ``bench.py --smoke``.

Starts the real server on 127.0.0.1 (rate limit raised, access log on as users run it),
first as one process, then as two workers sharing their rate limits through a real
Redis, and with ``--postgresql`` once more serving from PostgreSQL; drives it with wrk
and prints one table (``bench_report``) with two references measured in the same run:
the ceiling (a bare aiohttp app returning a constant JSON) and, for big results, the
floor (the database alone building the same JSON array with the app's own SQL:
bench_floors). Beside each throughput stands the server's CPU time per request
(all its processes, from /proc), which means the same on a machine with more cores.
Exits 1 on any error or unexpected status, 2 when wrk is missing; a missed ratio never
fails the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_feed as feed  # noqa: E402
import bench_floors  # noqa: E402
import bench_load  # noqa: E402
import bench_neighbour  # noqa: E402
import bench_report  # noqa: E402
import bench_webhooks  # noqa: E402
import benchlib as lib  # noqa: E402
from bench_floors import Floor  # noqa: E402

from app.data import campaigns, changes, courses, employees, partners, stats  # noqa: E402
from app.data.api_keys import add_partner_company, create_key, create_partner, hash_key  # noqa: E402
from app.data.changes import ChangeFilters  # noqa: E402
from app.data.events import campaign_listing  # noqa: E402
from app.data.feed import START  # noqa: E402
from app.data.inscriptions import InscriptionFilters, inscriptions_listing  # noqa: E402
from app.data.listings import Listing  # noqa: E402
from app.data.schema import connect_writer, write_transaction  # noqa: E402
from app.tools.generator import generated_key  # noqa: E402

API = "/api/companies/v1"
PARTNERS_API = "/api/partners/v1"
BENCH_PARTNER = "bench partner"  # reads every company of the data set: the rollup's row
COMPANY = 1  # the generator gives company 1 campaign 1 (--big-campaign), 2 (--mid-campaign)
SMOKE_SIZES = ["--companies", "2", "--employees", "200", "--campaigns", "4"]
SMOKE_SIZES += ["--events-per-campaign", "100", "--big-campaign", "2000", "--mid-campaign", "500"]
SMOKE_SIZES += ["--courses", "4", "--inscriptions", "1000", "--sections", "3"]
FEED_LIMIT = 1000  # events an answer when the feed is followed from start to end
FLOOR_RUNS = 3  # measurements of each floor, around its row's runs (their median is used)


@dataclass
class Scenario:
    """One row of the table: a URL, how hard to drive it, and what to compare it with."""

    label: str
    path: str
    conns: int
    reference: str  # "floor": SQLite building the same array; "ceiling": the bare app
    target: float
    by_latency: bool = False  # compare p50 with the floor time instead of req/s with its rate
    status: int = 200
    watch_rss: bool = False  # peak RSS above idle while this row runs
    body: str = "json"  # the format of the answer, checked against the floor's array
    rss_idle: int = 0  # KiB, just before the row (watch_rss)
    rss_peak: int = 0  # KiB, the peak while it ran (VmHWM after clear_refs)
    single: bool = False  # the answer is the floor array's one object
    vary: str = ""  # a parameter that changes on every request: each one a first request
    against: Scenario | None = None  # the ratio is p50 over this row's p50 (the next request)
    cpu_s: float = 0.0  # server CPU seconds per request in the timed run (all processes)
    redis_cpu_s: float = 0.0  # and Redis's, when the limits live there
    floor: Floor | None = None  # what the database builds for the floor
    key: str = ""  # the row's own API key (the partner's), else company 1's
    floor_s: float = 0.0  # the median of floor_runs
    floor_json: str = ""
    strict_s: float = 0.0  # the same array, records joined (bench_floors.whole_array(joined=True))
    # The reference's measurements, interleaved with the server's runs: the floor's
    # seconds, or the ceiling's req/s (the ceiling's own row).
    reference_runs: list[float] = field(default_factory=list)
    strict_runs: list[float] = field(default_factory=list)
    result: lib.WrkResult | None = None
    problems: list[str] = field(default_factory=list)

    def add_floor(self, seconds: float, strict: float = 0.0) -> None:
        """One more measurement of the floor (and of the strict floor, 0 if none): the
        figures used are the medians."""
        self.reference_runs.append(seconds)
        self.floor_s = statistics.median(self.reference_runs)
        if strict:
            self.strict_runs.append(strict)
            self.strict_s = statistics.median(self.strict_runs)

    def ratio(self, ceiling_rps: float) -> float:
        """The ratio the target is about (see the module docstring)."""
        assert self.result is not None
        if self.reference == "ceiling":
            return self.result.rps / ceiling_rps
        if self.against is not None and self.against.result is not None:
            return self.result.p50_ms / self.against.result.p50_ms
        return self.floor_ratio(self.floor_s)

    def floor_ratio(self, floor_s: float) -> float:
        """p50 over the floor time, or req/s over the floor's rate."""
        assert self.result is not None
        if self.by_latency:
            return self.result.p50_ms / 1000 / floor_s
        return self.result.rps * floor_s

    def met(self, ceiling_rps: float) -> bool:
        ratio = self.ratio(ceiling_rps)
        return ratio <= self.target if self.by_latency else ratio >= self.target


def report_scenarios() -> list[Scenario]:
    """The reports of contract.md 11 and 12: each page (or report) against its floor.

    The floor is the same statement SQLite runs for the page, aggregates included; the
    target is 0.7 of its rate. The heavy ones (a page of campaigns or courses,
    one campaign) run one at a time, as (c) and (d) do: more connections would only
    queue on 2 cores. ``overdue`` counts before today's UTC date, so the floors take
    today's date as the server does. Each report that counts events runs once more
    leaving out the suspected and automated ones (``filter[automation]``), against the
    floor of that statement (courses count no events).
    """
    today = dt.datetime.now(dt.UTC).date()
    human, only_human = "exclude_suspected", "filter%5Bautomation%5D=exclude_suspected"
    offenders = employees.EmployeeFilters(min_failed=2)
    humans_offending = employees.EmployeeFilters(min_failed=2, automation=human)
    listed = campaigns.campaigns_listing(COMPANY, campaigns.CampaignFilters())
    listed_human = campaigns.campaigns_listing(COMPANY, campaigns.CampaignFilters(automation=human))
    report = campaigns.campaign_report(COMPANY, 1, without_captcha=False)
    report_human = campaigns.campaign_report(COMPANY, 1, False, human)
    directory = employees.employees_listing(COMPANY, offenders, today)
    directory_human = employees.employees_listing(COMPANY, humans_offending, today)
    coverage = courses.courses_listing(COMPANY, (), today)
    return [
        Scenario("(g) campaigns, 25 a page", f"{API}/campaigns?per_page=25", 1, "floor", 0.7,
                 floor=Floor(listed, 25)),
        Scenario(f"(g) campaigns, 25 a page, {human}", f"{API}/campaigns?per_page=25&{only_human}",
                 1, "floor", 0.7, floor=Floor(listed_human, 25)),
        Scenario("(h) employees, 25 a page, min_failed=2",
                 f"{API}/victimsapi?filter%5Bmin_failed%5D=2&per_page=25", 32, "floor", 0.7,
                 floor=Floor(directory, 25)),
        Scenario(f"(h) employees, 25 a page, min_failed=2, {human}",
                 f"{API}/victimsapi?filter%5Bmin_failed%5D=2&per_page=25&{only_human}", 32,
                 "floor", 0.7, floor=Floor(directory_human, 25)),
        Scenario("(i) campaign 1 report, by_department", f"{API}/campaigns/1", 1, "floor", 0.7,
                 floor=Floor(report, 1), single=True),
        Scenario(f"(i) campaign 1 report, by_department, {human}",
                 f"{API}/campaigns/1?{only_human}", 1, "floor", 0.7,
                 floor=Floor(report_human, 1), single=True),
        Scenario("(j) courses, 25 a page", f"{API}/courses?per_page=25", 1, "floor", 0.7,
                 floor=Floor(coverage, 25)),
    ]  # fmt: skip


def change_scenarios() -> list[Scenario]:
    """The change feeds' first answers of 100 from the start, against the same statement
    run by the database alone; the target is 0.5 of its rate."""
    everybody = ChangeFilters()
    inscribed = changes.inscription_changes(COMPANY, everybody, START)
    people = changes.employee_changes(COMPANY, everybody, START)
    return [
        Scenario("(t) inscription changes, 100 an answer",
                 f"{API}/course-inscriptions/changes?limit=100", 32, "floor", 0.5,
                 floor=Floor(inscribed, 100)),
        Scenario("(u) employee changes, 100 an answer", f"{API}/victimsapi/changes?limit=100",
                 32, "floor", 0.5, floor=Floor(people, 100)),
    ]  # fmt: skip


def first_row(conn: sqlite3.Connection, sql: str, *params: object) -> tuple[object, ...]:
    """The first row of a query (the dataset must hold what the bench needs)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise SystemExit(f"the database lacks what the benchmark needs: {sql}")
    return tuple(row)


# How the scenarios' parameters are picked from company 1's data (no comma: it would
# split the filter value in two).
INSCRIBED = "FROM inscriptions i JOIN employees e ON e.id = i.employee_id WHERE i.company_id = ?"
TOP_DEPARTMENT = f"""SELECT e.department {INSCRIBED} AND instr(e.department, ',') = 0
    GROUP BY e.department ORDER BY count(*) DESC, 1 LIMIT 1"""
TOP_COUNTRY = f"""SELECT e.country {INSCRIBED} AND e.department = ? AND instr(e.country, ',') = 0
    GROUP BY e.country ORDER BY count(*) DESC, 1 LIMIT 1"""
START_DATES = f"SELECT i.start_date {INSCRIBED} AND e.department = ? AND e.country = ? ORDER BY 1"
FEW_EVENTS = """SELECT ev.employee_id, count(*) FROM campaign_events ev JOIN employees e
    ON e.id = ev.employee_id WHERE e.company_id = ?
    GROUP BY ev.employee_id ORDER BY abs(count(*) - 5), 1 LIMIT 1"""
CAMPAIGN_SIZE = """SELECT count(*) FROM campaign_events ev JOIN campaigns c
    ON c.id = ev.campaign_id WHERE c.id = ? AND c.company_id = ?"""
FIRST_COURSE = "SELECT title FROM courses WHERE company_id = ? ORDER BY id LIMIT 1"
TOP_TEAM = """SELECT t.name FROM teams t JOIN team_members m ON m.team_id = t.id
    WHERE t.company_id = ? AND instr(t.name, ',') = 0 GROUP BY t.id ORDER BY count(*) DESC,
    t.id LIMIT 1"""
VARIED = "filter%5Bto_inscription_date%5D"  # a new day each request: a total not yet known


def first_page_scenarios(team: str, course: str, since: str) -> list[Scenario]:
    """The first request of a page of inscriptions (every request another URL: its total
    never known yet) against the next request of one URL (its total known), both at one
    connection: filtered by course and start dates, a total the training summaries hold;
    by team and start dates, one counted (the slower path)."""
    rows = []
    for name, listed, value in (
        ("courses", "course, start dates (summed)", course),
        ("teams", "team, start dates (counted)", team),
    ):
        query = {f"filter[{name}]": value, "filter[from_inscription_date]": since}
        filters = InscriptionFilters(
            lists={name: [value.casefold()]}, from_inscription_date=dt.date.fromisoformat(since)
        )
        path = f"{API}/course-inscriptions?{urlencode({**query, 'per_page': 25}, safe='[]')}"
        floor = Floor(inscriptions_listing(COMPANY, filters), 25)
        after = Scenario(f"(a) next page, {listed}", path, 1, "floor", 3.0, by_latency=True,
                         floor=floor)  # fmt: skip
        first = Scenario(f"(a) first page, {listed}", path, 1, "floor", 3.0, by_latency=True,
                         floor=floor, vary=VARIED, against=after)  # fmt: skip
        rows += [after, first]
    return rows


def make_scenarios(
    conn: sqlite3.Connection, partner: tuple[int, str] | None = None
) -> list[Scenario]:
    """The scenarios, their parameters picked from the data of company 1; ``partner``
    (its id and a key) reads every company, for the rollup (without it, no rollup row)."""
    (department,) = first_row(conn, TOP_DEPARTMENT, COMPANY)
    (country,) = first_row(conn, TOP_COUNTRY, COMPANY, department)
    dates = [row[0] for row in conn.execute(START_DATES, (COMPANY, department, country))]
    since = dates[max(0, min(len(dates) // 2, len(dates) - 100))]  # a page of 100 if it can
    employee, events = first_row(conn, FEW_EVENTS, COMPANY)
    sizes = {c: first_row(conn, CAMPAIGN_SIZE, c, COMPANY)[0] for c in (1, 2)}
    one_filter = {"filter[department]": department}
    three = {**one_filter, "filter[country]": country, "filter[from_inscription_date]": since}
    fold = {"department": [str(department).casefold()]}
    three_filters = InscriptionFilters(
        lists={**fold, "country": [str(country).casefold()]},
        from_inscription_date=dt.date.fromisoformat(since),
    )
    by_department = inscriptions_listing(COMPANY, InscriptionFilters(lists=fold))
    whole = Floor(campaign_listing(COMPANY, 1))
    by_three = inscriptions_listing(COMPANY, three_filters)
    page_a = f"{API}/course-inscriptions?{urlencode({**one_filter, 'per_page': 25}, safe='[]')}"
    by_employee = f"{API}/victimsapi/{employee}/events"
    big = f"{API}/campaigns/1/events"
    page_b = f"{API}/course-inscriptions?{urlencode({**three, 'per_page': 100}, safe='[]')}"
    return [
        Scenario("(a) inscriptions, 25 a page, 1 filter", page_a, 32, "floor", 0.9,
                 floor=Floor(by_department, 25)),
        Scenario("(b) inscriptions, 100 a page, 3 filters", page_b, 32, "floor", 0.8,
                 floor=Floor(by_three, 100)),
        *first_page_scenarios(str(first_row(conn, TOP_TEAM, COMPANY)[0]),
                              str(first_row(conn, FIRST_COURSE, COMPANY)[0]), since),
        Scenario(f"(c) campaign 2 events ({sizes[2]:,})", f"{API}/campaigns/2/events", 1,
                 "floor", 1.15, by_latency=True, floor=Floor(campaign_listing(COMPANY, 2))),
        Scenario(f"(d) campaign 1 events ({sizes[1]:,})", big, 1,
                 "floor", 1.2, by_latency=True, floor=whole, watch_rss=True),
        Scenario(f"(e) employee {employee} events ({events})", by_employee, 32, "ceiling", 0.3),
        Scenario("(f) 304 revalidation of (a)", page_a, 32, "ceiling", 0.5, status=304),
        Scenario("(k) campaign 1 events as CSV", f"{big}?format=csv", 1, "floor", 1.5,
                 by_latency=True, floor=whole, watch_rss=True, body="csv"),
        Scenario("(l) campaign 1 events as NDJSON", f"{big}?format=ndjson", 1, "floor", 1.5,
                 by_latency=True, floor=whole, watch_rss=True, body="ndjson"),
        # The key's own facts (scopes, owner): authentication and no read beyond it.
        Scenario("(s) key introspection", f"{API}/key", 32, "ceiling", 0.5),
        *report_scenarios(),
        *change_scenarios(),
        Scenario("(n) dashboard page, /dashboard/", "/dashboard/", 32, "ceiling", 0.4),
        *stats_scenarios(conn),
        *([rollup_scenario(*partner)] if partner else []),
    ]  # fmt: skip


def rollup_scenario(partner: int, key: str) -> Scenario:
    """The partner's rollup of every company (12 months of campaigns each), against its
    floor: the same statement SQLite runs (0.7 of its rate, as the reports)."""
    today = dt.datetime.now(dt.UTC).date()
    listing = partners.partner_companies_listing(partner, (), today)
    return Scenario("(r) partner rollup, every company", f"{PARTNERS_API}/companies", 1, "floor",
                    0.7, floor=Floor(listing), key=key)  # fmt: skip


def bench_partner(db: str) -> tuple[int, str]:
    """The bench's partner (made once a data set, by name) reading every company, and a
    new key of it valid for a day: written before any server starts and before the data
    set is copied into PostgreSQL."""
    conn = connect_writer(db)
    try:
        with write_transaction(conn):
            found = conn.execute("SELECT id FROM partners WHERE name = ?", (BENCH_PARTNER,))
            row = found.fetchone()
            partner = int(row[0]) if row else create_partner(conn, BENCH_PARTNER)
            for (company,) in conn.execute("SELECT id FROM companies").fetchall():
                add_partner_company(conn, partner, company)
            new = create_key(conn, None, "bench", 86400, scopes="reports:read", partner_id=partner)
    finally:
        conn.close()
    return partner, new.key


LAST_LAUNCH = "SELECT max(launch_date) FROM campaigns WHERE company_id = ?"


def stats_scenarios(conn: sqlite3.Connection) -> list[Scenario]:
    """The stats over 13 months ending with company 1's last launch, against their floors
    (0.7 of their rate, as the reports): the answer from the raw rows for (o), (p), (q),
    which read the writers' summaries; the statement the server runs for the others."""
    (last,) = first_row(conn, LAST_LAUNCH, COMPANY)
    end = dt.date.fromisoformat(str(last)[:10])
    first = stats.default_window(end)[0]
    window = stats.buckets(first, end, "month", stats.MAX_BUCKETS)
    query = f"filter%5Bfrom_date%5D={first}&filter%5Bto_date%5D={end}"

    def listing(make: Callable[..., Listing], group_by: str | None = None, **kw: Any) -> Listing:
        return make(COMPANY, stats.StatsFilters(window, group_by, **kw))

    def raw(endpoint: str, group_by: str | None = None) -> Listing:
        """The reference of (o), (p), (q): the answer computed from the raw rows, as before
        the writers kept summaries (what a server without them must do at least)."""
        return stats.raw_listing(endpoint, COMPANY, stats.StatsFilters(window, group_by))

    # The slower path (docs/data.md): a person filter, filter[with_captcha]=false.
    (department,) = first_row(conn, TOP_DEPARTMENT, COMPANY)
    person: dict[str, Any] = {"lists": {"department": [str(department).casefold()]}}
    one_person = f"{query}&{urlencode({'filter[department]': department}, safe='[]')}"
    return [
        Scenario("(o) stats/phishing, 13 months", f"{API}/stats/phishing?{query}", 1, "floor",
                 0.7, floor=Floor(raw("phishing"))),
        Scenario("(p) stats/phishing, 13 months by department",
                 f"{API}/stats/phishing?{query}&group_by=department", 1, "floor", 0.7,
                 floor=Floor(raw("phishing", "department"), 100)),
        Scenario("(q) stats/training, 13 months", f"{API}/stats/training?{query}", 1, "floor",
                 0.7, floor=Floor(raw("training"))),
        Scenario("(w) stats/phishing, 13 months, a person filter (raw rows)",
                 f"{API}/stats/phishing?{one_person}", 1, "floor", 0.7,
                 floor=Floor(listing(stats.phishing_listing, **person))),
        Scenario("(x) stats/phishing, 13 months, filter[with_captcha]=false (raw rows)",
                 f"{API}/stats/phishing?{query}&filter%5Bwith_captcha%5D=false", 1, "floor", 0.7,
                 floor=Floor(listing(stats.phishing_listing, without_captcha=True))),
        Scenario("(y) stats/training, 13 months, a person filter (raw rows)",
                 f"{API}/stats/training?{one_person}", 1, "floor", 0.7,
                 floor=Floor(listing(stats.training_listing, **person))),
    ]  # fmt: skip


@dataclass(frozen=True)
class Timing:
    """How long each part of a row runs."""

    seconds: float  # the timed wrk run
    warmup: float  # the wrk run before it, which counts every status
    floor_budget: float  # the database's timing rounds of each floor, just before its row


@dataclass
class Setup:
    """How the server runs for one half of the table, and what only it measures."""

    label: str
    workers: int  # 1: one process; more: gunicorn workers sharing their limits in Redis
    scenarios: list[Scenario]
    database_url: str = ""  # serving from PostgreSQL (its floors too), else from SQLite
    rss_start: int = 0  # KiB after start (with workers: the largest worker's)
    followed: feed.FeedFigures | None = None


def drive(
    port: int,
    s: Scenario,
    headers: dict[str, str],
    timing: Timing,
    meters: list[list[int]],
    between: Callable[[], None] = lambda: None,
) -> dict[str, str]:
    """Check one response, warm up counting every status, then the timed wrk run.

    ``meters`` are the process trees whose CPU time is read around the timed run: the
    server's first, then (if any) Redis's. ``between`` runs after the warm-up, just
    before the timed run (a measurement of the floor).
    """
    status, got, body = lib.get(port, s.path, headers)
    if status != s.status:
        s.problems.append(f"first request answered {status}, expected {s.status}")
    elif s.floor_json and s.body != "json":
        problem = feed.body_problem(s.body, body, s.floor_json)
        s.problems += [problem] if problem else []
    elif s.floor_json:
        answer = json.loads(body)
        if ([answer] if s.single else answer) != json.loads(s.floor_json):
            s.problems.append("the response body differs from the database's array (the floor)")
    url = f"http://127.0.0.1:{port}{s.path}"
    warmup = lib.run_wrk(url, headers, s.conns, timing.warmup, count_statuses=True, vary=s.vary)
    seen = warmup.statuses
    s.problems += [f"{n} responses {code}" for code, n in seen.items() if code != s.status]
    between()
    before = [lib.cpu_seconds(pids) for pids in meters]
    s.result = lib.run_wrk(url, headers, s.conns, timing.seconds, vary=s.vary)
    spent = [lib.cpu_seconds(pids) - b for pids, b in zip(meters, before, strict=True)]
    s.cpu_s, s.redis_cpu_s = [seconds / max(1, s.result.requests) for seconds in [*spent, 0.0]][:2]
    s.result.statuses = seen
    if s.result.errors or not s.result.requests:
        s.problems.append(f"timed run: {bench_report.describe_errors(s.result)}")
    return got


@dataclass
class Ceiling(Scenario):
    """The bare app's row: measured before each setup and after the last, its row the run
    of median req/s, every run's req/s kept as its spread."""

    runs: list[tuple[lib.WrkResult, float]] = field(default_factory=list)  # with CPU/req

    def measure(self, work: Path, timing: Timing) -> None:
        """One more run of the bare app, started for it and stopped after it."""
        (work / "ceiling.py").write_text(lib.CEILING_APP)
        port = lib.free_port()
        args = [sys.executable, str(work / "ceiling.py"), str(port)]
        server = lib.Process(args, port, work / "ceiling.log", ROOT)
        try:
            server.wait_ready("/")
            drive(port, self, {}, timing, [[server.pid]])
        finally:
            server.stop()
        assert self.result is not None
        self.reference_runs.append(self.result.rps)
        self.runs.append((self.result, self.cpu_s))
        by_rate = sorted(self.runs, key=lambda run: run[0].rps)
        self.result, self.cpu_s = by_rate[(len(by_rate) - 1) // 2]


def run(
    db: str,
    key: str,
    partner: tuple[int, str],
    seconds: float,
    conns: int,
    smoke: bool,
    rows: str = "",
    pg_url: str = "",
) -> tuple[str, bool]:
    """Measure everything (or the ``rows`` letters); return the report and whether the run
    was free of errors. With ``pg_url`` every scenario runs on PostgreSQL too."""
    info = lib.machine()
    timing = Timing(seconds, warmup=1 if smoke else 2, floor_budget=0.2 if smoke else 1.5)
    ceiling = Ceiling("ceiling: bare aiohttp app, constant JSON", "/", conns, "-", 0)
    setups = [Setup("1 process", 1, []), Setup("2 workers + Redis", 2, [])]
    setups += [Setup("PostgreSQL, 1 process", 1, [], pg_url)] if pg_url else []
    with sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True) as conn:
        for setup in setups:
            setup.scenarios = make_scenarios(conn, partner)
            if rows:  # (f) is (a)'s 304, so (a) comes with it
                wanted = set(rows.replace(",", "")) | ({"a"} if "f" in rows else set())
                setup.scenarios = [s for s in setup.scenarios if s.label[1] in wanted]
            for s in setup.scenarios:
                s.conns = conns if s.conns > 1 else s.conns
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        ceiling.measure(work, timing)
        measure_app(work, db, key, setups[0], timing, None)
        kept = measure_kept(work, db, key, setups[0], timing)
        for setup in setups[2:]:
            ceiling.measure(work, timing)
            measure_app(work, db, key, setup, timing, None)
            kept += measure_kept(work, db, key, setup, timing)
        redis = lib.start_redis(work)
        if redis is None:
            ceiling.problems.append("redis-server is missing: `make redis` installs it")
        else:
            try:
                ceiling.measure(work, timing)
                measure_app(work, db, key, setups[1], timing, redis)
            finally:
                redis.stop()
        ceiling.measure(work, timing)
    info["load"] += ", {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg())
    done = [setup for setup in setups if setup.followed is not None]
    report = bench_report.render(info, ceiling, done, seconds, FEED_LIMIT, kept)
    problems = [p for s in [ceiling, *(s for u in setups for s in u.scenarios)] for p in s.problems]
    problems += [p for _, _, s in kept for p in s.problems]
    problems += [p for u in done if u.followed for p in u.followed.run.problems]
    return report, not problems


def measure_app(
    work: Path, db: str, key: str, setup: Setup, timing: Timing, redis: lib.Process | None
) -> None:
    """Run every scenario, then follow the feed; keep the figures in ``setup``.

    Each floor is timed FLOOR_RUNS times while the server idles, interleaved with its
    row's runs (before the warm-up, before the timed run, after it), so that the two sides
    of a ratio see the machine in the same state; the ratio takes their median. With
    several workers the RSS figures are the largest worker's.
    """
    port = lib.free_port()
    args = [*lib.server_args(db, port), "--workers", str(setup.workers)]
    if redis is not None:
        args += ["--redis-url", f"redis://127.0.0.1:{redis.port}/0"]
    if setup.database_url:
        args += ["--database-url", setup.database_url]
    log = work / f"server-{setup.workers}{'-pg' if setup.database_url else ''}.log"
    server = lib.Process(args, port, log, ROOT)
    floors = bench_floors.open_floors(db, setup.database_url)
    headers = {"X-API-KEY": key}
    try:
        server.wait_ready("/readyz")
        tree = lib.wait_for_children(server.pid, setup.workers if setup.workers > 1 else 0)
        serving = tree[1:] or tree  # the workers, or the one process

        def largest(field: str) -> int:
            return max(lib.proc_status_kib(pid, field) for pid in serving)

        meters = [tree] + ([[redis.pid]] if redis is not None else [])
        setup.rss_start = largest("VmRSS")
        etag = ""
        for s in setup.scenarios:
            floor = functools.partial(floors.measure, s, timing.floor_budget / FLOOR_RUNS)
            floor()
            extra = {"If-None-Match": etag} if s.status == 304 else {}
            if s.watch_rss:
                s.rss_idle = largest("VmRSS")
                for pid in serving:
                    lib.reset_peak_rss(pid)
            own = {"X-API-KEY": s.key} if s.key else {}
            got = drive(port, s, {**headers, **own, **extra}, timing, meters, between=floor)
            if s.watch_rss:
                s.rss_peak = largest("VmHWM")
            floor()
            etag = etag or got.get("etag", "")
        setup.followed = feed.measure(port, key, floors, COMPANY, FEED_LIMIT)
    finally:
        floors.close()
        server.stop()


# The rows asked again of a server that keeps its answers (the default), where each
# repeat is sent from memory; and (e), whose label names its employee.
KEPT_ROWS = (
    "(a) inscriptions, 25 a page, 1 filter", "(g) campaigns, 25 a page",
    "(i) campaign 1 report, by_department",
)  # fmt: skip


def measure_kept(
    work: Path, db: str, key: str, viewed: Setup, timing: Timing
) -> list[tuple[str, Scenario, Scenario]]:
    """KEPT_ROWS once more, one process keeping its answers on the store of ``viewed``:
    each beside the same row there (every request ran its view), whose reference it is
    compared with; with the setup's label."""
    pairs = [
        (s, dataclasses.replace(s, problems=[], result=None))
        for s in viewed.scenarios
        if s.label in KEPT_ROWS or s.label.startswith("(e) ")
    ]
    if not pairs:
        return []
    port = lib.free_port()
    args = lib.server_args(db, port, keep_answers=True)
    args += ["--database-url", viewed.database_url] if viewed.database_url else []
    log = work / f"server-kept{'-pg' if viewed.database_url else ''}.log"
    server = lib.Process(args, port, log, ROOT)
    try:
        server.wait_ready("/readyz")
        for _, s in pairs:
            drive(port, s, {"X-API-KEY": key}, timing, [[server.pid]])
    finally:
        server.stop()
    return [(viewed.label, view, s) for view, s in pairs]


def smoke_dataset(directory: Path, seed: int) -> str:
    """A tiny dataset made by the generator, for the CI smoke run."""
    db = directory / "smoke.sqlite3"
    command = [sys.executable, str(ROOT / "scripts" / "generate_fixtures.py"), "--db", str(db)]
    subprocess.run([*command, *SMOKE_SIZES, "--seed", str(seed), "--no-progress"],
                   check=True, timeout=120, stdout=subprocess.DEVNULL)  # fmt: skip
    return str(db)


def company_key(db: str, seed: int, company: int = COMPANY) -> str:
    """A company's key as the generator derives it from the seed; in a database generated
    before the generator's keys were renamed (``rk_bench_``), the key it was given then."""
    key = generated_key(company, seed)
    with sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True) as conn:
        if conn.execute("SELECT 1 FROM api_keys WHERE key_hash = ?", (hash_key(key),)).fetchone():
            return key
    digest = hashlib.sha256(f"bench:{company}:{seed}".encode()).hexdigest()[:16]
    return f"rk_bench_{company}_{seed}_{digest}"


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run the benchmark, print (and keep) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--db", help="a database made by scripts/generate_fixtures.py")
    mode.add_argument("--smoke", action="store_true", help="a tiny generated set, ~1 s a row")
    parser.add_argument("--seed", type=int, default=1, help="the seed the database was made with")
    parser.add_argument("--key", help="company 1's API key (default: the generator's)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per timed run")
    parser.add_argument("--connections", type=int, default=32, help="for the throughput rows")
    parser.add_argument("--rows", default="", help="only these rows, by letter (e.g. g,h,i,j)")
    parser.add_argument(
        "--postgresql",
        metavar="URL",
        default="",
        help="also run every scenario on PostgreSQL: an empty database's URL (the data set is"
        " copied into it), or 'auto' for a throwaway cluster (needs PostgreSQL installed)",
    )
    args = parser.parse_args(argv)
    # SIGTERM (timeout, CI cancel) becomes SystemExit, so the finally blocks stop the servers.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if not lib.require_wrk():
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-smoke-") as tmp:
        db = smoke_dataset(Path(tmp), args.seed) if args.smoke else args.db
        if args.key is None:
            args.key = company_key(db, args.seed)
        partner = bench_partner(db)
        seconds = 1.0 if args.smoke else args.duration
        with bench_floors.postgresql(args.postgresql, db) as pg_url:
            report, clean = run(
                db, args.key, partner, seconds, args.connections, args.smoke, args.rows, pg_url
            )
        if not args.rows:  # a few rows leave the load and neighbour benchmarks out
            keys = {c: company_key(db, args.seed, c) for c in (1, 2)}
            lines = bench_neighbour.report(db, keys, Path(tmp), ROOT, seconds, not args.smoke)
            lines += bench_load.report(db, args.seed, Path(tmp))
            lines += bench_webhooks.report(db, Path(tmp))
            report += "\n".join(lines) + "\n"
    from bench_page import keep  # a full run without errors: the docs page's table too

    keep(ROOT, report, name="bench", smoke=args.smoke, rows=args.rows, clean=clean)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
