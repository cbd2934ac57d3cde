"""The dataset generator (contract.md 9: synthetic datasets straight into the database).

Pins: the same seed gives the same tables; the counts follow the flags; the values keep
the loader's invariants (case-folded keys, formats, result grades) and its exact schema,
indexes and tenancy triggers included; the real app serves the data with tenancy intact
(contract.md 1); a database holding data, or impossible sizes, are refused. Campaign
targets and event addresses follow contract.md 10, the change sequence contract.md 13,
and the exported fixture loads back into the same tables.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.config import Config
from app.main import create_app
from app.tools.export import export_fixture
from app.tools.generator import GenerateError, Sizes, generate, generated_key
from app.tools.loader import load_files

from .support.factories import API, DATA_TABLES, dump_tables, query
from .support.servers import ROOT, run_python

TINY = Sizes(
    companies=2,
    employees=60,
    campaigns=4,
    events_per_campaign=15,
    courses=4,
    inscriptions=50,
    sections=4,
    big_campaign=40,
    mid_campaign=25,
)
FLAGS = [
    "--companies", "2", "--employees", "60", "--campaigns", "4", "--events-per-campaign", "15",
    "--courses", "4", "--inscriptions", "50", "--sections", "4", "--big-campaign", "40",
    "--mid-campaign", "25",
]  # fmt: skip
SEED_3 = ["--seed", "3", "--no-progress"]
RANDOM_META = ("data_token", "cursor_secret")


def dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in a stable order, meta's random values (token, secret, the
    feed's marks) left out."""
    tables = dump_tables(path).items()
    return {table: [r for r in rows if not random_meta(r)] for table, rows in tables}


def random_meta(row: tuple[Any, ...]) -> bool:
    return row[0] in RANDOM_META or str(row[0]).startswith("feed_mark:")


@pytest.fixture
def tiny_db(tmp_path: Path) -> Path:
    """A tiny generated database, seed 7."""
    path = tmp_path / "tiny.sqlite3"
    generate(path, TINY, seed=7)
    return path


def test_same_seed_gives_identical_tables(tmp_path: Path, tiny_db: Path) -> None:
    again = tmp_path / "again.sqlite3"
    generate(again, TINY, seed=7)
    first, second = dump(tiny_db), dump(again)
    assert set(first) >= set(DATA_TABLES)
    assert all(first[t] for t in DATA_TABLES), "every data table holds rows"
    assert first == second


