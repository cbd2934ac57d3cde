"""Synthetic datasets of any size, written straight into the database (contract.md 9).

Same schema, constraints and tenancy triggers as the loader, one transaction, and the
same seed always gives the same table contents. Into an empty database, or (``append``)
after the data a database holds: the new companies and every id start where it ends.
The API keys are derived from the seed (see :func:`generated_key`) so a client can
authenticate: never serve generated data.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import random
import sqlite3
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from itertools import islice
from pathlib import Path
from typing import Any

from ..config import OneLineParser
from ..data import api_keys as apikeys
from ..data.automation import classify, rules_from_env
from ..data.fields import MAX_SAFE_ID
from ..data.schema import (
    DERIVE_COMPLETED_AT,
    bump_data_version,
    connect_writer,
    ensure_schema,
    into_new_file,
    write_transaction,
)
from ..data.stats_summary import Touched
from ..data.stats_summary import refresh as refresh_stats
from ..data.summaries import EVERY_SEND
from ..data.summaries import refresh as refresh_reports
from .cli import ToolError, add_store_arguments, command, plural
from .fixture_format import TABLES as FIXTURE_TABLES
from .generator_words import (
    CAMPAIGNS,
    COMPANIES,
    COUNTRIES,
    COURSES,
    DEPARTMENTS,
    FIRST,
    LAST,
    NETWORKS,
    SCANNER_AGENTS_SEEN,
    SECTION_TITLES,
    TEAM_WORDS,
    USER_AGENTS,
)
from .load_progress import Meter
from .pg_copy import copy_to_pg

DATA_TABLES = tuple(FIXTURE_TABLES)  # every data table, parents first
BASE = dt.date(2024, 1, 1)  # fixed, so the data never depends on the day it is made
BASE_EPOCH = 1_704_067_200  # BASE at midnight UTC
EVENT_DRAWS = ("open",) * 9 + ("click",) * 5 + ("report",) * 3 + ("fail",) * 3
STATUSES = ("not_started",) * 4 + ("in_progress",) * 7 + ("completed",) * 9
EVENT_SPREAD = 21 * 86_400  # events come within three weeks of the launch
SENT_TO = (0.4, 0.8)  # a campaign goes to 40% to 80% of its company's employees
# Robots among the events: the share of opens and clicks a gateway's scanner makes seconds
# after sending (automated), and of clicks that come as a burst of four in 2 s (suspected).
SCANNED, BURSTS = 0.03, 0.01
CHUNK = 20_000  # rows per executemany call
DAYS = 2 * 365 + 100  # the dates the data takes, and 4 more per section (see write)
# The most sections a course can have: each may take 4 days, and dates end in the year 9999.
MAX_SECTIONS = ((dt.date.max - BASE).days + 1 - DAYS) // 4


@dataclass(frozen=True)
class Sizes:
    """What to generate: totals across companies, split evenly between them."""

    companies: int
    employees: int
    campaigns: int
    events_per_campaign: int
    courses: int
    inscriptions: int
    sections: int = 5
    big_campaign: int = 0  # events of campaign 1 (company 1) when > 0
    mid_campaign: int = 0  # events of campaign 2 (company 1) when > 0

    def scaled(self, factor: int) -> Sizes:
        """The same set ``factor`` times larger in people, events (so targets, which follow
        people) and inscriptions; campaigns, courses and sections stay as they are."""
        if factor < 1:
            raise GenerateError("--scale is a whole factor of at least 1")
        return replace(
            self,
            employees=self.employees * factor,
            events_per_campaign=self.events_per_campaign * factor,
            inscriptions=self.inscriptions * factor,
            big_campaign=self.big_campaign * factor,
            mid_campaign=self.mid_campaign * factor,
        )


@dataclass(frozen=True)
class Company:
    """One company's share: consecutive id ranges of each owned table."""

    id: int
    name: str
    domain: str
    employees: range
    teams: range
    campaigns: range
    courses: range
    inscriptions: int


@dataclass(frozen=True)
class Origin:
    """Where a database's data ends: the highest id of each table the generator numbers,
    and the change sequence (all 0 for an empty database)."""

    companies: int = 0
    employees: int = 0
    teams: int = 0
    campaigns: int = 0
    courses: int = 0
    course_sections: int = 0
    inscriptions: int = 0
    change_seq: int = 0