def test_another_seed_gives_other_data(tmp_path: Path, tiny_db: Path) -> None:
    other = tmp_path / "other.sqlite3"
    generate(other, TINY, seed=8)
    first, second = dump(tiny_db), dump(other)
    assert first["employees"] != second["employees"]
    assert first["campaign_events"] != second["campaign_events"]
    assert first["inscriptions"] != second["inscriptions"]


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the command-line wrapper as a user would."""
    return run_python("scripts/generate_fixtures.py", *args)


@pytest.mark.system
def test_progress_in_a_log_is_plain_lines_and_counts_agree(tmp_path: Path) -> None:
    """stderr that is no terminal (a log file) gets a plain line per table, never a bar;
    a count of one is singular."""
    one = ["--companies", "1", "--employees", "1", "--campaigns", "1", "--seed", "3",
           "--events-per-campaign", "1", "--courses", "1", "--inscriptions", "0"]  # fmt: skip
    done = run_script("--db", str(tmp_path / "one.sqlite3"), *one)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr and "%|" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(
        re.fullmatch(r"[a-z_]+: [\d,]+ rows? in [\d.]+ s .*done", x) for x in lines
    )
    assert "companies: 1 row in " in done.stderr
    assert "campaigns 1," in done.stdout.splitlines()[0]
    assert "company 1 key: " in done.stdout and "1 campaigns" not in done.stdout


@pytest.mark.system
def test_command_line_counts_follow_the_flags(tmp_path: Path) -> None:
    path = tmp_path / "cli.sqlite3"
    done = run_script("--db", str(path), *FLAGS, *SEED_3)
    assert done.returncode == 0, done.stderr
    assert "rows/s" in done.stdout
    assert done.stderr == ""  # --no-progress: no bar

    def per_company(table: str) -> dict[int, int]:
        return dict(query(path, f"SELECT company_id, count(*) FROM {table} GROUP BY 1"))

    assert query(path, "SELECT id FROM companies ORDER BY id") == [(1,), (2,)]
    assert per_company("employees") == {1: 30, 2: 30}
    assert per_company("campaigns") == {1: 2, 2: 2}
    assert per_company("courses") == {1: 2, 2: 2}
    assert per_company("inscriptions") == {1: 25, 2: 25}
    assert per_company("api_keys") == {1: 1, 2: 1}
    events = dict(query(path, "SELECT campaign_id, count(*) FROM campaign_events GROUP BY 1"))
    assert events == {1: 40, 2: 25, 3: 15, 4: 15}
    sections = query(
        path, "SELECT course_id, group_concat(position) FROM course_sections GROUP BY 1"
    )
    assert sections == [(course, "1,2,3,4") for course in (1, 2, 3, 4)]


@pytest.mark.system
def test_scale_multiplies_people_events_and_inscriptions_only(tmp_path: Path) -> None:
    """--scale 3: three times the employees, events (campaigns 1 and 2 included), targets
    and inscriptions; the same campaigns, courses and sections (make bench-data-large)."""
    path = tmp_path / "x3.sqlite3"
    done = run_script("--db", str(path), *FLAGS, "--scale", "3", *SEED_3)
    assert done.returncode == 0, done.stderr

    def per_company(table: str) -> dict[int, int]:
        return dict(query(path, f"SELECT company_id, count(*) FROM {table} GROUP BY 1"))

    assert per_company("employees") == {1: 90, 2: 90}
    assert per_company("inscriptions") == {1: 75, 2: 75}
    assert per_company("campaigns") == {1: 2, 2: 2}
    assert per_company("courses") == {1: 2, 2: 2}
    assert query(path, "SELECT count(*) FROM course_sections") == [(16,)]
    events = dict(query(path, "SELECT campaign_id, count(*) FROM campaign_events GROUP BY 1"))
    assert events == {1: 120, 2: 75, 3: 45, 4: 45}
    targets = query(path, "SELECT count(*) FROM campaign_targets GROUP BY campaign_id")
    assert all(0.4 * 90 - 1 <= n <= 0.8 * 90 for (n,) in targets)  # 40% to 80% of 90


def make_flags(variable: str) -> dict[str, int]:
    """The generator's sizes a Makefile variable holds (``--name N`` pairs)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.search(rf"^{variable} := (.*)$", text, re.MULTILINE)
    assert found, variable
    words = found.group(1).split()
    pairs = zip(words[::2], words[1::2], strict=True)
    return {flag.removeprefix("--"): int(n) for flag, n in pairs}


def test_the_bench_sets_event_counts_follow_the_makefiles_flags() -> None:
    """``make help``'s lines and the performance page give each benchmark set's events
    as the flags make them: campaigns 1 and 2 take theirs, every other one its own."""
    standard, tenth = make_flags("BENCH_SIZES"), make_flags("BENCH_TENTH_SIZES")

    def events(flags: dict[str, int], scale: int = 1) -> str:
        plain = (flags["campaigns"] - 2) * flags["events-per-campaign"]
        return f"{scale * (plain + flags['big-campaign'] + flags['mid-campaign']):,} events"

    helps = {
        line.split(":")[0].removeprefix("## make "): line
        for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
        if line.startswith("## make ")
    }
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    wanted = {
        "bench-data": events(standard),
        "bench-data-large": events(standard, 10),
        "bench-data-tenth": events(tenth),
    }
    for target, count in wanted.items():
        assert count in helps[target], (target, count)
        assert count in page, (target, count)


@pytest.mark.system
def test_sizes_past_the_memory_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    """Sizes within the limits may still need more memory than the machine has: the
    generator plans every company's people before it writes."""
    path = tmp_path / "huge.sqlite3"
    huge = ["--companies", "100000000", "--employees", "100000000", "--courses", "100000000"]
    flags = [*huge, "--campaigns", "2", "--events-per-campaign", "1", "--inscriptions", "1"]
    done = run_python("scripts/generate_fixtures.py", "--db", str(path), *flags, *SEED_3,
                      memory_mb=400)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "generation refused, database unchanged: out of memory" + (
        " (ask for less at once, or give the tool more memory)\n"
    )
    assert not path.exists()


@pytest.mark.system
def test_a_scale_below_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "none.sqlite3"
    done = run_script("--db", str(path), *FLAGS, "--scale", "0", *SEED_3)
    assert done.returncode == 1
    assert done.stderr.strip().endswith("--scale is a whole factor of at least 1")


def test_values_keep_the_loader_invariants(tiny_db: Path) -> None:
    employees = query(tiny_db, "SELECT * FROM employees")
    for row in employees:
        assert row[7:12] == tuple(value.casefold() for value in row[2:7])
    assert any(row[3].casefold() != row[3].lower() for row in employees), "a name like Strauß"
    assert any(not row[2].isascii() for row in employees)
    emails = [(row[1], row[4]) for row in employees]
    assert len(set(emails)) == len(emails)
    named = query(tiny_db, "SELECT name, name_key FROM teams UNION ALL SELECT title, title_key"
                  " FROM courses UNION ALL SELECT title, title_key FROM campaigns")  # fmt: skip
    assert named and all(key == name.casefold() for name, key in named)
    stamp = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
    events = query(
        tiny_db,
        "SELECT ev.id, ev.timestamp, c.launch_date, ev.type, ev.with_captcha"
        " FROM campaign_events ev JOIN campaigns c ON c.id = ev.campaign_id ORDER BY ev.id",
    )
    assert all(stamp.fullmatch(t) and t > launch for _, t, launch, _, _ in events)
    assert [e[1] for e in events] != sorted(e[1] for e in events), "not in timestamp order"
    assert {e[3] for e in events} == {"open", "click", "report", "fail"}
    assert {e[4] for e in events} == {0, 1}
    statuses = query(tiny_db, "SELECT DISTINCT status FROM inscriptions")
    assert {s for (s,) in statuses} == {"not_started", "in_progress", "completed"}
    results = query(
        tiny_db,
        "SELECT s.section_type, r.result, r.status, i.status FROM section_results r"
        " JOIN course_sections s ON s.id = r.section_id"
        " JOIN inscriptions i ON i.id = r.inscription_id",
    )
    assert results and all(started != "not_started" for *_, started in results)
    for kind, result, grade, _ in results:
        if kind in ("lecture", "video", "survey") or result is None:
            assert (result, grade) == (None, None)
        else:
            assert 0 <= result <= 100
            assert grade == ("APPROVED" if result >= 70 else "DISAPPROVED")
    assert query(tiny_db, "SELECT count(*) FROM api_keys WHERE key_hash = ?", _hash(1, 7)) == [(1,)]


def _hash(company_id: int, seed: int) -> str:
    key = generated_key(company_id, seed)
    assert len(key) >= 20 and key.startswith("rk_")
    return hashlib.sha256(key.encode()).hexdigest()


async def test_the_app_serves_the_generated_data(aiohttp_client: Any, tiny_db: Path) -> None:
    client = await aiohttp_client(
        create_app(Config(db=str(tiny_db), rate_burst=100_000, rate_per_second=100_000.0))
    )
    key_1 = {"X-API-KEY": generated_key(1, 7)}
    response = await client.get(f"{API}/campaigns/1/events", headers=key_1)
    assert response.status == 200
    assert len(await response.json()) == 40
    response = await client.get(f"{API}/course-inscriptions", headers=key_1)
    assert response.status == 200
    assert response.headers["X-Total-Count"] == "25"
    # Campaigns 3 and 4 are company 2's: hidden from company 1, served to company 2.
    response = await client.get(f"{API}/campaigns/3/events", headers=key_1)
    assert response.status == 404
    key_2 = {"X-API-KEY": generated_key(2, 7)}
    response = await client.get(f"{API}/campaigns/3/events", headers=key_2)
    assert response.status == 200
    assert len(await response.json()) == 15


def test_schema_matches_the_loaders(tiny_db: Path, sample_db: Path) -> None:
    schema = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
    assert query(tiny_db, schema) == query(sample_db, schema)
    names = {name for _, name, _, _ in query(tiny_db, schema)}
    assert {"campaign_events_by_campaign", "inscriptions_same_company"} <= names


@pytest.mark.system
def test_a_database_with_data_is_refused(tiny_db: Path, sample_db: Path) -> None:
    before = dump(tiny_db)
    with pytest.raises(GenerateError, match="already holds data"):
        generate(tiny_db, TINY, seed=8)
    assert dump(tiny_db) == before
    loaded = dump(sample_db)
    with pytest.raises(GenerateError, match="already holds data"):
        generate(sample_db, TINY, seed=7)
    assert dump(sample_db) == loaded
    done = run_script("--db", str(sample_db), *FLAGS, *SEED_3)
    assert done.returncode == 1
    assert "already holds data" in done.stderr
    assert dump(sample_db) == loaded


@pytest.mark.system
def test_a_postgresql_database_with_data_is_refused_in_one_line(pg_database: str) -> None:
    done = run_script("--database-url", pg_database, *FLAGS, *SEED_3)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "generation refused, database unchanged: the PostgreSQL database already holds companies"
    )