ORIGIN_TABLES = tuple(f.name for f in fields(Origin) if f.name != "change_seq")  # id tables


def origin_of(conn: sqlite3.Connection) -> Origin:
    """The database's :class:`Origin`, read inside the write transaction."""
    found = {
        t: conn.execute(f"SELECT coalesce(max(id), 0) FROM {t}").fetchone()[0]
        for t in ORIGIN_TABLES
    }
    seq = conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()
    return Origin(**found, change_seq=int(seq[0]) if seq else 0)


class GenerateError(ToolError):
    """The sizes are impossible or the database already holds data."""


def generated_key(company_id: int, seed: int) -> str:
    """The API key the generator gives a company: whoever knows the seed can authenticate."""
    digest = hashlib.sha256(f"generated:{company_id}:{seed}".encode()).hexdigest()[:16]
    return f"rk_gen_{company_id}_{seed}_{digest}"


def split(total: int, parts: int) -> list[int]:
    """Share ``total`` between ``parts`` as evenly as possible, the first ones larger."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def plan(sizes: Sizes, origin: Origin = Origin()) -> list[Company]:
    """Give each company its id ranges, after ``origin``; raise GenerateError for
    impossible sizes."""
    counts = [sizes.companies, sizes.employees, sizes.campaigns, sizes.events_per_campaign]
    counts += [sizes.courses, sizes.inscriptions, sizes.sections]
    if sizes.companies < 1 or min([*counts, sizes.big_campaign, sizes.mid_campaign]) < 0:
        raise GenerateError("at least one company, and no negative size")
    if sizes.employees < sizes.companies:
        raise GenerateError("every company needs an employee: --employees >= --companies")
    if sizes.inscriptions and sizes.courses < sizes.companies:
        raise GenerateError("inscriptions need a course in every company: --courses >= --companies")
    if sizes.sections > MAX_SECTIONS:
        raise GenerateError(f"--sections is at most {MAX_SECTIONS:,}: dates end in the year 9999")
    refuse_unsafe_sizes(sizes, origin)
    first_campaigns = split(sizes.campaigns, sizes.companies)[0]
    if (sizes.big_campaign and first_campaigns < 1) or (sizes.mid_campaign and first_campaigns < 2):
        raise GenerateError("company 1 has too few campaigns for --big-campaign/--mid-campaign")
    companies = []
    starts = [origin.employees + 1, origin.teams + 1, origin.campaigns + 1, origin.courses + 1]
    shares = zip(*(split(n, sizes.companies) for n in counts[1:3] + counts[4:6]), strict=True)
    for i, (employees, campaigns, courses, inscriptions) in enumerate(shares):
        teams = max(1, employees // 50)
        ranges = []
        for k, n in enumerate((employees, teams, campaigns, courses)):
            ranges.append(range(starts[k], starts[k] + n))
            starts[k] += n
        n = origin.companies + i  # the company's place among all companies, from 0
        name = COMPANIES[n % len(COMPANIES)] + (f" {n + 1}" if n >= len(COMPANIES) else "")
        domain = f"{slug(name.split()[0])}{n + 1 if n >= len(COMPANIES) else ''}.example"
        employee_ids, team_ids, campaign_ids, course_ids = ranges
        companies.append(
            Company(
                n + 1, name, domain, employee_ids, team_ids, campaign_ids, course_ids, inscriptions
            )
        )
    return companies


def refuse_unsafe_sizes(sizes: Sizes, origin: Origin) -> None:
    """Refuse, before writing, sizes whose ids would pass 2^53-1: :func:`refuse_unsafe_ids`
    would refuse them only once every row was written (or the disk was full)."""
    events = sizes.campaigns * sizes.events_per_campaign + sizes.big_campaign + sizes.mid_campaign
    last = {
        "companies": origin.companies + sizes.companies,
        "employees": origin.employees + sizes.employees,
        "campaigns": origin.campaigns + sizes.campaigns,
        "campaign_events": events,
        "courses": origin.courses + sizes.courses,
        "course_sections": origin.course_sections + sizes.courses * sizes.sections,
        "inscriptions": origin.inscriptions + sizes.inscriptions,
    }
    for table, largest in last.items():
        if largest > MAX_SAFE_ID:
            raise GenerateError(
                f"{table} would take ids past {MAX_SAFE_ID:,}, the largest a client reads"
                " exactly: generate fewer, or into a database whose ids leave room"
            )


def slug(text: str) -> str:
    """The ASCII letters of a name, for an email address (Łukasz -> lukasz)."""
    folded = unicodedata.normalize("NFKD", text.casefold().translate(_ASCII))
    return "".join(c for c in folded if "a" <= c <= "z")


_ASCII = str.maketrans({"ł": "l", "ø": "o", "æ": "ae", "đ": "d", "ı": "i"})


def generate(
    path: str | Path, sizes: Sizes, seed: int, progress: bool = False, append: bool = False
) -> dict[str, int]:
    """Fill the database in one transaction; return the rows written per table."""
    return generate_companies(path, sizes, seed, progress, append)[1]


def generate_companies(
    path: str | Path, sizes: Sizes, seed: int, progress: bool = False, append: bool = False
) -> tuple[list[Company], dict[str, int]]:
    """:func:`generate`, also returning the companies made. Without ``append`` the data
    tables must be empty; with it, the new rows follow the database's own."""
    with into_new_file(path) as file:
        return _generate_into(file, sizes, seed, progress, append)


def _generate_into(
    path: Path, sizes: Sizes, seed: int, progress: bool, append: bool
) -> tuple[list[Company], dict[str, int]]:
    rules = rules_from_env()
    conn = connect_writer(path, schema_in_write=True)
    meter = Meter(progress)
    try:
        if not append:
            conn.execute("PRAGMA synchronous = OFF")  # one transaction into a fresh file
        conn.execute("PRAGMA cache_size = -262144")  # 256 MiB
        conn.execute("PRAGMA temp_store = MEMORY")
        with write_transaction(conn):
            ensure_schema(conn, rules, in_write=True)  # made or upgraded with the write
            if not append:
                refuse_data(conn)
            origin = origin_of(conn)
            companies = plan(sizes, origin)
            indexes = drop_indexes(conn)
            counts = write(conn, Plan(companies, sizes, seed, origin), meter.tick)
            meter.close()
            for sql in indexes:  # the very statements the schema made them with
                conn.execute(sql)
            conn.execute(f"{DERIVE_COMPLETED_AT} WHERE id > ?", (origin.inscriptions,))
            # Events took the next places of the feed in id order (see _events).
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'change_seq'",
                (str(origin.change_seq + counts["campaign_events"]),),
            )
            refuse_unsafe_ids(conn)
            new = f"SELECT id FROM main.campaigns WHERE id > {origin.campaigns}"
            classify(conn, rules, new, origin.change_seq)
            refresh_stats(conn, origin.change_seq, made(origin))
            refresh_reports(
                conn, f"{EVERY_SEND} WHERE campaign_id > {origin.campaigns}", origin.change_seq
            )
            bump_data_version(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return companies, counts
    finally:
        meter.close()
        conn.close()


def refuse_unsafe_ids(conn: sqlite3.Connection) -> None:
    """Refuse (so the write rolls back) ids past 2^53-1: a client would not read them
    exactly, and the export would not load back. Only an append after such ids meets it."""
    for table in (*ORIGIN_TABLES, "campaign_events", "api_keys"):
        (largest,) = conn.execute(f"SELECT max(id) FROM {table}").fetchone()
        if largest is not None and largest > MAX_SAFE_ID:
            raise GenerateError(
                f"{table} would take ids past {MAX_SAFE_ID:,}, the largest a client reads"
                " exactly: append to a database whose ids leave room"
            )


def made(origin: Origin) -> Touched:
    """What a generation gave, for the stats' summaries: every row past ``origin``."""
    return Touched(
        campaigns=f"SELECT id FROM campaigns WHERE id > {origin.campaigns}",
        employees=f"SELECT id FROM employees WHERE id > {origin.employees}",
        inscriptions=f"SELECT id FROM inscriptions WHERE id > {origin.inscriptions}",
    )


def refuse_data(conn: sqlite3.Connection) -> None:
    """Raise GenerateError unless every data table is empty: never mix with other data."""
    full = [t for t in DATA_TABLES if conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()]
    if full:
        raise GenerateError(
            f"the database already holds data (in {', '.join(full)}); "
            "generate into a new or empty file"
        )


def drop_indexes(conn: sqlite3.Connection) -> list[str]:
    """Drop the schema's indexes, returning their statements: one build at the end is faster."""
    found = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in found:
        conn.execute(f'DROP INDEX "{name}"')
    return [sql for _, sql in found]


@dataclass(frozen=True)
class Plan:
    """What to write: the companies and their sizes, the seed, and where the data starts."""

    companies: list[Company]
    sizes: Sizes
    seed: int
    origin: Origin


def write(conn: sqlite3.Connection, plan: Plan, tick: Callable[[str, int], None]) -> dict[str, int]:
    """Insert every table in dependency order, each from its own random stream."""
    counts, days = {}, dates(DAYS + 4 * plan.sizes.sections)
    for table, columns, make in _STREAMS:
        marks = ", ".join("?" * len(columns.split(",")))
        sql = f"INSERT INTO {table} ({columns}) VALUES ({marks})"
        rng = random.Random(f"{plan.seed}/{table}")
        rows = make(Context(rng, plan.companies, plan.sizes, plan.seed, conn, days, plan.origin))
        counts[table] = 0
        while True:  # in chunks, so the progress moves without a per-row wrapper
            chunk = list(islice(rows, CHUNK))  # counted here: see changed_rows on rowcount
            conn.executemany(sql, chunk)
            counts[table] += len(chunk)
            tick(table, len(chunk))
            if len(chunk) < CHUNK:
                break
    return counts


@dataclass(frozen=True)
class Context:
    """What a row maker needs: its random stream, the plan and the rows written so far."""

    rng: random.Random
    companies: list[Company]
    sizes: Sizes
    seed: int
    conn: sqlite3.Connection
    days: list[str]  # every date the data can hold, as text, by offset from BASE
    origin: Origin

    def launch(self, launches: list[int], campaign_id: int) -> int:
        """A campaign's launch among ``launches`` (one per campaign of the plan, by id)."""
        return launches[campaign_id - self.origin.campaigns - 1]


def dates(days: int) -> list[str]:
    """``YYYY-MM-DD`` of the first ``days`` days from BASE, each formatted once."""
    return [(BASE + dt.timedelta(days=d)).isoformat() for d in range(days)]


Rows = Iterator[tuple[Any, ...]]


def _companies(ctx: Context) -> Rows:
    """The companies, named after well-known sample firms."""
    for c in ctx.companies:
        yield c.id, c.name, c.name.casefold()


def _api_keys(ctx: Context) -> Rows:
    """One key per company, stored hashed like any other key."""
    for c in ctx.companies:
        key = generated_key(c.id, ctx.seed)
        yield c.id, apikeys.hash_key(key), apikeys.prefix_of(key), "generated", f"{BASE}T00:00:00Z"


def _employees(ctx: Context) -> Rows:
    """People with varied (some non-ASCII) names; half live in the company's home country."""
    r, fold = ctx.rng.random, {w: w.casefold() for w in FIRST + LAST + DEPARTMENTS + COUNTRIES}
    slugs = {w: slug(w) for w in FIRST + LAST}
    departments = [d for i, d in enumerate(DEPARTMENTS) for _ in range(8 - i // 2)]
    for c in ctx.companies:
        home = COUNTRIES[(c.id - 1) % len(COUNTRIES)]
        seen: dict[str, int] = {}
        for employee_id in c.employees:
            first, last = FIRST[int(r() * len(FIRST))], LAST[int(r() * len(LAST))]
            department = departments[int(r() * len(departments))]
            country = home if r() < 0.5 else COUNTRIES[int(r() * len(COUNTRIES))]
            local = f"{slugs[first]}.{slugs[last]}"
            seen[local] = n = seen.get(local, 0) + 1  # letters only, so a number never clashes
            email = f"{local}{n if n > 1 else ''}@{c.domain}"
            yield (employee_id, c.id, first, last, email, department, country, fold[first],
                   fold[last], email.casefold(), fold[department], fold[country])  # fmt: skip


def _teams(ctx: Context) -> Rows:
    """About one team per 50 employees, names unique within a company."""
    names = [f"{a} {b}" for a in TEAM_WORDS[0] for b in TEAM_WORDS[1]]
    for c in ctx.companies:
        ctx.rng.shuffle(names)
        for i, team_id in enumerate(c.teams):
            name = names[i % len(names)] + (f" {i // len(names) + 1}" if i >= len(names) else "")
            yield team_id, c.id, name, name.casefold()


def _team_members(ctx: Context) -> Rows:
    """Zero, one or two teams per employee, always of the employee's company."""
    r = ctx.rng.random
    for c in ctx.companies:
        first, n = c.teams.start, len(c.teams)
        for employee_id in c.employees:
            picks = int(r() * 10)  # 0 teams: 20%, 1 team: 50%, 2 teams: 30%
            if picks < 2:
                continue
            team = int(r() * n)
            yield employee_id, first + team
            if picks >= 7 and n > 1:
                yield employee_id, first + (team + 1 + int(r() * (n - 1))) % n


def _launches(ctx: Context) -> list[int]:
    """Launch times (epoch seconds) of all campaigns, by id: mornings over two years."""
    rng = random.Random(f"{ctx.seed}/launches")
    total = sum(len(c.campaigns) for c in ctx.companies)
    days = [rng.randrange(2 * 365) for _ in range(total)]
    return [BASE_EPOCH + d * 86_400 + 7 * 3600 + rng.randrange(16) * 900 for d in days]


def _campaigns(ctx: Context) -> Rows:
    """Campaigns launched over two years."""
    launches = _launches(ctx)
    for c in ctx.companies:
        for campaign_id in c.campaigns:
            title = CAMPAIGNS[int(ctx.rng.random() * len(CAMPAIGNS))]
            launch = _timestamp(ctx.days, ctx.launch(launches, campaign_id))
            yield campaign_id, c.id, title, launch, title.casefold()


def _timestamp(days: list[str], epoch: int) -> str:
    """Epoch seconds as the API writes them, without datetime's cost."""
    day, seconds = divmod(epoch - BASE_EPOCH, 86_400)
    hours, seconds = divmod(seconds, 3600)
    return f"{days[day]}T{hours:02d}:{seconds // 60:02d}:{seconds % 60:02d}Z"


def _targets(ctx: Context) -> Rows:
    """Who each campaign went to: a sample of its company's employees, most sent at launch."""
    r, launches = ctx.rng.random, _launches(ctx)
    for c in ctx.companies:
        n = len(c.employees)
        for campaign_id in c.campaigns:
            sent = _timestamp(ctx.days, ctx.launch(launches, campaign_id))
            share = SENT_TO[0] + (SENT_TO[1] - SENT_TO[0]) * r()
            for employee_id in sorted(ctx.rng.sample(c.employees, max(1, int(share * n)))):
                yield campaign_id, employee_id, None if r() < 0.05 else sent


def _events(ctx: Context) -> Rows:
    """Events after their launch, in random time order, by the campaign's targets.

    Clicks and submitted forms carry the browser's address and user agent, half the opens
    the mail client's; ``seq`` (the event feed's order) is the id, as rows are made in order.
    A few opens and clicks are a gateway's scanner a few seconds after sending, a few
    clicks a burst (:data:`SCANNED`, :data:`BURSTS`): the automation rules' share.
    """
    r, days, launches, sizes = ctx.rng.random, ctx.days, _launches(ctx), ctx.sizes
    first, spread, seq = ctx.origin.campaigns + 1, EVENT_SPREAD / 1.1, ctx.origin.change_seq
    special = {first: sizes.big_campaign, first + 1: sizes.mid_campaign}
    for c in ctx.companies:
        for campaign_id in c.campaigns:
            targets = [e for (e,) in ctx.conn.execute(
                "SELECT employee_id FROM campaign_targets WHERE campaign_id = ?", (campaign_id,)
            )]  # fmt: skip
            n, launch = len(targets), ctx.launch(launches, campaign_id) + 1 - BASE_EPOCH
            left = special.get(campaign_id) or sizes.events_per_campaign
            while left > 0:
                x = r()  # most events come in the first days after the launch
                at = launch + int(x * (x + 0.1) * spread)
                employee_id, kind = targets[int(r() * n)], EVENT_DRAWS[int(r() * 20)]
                ip = agent = None
                if kind in ("click", "fail") or (kind == "open" and r() < 0.5):
                    net = NETWORKS[int(r() * len(NETWORKS))]
                    ip = f"{net}{int(r() * 254) + 1:{'x' if ':' in net else 'd'}}"
                    agent = USER_AGENTS[int(r() * len(USER_AGENTS))]
                captcha = r() < 0.15
                robot = r() if kind in ("open", "click") else 1.0
                if robot < SCANNED:  # a gateway's scanner, up to 8 s after the sending
                    at, captcha = launch + int(r() * 8), False
                    ip = f"{NETWORKS[0]}{int(r() * 254) + 1}"
                    agent = SCANNER_AGENTS_SEEN[int(r() * len(SCANNER_AGENTS_SEEN))]
                burst = kind == "click" and SCANNED <= robot < SCANNED + BURSTS and left >= 4
                for offset in (0, 0, 1, 2) if burst else (0,):
                    seq, left = seq + 1, left - 1
                    stamp = _timestamp(days, BASE_EPOCH + at + offset)
                    yield campaign_id, employee_id, kind, stamp, captcha, ip, agent, seq


def _courses(ctx: Context) -> Rows:
    """Courses with titles unique within a company."""
    titles = list(COURSES)
    for c in ctx.companies:
        ctx.rng.shuffle(titles)
        for i, course_id in enumerate(c.courses):
            title = titles[i % len(titles)]
            title += f" {i // len(titles) + 1}" if i >= len(titles) else ""
            yield course_id, c.id, title, title.casefold()


def _sections(ctx: Context) -> Rows:
    """Sections at positions 1..n: a lecture first, an exam last, a mix between."""
    n, middle = ctx.sizes.sections, ("lecture", "lecture", "video", "quiz", "survey")
    for c in ctx.companies:
        for course_id in c.courses:
            for position in range(1, n + 1):
                kind = "lecture" if position == 1 else "exam" if position == n else None
                kind = kind or middle[int(ctx.rng.random() * len(middle))]
                title = f"{SECTION_TITLES[kind]} {position}"
                place = (course_id - ctx.origin.courses - 1) * n + position
                yield ctx.origin.course_sections + place, course_id, title, kind, position


def _inscriptions(ctx: Context) -> Rows:
    """Enrolments over two years, a tenth without a due date, in every status."""
    r, days, dues = ctx.rng.random, ctx.days, (14, 30, 30, 45, 60, 90)
    inscription_id = ctx.origin.inscriptions
    for c in ctx.companies:
        employee, employees = c.employees.start, len(c.employees)
        course, courses = c.courses.start, len(c.courses)
        for _ in range(c.inscriptions):
            inscription_id += 1
            start = int(r() * 2 * 365)
            due = None if r() < 0.1 else days[start + dues[int(r() * len(dues))]]
            yield (inscription_id, c.id, employee + int(r() * employees),
                   course + int(r() * courses), days[start], due,
                   STATUSES[int(r() * len(STATUSES))])  # fmt: skip


def _results(ctx: Context) -> Rows:
    """Progress of started inscriptions: graded quizzes and exams, the rest ungraded."""
    r, days = ctx.rng.random, ctx.days
    offset = {text: i for i, text in enumerate(days)}
    sections: dict[int, list[tuple[int, bool]]] = {}
    for section_id, course_id, kind in ctx.conn.execute(
        "SELECT id, course_id, section_type FROM course_sections ORDER BY course_id, position"
    ).fetchall():
        sections.setdefault(course_id, []).append((section_id, kind in ("quiz", "exam")))
    for inscription_id, course_id, start, status in ctx.conn.execute(
        "SELECT id, course_id, start_date, status FROM inscriptions"
        " WHERE id > ? AND status != 'not_started' ORDER BY id",
        (ctx.origin.inscriptions,),
    ):
        parts, day = sections.get(course_id, []), offset[start]
        done = len(parts) if status == "completed" else int(r() * (len(parts) - 1)) + 1
        for section_id, scored in parts[:done]:
            day += int(r() * 4)
            if scored:
                x = r()
                result = 100 - int(x * x * 90)
                grade = "APPROVED" if result >= 70 else "DISAPPROVED"
                yield inscription_id, section_id, days[day], result, grade
            else:
                yield inscription_id, section_id, days[day], None, None
        if done < len(parts) and r() < 0.5:  # the section they are on now
            yield inscription_id, parts[done][0], None, None, None


_STREAMS: list[tuple[str, str, Callable[[Context], Rows]]] = [
    ("companies", "id, name, name_key", _companies),
    ("api_keys", "company_id, key_hash, prefix, label, created_at", _api_keys),
    ("employees", "id, company_id, first_name, last_name, email, department, country,"
     " first_name_key, last_name_key, email_key, department_key, country_key", _employees),
    ("teams", "id, company_id, name, name_key", _teams),
    ("team_members", "employee_id, team_id", _team_members),
    ("campaigns", "id, company_id, title, launch_date, title_key", _campaigns),
    ("campaign_targets", "campaign_id, employee_id, sent_at", _targets),
    ("campaign_events", "campaign_id, employee_id, type, timestamp, with_captcha, ip, user_agent,"
     " seq", _events),
    ("courses", "id, company_id, title, title_key", _courses),
    ("course_sections", "id, course_id, title, section_type, position", _sections),
    ("inscriptions", "id, company_id, employee_id, course_id, start_date, due_date, status",
     _inscriptions),
    ("section_results", "inscription_id, section_id, completed_at, result, status", _results),
]  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The flags; every size is required except the optional campaign overrides."""
    parser = OneLineParser(
        description="Generate a synthetic dataset straight into a new database. Counts are"
        " totals across all companies, split evenly between them; each company's API key"
        " (derived from the seed) is printed at the end.",
    )
    add_store_arguments(parser, "SQLite file: new, or empty")
    sizes = (
        ("companies", "companies"),
        ("employees", "employees in all"),
        ("campaigns", "campaigns in all"),
        ("events-per-campaign", "events of every campaign but the two below"),
        ("courses", "courses in all"),
        ("inscriptions", "inscriptions in all"),
    )
    for name, text in sizes:
        parser.add_argument(f"--{name}", type=int, required=True, help=text)
    parser.add_argument(
        "--sections", type=int, default=5, help="sections per course (default %(default)s)"
    )
    parser.add_argument(
        "--big-campaign",
        type=int,
        default=0,
        help="events of campaign 1 (company 1), if > 0 (default %(default)s)",
    )
    parser.add_argument(
        "--mid-campaign",
        type=int,
        default=0,
        help="events of campaign 2 (company 1), if > 0 (default %(default)s)",
    )
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        help="multiply the employees, the events (--big-campaign and --mid-campaign too) and"
        " the inscriptions by this whole factor; campaigns, courses and sections stay"
        " (default %(default)s)",
    )
    parser.add_argument("--seed", type=int, required=True, help="same seed, same data")
    parser.add_argument(
        "--append",
        action="store_true",
        help="add to the data the --db file holds: new companies, ids after its own",
    )
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (by default: a bar per table on a terminal, plain lines"
        " otherwise)",
    )
    return parser


@command("generation refused, database unchanged")
def main(argv: Sequence[str] | None = None) -> int:
    """Generate, then print the rows per table, the rate and the companies' keys."""
    args = build_parser().parse_args(argv)
    sizes = Sizes(
        companies=args.companies,
        employees=args.employees,
        campaigns=args.campaigns,
        events_per_campaign=args.events_per_campaign,
        courses=args.courses,
        inscriptions=args.inscriptions,
        sections=args.sections,
        big_campaign=args.big_campaign,
        mid_campaign=args.mid_campaign,
    ).scaled(args.scale)
    started, progress = time.perf_counter(), not args.no_progress
    if args.db is not None:
        companies, counts = generate_companies(args.db, sizes, args.seed, progress, args.append)
    elif args.append:
        raise GenerateError("--append adds to a SQLite file (--db); PostgreSQL takes a new set")
    else:  # generated into a scratch SQLite file, then copied in one transaction
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "generated.sqlite3"
            companies, _ = generate_companies(path, sizes, args.seed, progress)
            counts = asyncio.run(copy_to_pg(path, args.database_url))
    seconds = time.perf_counter() - started
    total = sum(counts.values())
    print("rows per table: " + ", ".join(f"{table} {n:,}" for table, n in counts.items()))
    where = args.db or "PostgreSQL"
    print(f"generated {plural(total, 'row')} into {where} in {seconds:.1f} s"
          f" ({total / seconds:,.0f} rows/s)")  # fmt: skip
    for company in companies:
        print(f"company {company.id} key: {generated_key(company.id, args.seed)}")
    return 0


# ``python -m app.tools.generator`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