@pytest.mark.system
def test_impossible_sizes_are_refused(tmp_path: Path) -> None:
    one_campaign_each = [*FLAGS, "--campaigns", "2"]  # the later flag wins
    done = run_script("--db", str(tmp_path / "no.sqlite3"), *one_campaign_each, *SEED_3)
    assert done.returncode == 1
    assert "too few campaigns" in done.stderr


@pytest.mark.system
@pytest.mark.parametrize(
    ("flags", "cause"),
    [
        (["--sections", "728087"], "--sections is at most 728,086: dates end in the year 9999"),
        (["--employees", str(2**53)], "employees would take ids past 9,007,199,254,740,991"),
        (["--events-per-campaign", str(2**53)], "campaign_events would take ids past"),
    ],
    ids=["sections past the calendar", "employees", "events"],
)
def test_sizes_past_the_dates_or_the_ids_are_refused_at_once(
    flags: list[str], cause: str, tmp_path: Path
) -> None:
    """Refused in one line before anything is written (a traceback, or rows written until
    the disk was full, before)."""
    path = tmp_path / "no.sqlite3"
    done = run_script("--db", str(path), *FLAGS, *flags, *SEED_3)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"generation refused, database unchanged: {cause}"), done.stderr
    assert done.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_targets_cover_every_event_and_more(tiny_db: Path) -> None:
    """contract.md 10: a campaign goes to a sample of its company; events come from them."""
    untargeted = query(
        tiny_db,
        "SELECT count(*) FROM campaign_events e LEFT JOIN campaign_targets t"
        " ON t.campaign_id = e.campaign_id AND t.employee_id = e.employee_id"
        " WHERE t.campaign_id IS NULL",
    )
    assert untargeted == [(0,)]
    idle = query(
        tiny_db,
        "SELECT count(*) FROM campaign_targets t WHERE NOT EXISTS (SELECT 1 FROM campaign_events"
        " e WHERE e.campaign_id = t.campaign_id AND e.employee_id = t.employee_id)",
    )
    assert idle[0][0] > 0, "some targets did nothing"
    crossed = query(
        tiny_db,
        "SELECT count(*) FROM campaign_targets t JOIN campaigns c ON c.id = t.campaign_id"
        " JOIN employees p ON p.id = t.employee_id WHERE c.company_id != p.company_id",
    )
    assert crossed == [(0,)]
    sent = query(tiny_db, "SELECT DISTINCT t.sent_at IS NULL, t.sent_at = c.launch_date FROM"
                 " campaign_targets t JOIN campaigns c ON c.id = t.campaign_id")  # fmt: skip
    assert set(sent) == {(1, None), (0, 1)}


def test_events_carry_addresses_and_take_their_feed_places_in_id_order(tiny_db: Path) -> None:
    rows = query(tiny_db, "SELECT id, seq, type, ip, user_agent FROM campaign_events ORDER BY id")
    assert [seq for _, seq, *_ in rows] == [event_id for event_id, *_ in rows]
    change_seq = query(tiny_db, "SELECT value FROM meta WHERE key = 'change_seq'")
    # After the events, the inscriptions and the employees take their places.
    placed = query(tiny_db, "SELECT (SELECT count(*) FROM inscriptions)"
                   " + (SELECT count(*) FROM employees)")[0][0]  # fmt: skip
    assert change_seq == [(str(len(rows) + placed),)]
    with_address = [(kind, ip, agent) for _, _, kind, ip, agent in rows if ip is not None]
    assert with_address and len(with_address) < len(rows)
    assert all(agent and 0 < len(ip) <= 45 for _, ip, agent in with_address)
    assert {kind for kind, _, _ in with_address} <= {"open", "click", "fail"}
    assert any(":" in ip for _, ip, _ in with_address) and any(
        "." in ip for _, ip, _ in with_address
    )


def test_an_exported_fixture_loads_back_into_the_same_data(tmp_path: Path, tiny_db: Path) -> None:
    """The exporter writes the loader's format: loading it rebuilds every table exactly."""
    fixture = tmp_path / "tiny.json"
    export_fixture(tiny_db, fixture, {c: generated_key(c, 7) for c in (1, 2)})
    copy = tmp_path / "copy.sqlite3"
    counts = load_files(copy, [fixture])
    assert counts["campaign_targets (implied)"] == 0
    original, loaded = dump_tables(tiny_db), dump_tables(copy)
    for table in (*DATA_TABLES, "campaign_targets"):
        if table != "api_keys":
            assert loaded[table] == original[table], table
    assert [row[:3] for row in loaded["api_keys"]] == [row[:3] for row in original["api_keys"]]
