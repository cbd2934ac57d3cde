"""The README and the docs/ pages, followed as a new user would (issue 12 item 7, issue 21).

The README's `curl` examples run against a real server on the sample data and each
returns records; the Python client is generated from the live OpenAPI document and its
code runs and prints exactly the sample's records; the benchmark-database commands
serve; the pages state one revocation delay, the key cache's (contract.md 1 promises at
most 5 s, checked on a real server with the real key tool); they link only to what a
clone has (pages and anchors), name only files a clone has, say what `make clean`
deletes, and quote no test counts that go stale. The README is a front door: at most 200
lines, opening with its contents list. The configuration table is the server's settings,
the fixture example loads, the PostgreSQL reading role still reads every table once an
upgrade has made some again, and the benchmark writes its table only between the
performance page's markers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from types import ModuleType
from urllib.parse import urlsplit

import asyncpg
import pytest
from pgcluster import cluster

from app.config import Config
from app.data.api_keys import CACHE_SECONDS
from app.data.pg.schema import rebuild_stats_summaries
from app.tools import loader
from app.tools.keytool import build_parser
from app.tools.loader import load_files

from .support.docs import DOCS, PAGES, anchors, blocks, headings, links, prose, read, section
from .support.factories import KEY_1, by_id, make_sample_db, query, sample
from .support.servers import (
    GUARD_SECONDS,
    ROOT,
    AppProcess,
    Launcher,
    ProcessGuard,
    clean_env,
    fetch,
    free_port,
    run_python,
)
from .support.stores import require_postgresql

README = read(ROOT / "README.md")
BASE = "http://127.0.0.1:8080"  # where the examples point
BIN = Path(sys.executable).parent
README_LINES = 200


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m app` over a fresh copy of the sample data (default limits raised)."""
    directory = tmp_path_factory.mktemp("readme")
    with Launcher(directory) as launcher:
        app = launcher.serve(
            make_sample_db(directory), "--rate-burst", "1000", "--rate-per-second", "1000"
        )
        yield app.base


@pytest.mark.system
def test_every_curl_example_returns_records(live: str) -> None:
    [block] = blocks(section("Trying it"), "sh")
    variables = dict(re.findall(r"^(\w+)=(\S+)$", block, re.M))
    commands = [line for line in block.splitlines() if line.startswith("curl ")]
    assert len(commands) >= 6
    for command in commands:
        words = shlex.split(command.replace("$KEY", variables["KEY"]))
        headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
        [url] = [word for word in words if word.startswith(BASE)]
        status, _, body = fetch(live + url.removeprefix(BASE), headers)
        assert status == 200, (command, body)
        records = json.loads(body)
        if isinstance(records, dict):  # a report on one campaign or employee
            assert records.get("id"), command
        else:
            assert isinstance(records, list) and records, command


@pytest.mark.system
def test_the_quoted_comma_example_finds_that_department(live: str) -> None:
    [block] = blocks(section("Trying it"), "sh")
    [url] = re.findall(rf"'({re.escape(BASE)}[^']*%22[^']*,[^']*%22[^']*)'", block)
    key = re.search(r"^KEY=(\S+)$", block, re.M).group(1)
    records = json.loads(fetch(live + url.removeprefix(BASE), {"X-API-KEY": key})[2])
    assert records and {r["victim_department"] for r in records} == {"Research, Development"}


@pytest.mark.system
def test_the_python_client_example_runs(tmp_path: Path) -> None:
    """Generate the client as the interface page says, run its code against a server whose
    limit it meets at once (a token a second), compare with the sample and the server."""
    text = section("Python client")
    [shell] = blocks(text, "sh")
    [generate] = [line for line in shell.splitlines() if " generate " in line]
    env = clean_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(
            make_sample_db(tmp_path), "--rate-burst", "1", "--rate-per-second", "1"
        )
        words = shlex.split(generate.replace(BASE, app.base))
        made = subprocess.run(
            [str(BIN / words[0]), *words[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=GUARD_SECONDS,
            check=False,
        )
        assert made.returncode == 0, made.stdout + made.stderr
        enums = [path.name for path in tmp_path.glob("*/models/section_status*.py")]
        assert len(enums) == 1, enums  # a section's status: one enum, null beside it
        [code] = blocks(text, "python")
        (tmp_path / "example.py").write_text(code.replace(BASE, app.base), encoding="utf-8")
        ran = subprocess.run(
            [sys.executable, "example.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=GUARD_SECONDS * 2,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines() == expected_client_output()
        for fmt in ("csv", "ndjson"):
            url = f"{app.base}/api/companies/v1/campaigns/1/events?format={fmt}"
            while (answer := fetch(url, {"X-API-KEY": KEY_1}))[0] == 429:
                time.sleep(float(answer[1]["Retry-After"]))
            assert answer[0] == 200 and answer[2]
            assert (tmp_path / f"campaign-1-events.{fmt}").read_bytes() == answer[2], fmt
    log = app.output_text()[1]
    assert "status=429" in log  # the example met the limit and waited it out


def expected_client_output() -> list[str]:
    """What the client example prints, computed from fixtures/sample.json."""
    employees, courses = by_id("employees"), by_id("courses")
    events = sorted(
        (e for e in sample()["campaign_events"] if e["campaign_id"] == 1),
        key=lambda e: (e["timestamp"], e["id"]),
    )
    lines = []
    for event in events:
        if event["type"] in ("open", "click"):
            moment = datetime.fromisoformat(event["timestamp"])
            lines.append(f"{moment} {event['type']} {employees[event['employee_id']]['email']}")
    inscriptions = sorted(
        (i for i in sample()["inscriptions"] if employees[i["employee_id"]]["company_id"] == 1),
        key=lambda i: (i["start_date"], i["id"]),
    )
    assert len(inscriptions) > 50  # the example's loop reads more than one page
    for ins in inscriptions:
        email, title = employees[ins["employee_id"]]["email"], courses[ins["course_id"]]["title"]
        lines.append(f"{email} {title} {ins['status']}")
    return lines


@pytest.mark.system
def test_the_benchmark_database_serves_as_shown(tmp_path: Path) -> None:
    """The performance page's two commands, on a tiny set the generator makes at that path."""
    text = section("Running the benchmark")
    bench_db = re.search(r"^BENCH_DB := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    [block] = [b for b in blocks(text, "sh") if "python -m app" in b]
    lines = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    [create] = [words for words in lines if words[1].endswith("manage_keys.py")]
    [serve] = [words for words in lines if words[1:3] == ["-m", "app"]]
    path = serve[serve.index("--db") + 1]
    assert path == create[create.index("--db") + 1] == bench_db.group(1)
    db = tmp_path / path
    db.parent.mkdir()
    generate = ["scripts/generate_fixtures.py", "--db", str(db), "--companies", "2"]
    generate += ["--employees", "20", "--campaigns", "2", "--events-per-campaign", "5"]
    generate += ["--courses", "2", "--inscriptions", "10", "--seed", "3", "--no-progress"]
    assert run_python(*generate).returncode == 0
    made = run_python(*[str(db) if word == path else word for word in create[1:]])
    assert made.returncode == 0, made.stderr
    key = re.search(r"^\s*(rk_\S+)$", made.stdout, re.M).group(1)
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(db, *serve[serve.index("--db") + 2 :])
        status, _, body = fetch(
            f"{app.base}/api/companies/v1/course-inscriptions", {"X-API-KEY": key}
        )
    assert status == 200 and json.loads(body), body


def test_one_revocation_delay_everywhere() -> None:
    """Every sentence on revocation states the key cache's delay, and no other figure:
    in the docs and in the key tool's help."""
    texts = [*map(read, DOCS), build_parser().format_help()]
    sentences = re.split(r"(?<=\.)\s+", " ".join(" ".join(texts).split()))
    about = [s for s in sentences if re.search(r"revoked key|revoke a key", s, re.I)]
    figures = {float(n) for s in about for n in re.findall(r"([0-9.]+) seconds?", s)}
    assert len(about) >= 3 and figures == {CACHE_SECONDS}, about
    assert CACHE_SECONDS <= 5  # contract.md 1


@pytest.mark.system
def test_a_key_revoked_by_the_tool_stops_working_on_a_running_server(tmp_path: Path) -> None:
    """contract.md 1 on real processes: the key tool revokes, the server says 401 in 5 s."""
    db = make_sample_db(tmp_path)
    made = run_python(
        "scripts/manage_keys.py", "--db", str(db), "create", "--company", "1", "--label", "r"
    )
    key = re.search(r"^\s*(rk_\S+)$", made.stdout, re.M).group(1)
    key_id = re.search(r"key (\d+)", made.stdout).group(1)
    url = "/api/companies/v1/victimsapi/7/events"
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(db, "--auth-failures-per-minute", "1000")
        assert fetch(app.base + url, {"X-API-KEY": key})[0] == 200  # cached from now on
        assert (
            run_python("scripts/manage_keys.py", "--db", str(db), "revoke", key_id).returncode == 0
        )
        revoked = time.monotonic()
        while (status := fetch(app.base + url, {"X-API-KEY": key})[0]) != 401:
            assert status in (200, 429) and time.monotonic() - revoked < 5.0, status
            time.sleep(0.05)


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_links_point_at_what_a_clone_has(page: Path) -> None:
    """Every relative link reaches a file of the clone, and its anchor a heading there."""
    text = read(page)
    assert "../" not in text
    assert links(text), "a page that links nowhere is an island"
    for target in links(text):
        if re.match(r"https?://", target):
            continue
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        assert goal.is_file() and goal.is_relative_to(ROOT), (page.name, target)
        if anchor:
            assert anchor in anchors(read(goal)), (page.name, target)


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_only_files_a_clone_has_are_named(page: Path) -> None:
    """A path in backquotes (`scripts/bench.py`, `tests/data/...`) names a file or folder
    of the clone; nothing cites the specification or the issues, which a clone does not
    have."""
    text = read(page)
    assert "contract.md" not in text and "reporting-api.md" not in text
    assert not re.search(r"\bissues? #?\d|\bthe issue's|\bitem \d", text, re.I), page.name
    named = re.findall(r"`((?:app|scripts|tests|fixtures|docs|\.ci)/[\w./*-]*)[` ]", prose(text))
    for path in named:
        assert (ROOT / path).exists(), (page.name, path)


def test_the_serving_dependencies_are_the_packages() -> None:
    """The README's list of what serving installs is pyproject.toml's dependencies."""
    listed = re.search(r"installs only what serving\s+needs \(([^)]*)\)", README)
    assert listed, "the README no longer says what serving installs"
    named = set(re.findall(r"[\w-]+", listed[1])) - {"and", "for", "several", "workers"}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert named == {re.match(r"[\w-]+", dep)[0] for dep in project["dependencies"]}


def test_the_readme_is_a_front_door() -> None:
    """At most 200 lines; its title, a line or two, then the contents list, which links
    every docs page."""
    assert len(README.splitlines()) <= README_LINES
    assert headings(README)[:2] == [headings(README)[0], "Contents"]
    before = README.split("## Contents\n", 1)[0]
    assert len(before.splitlines()) <= 6, "the contents list comes first"
    contents = section("Contents")
    assert {(ROOT / target).resolve() for target in links(contents) if "#" not in target} >= {
        page.resolve() for page in PAGES
    }
    assert len(PAGES) >= 5
    for title in ("Two commands", "Installing as a package", "Trying it", "Configuration"):
        assert f"## {title}\n" in README, title
    first = README.index("## Two commands")
    assert (
        README.index("make run", first)
        < README.index("make test", first)
        < README.index("## Installing as a package")
    )


def test_make_clean_is_said_to_delete_the_database() -> None:
    recipe = re.search(r"^clean:\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and "reporting.sqlite3" in recipe.group(1)
    said = " ".join(README.replace("**", "").split())
    assert re.search(
        r"`make clean`.{0,200}?deletes.{0,200}?the database `reporting\.sqlite3`", said
    )


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_no_test_counts_that_go_stale(page: Path) -> None:
    counts = r"\b\d+ (passed|failed|tests?|files already formatted|source files)\b"
    assert not re.search(counts, read(page))


def test_the_configuration_table_is_the_servers_settings() -> None:
    """One row per setting, with its flag, its variable and its default first."""
    rows = re.findall(r"^\| `(--[\w-]+)` \| `(\w+)` \| (.+) \|$", section("Configuration"), re.M)
    settings = dataclasses.fields(Config)
    assert [(flag, env) for flag, env, _ in rows] == [
        (f"--{item.name.replace('_', '-')}", item.metadata["env"]) for item in settings
    ]
    for (flag, _, default), item in zip(rows, settings, strict=True):
        if item.default in ("", None):
            assert default.startswith("none"), flag
        else:
            shown = str(item.default).lower() if isinstance(item.default, bool) else item.default
            shown = f"{shown:g}" if isinstance(shown, float) else shown
            assert default.startswith(f"`{shown}`"), (flag, default)


def test_the_fixture_example_loads(tmp_path: Path) -> None:
    """The data page's example fixture is a whole, valid fixture: it loads into a new
    database and its employee is there."""
    [example] = blocks(section("Fixture format"), "json")
    fixture = tmp_path / "example.json"
    fixture.write_text(example, encoding="utf-8")
    db = tmp_path / "example.sqlite3"
    read_back = load_files(db, [fixture])
    assert read_back["employees"] == 1 and read_back["section_results"] == 1
    assert query(db, "SELECT first_name, last_name FROM employees") == [("José", "Núñez")]


def bench_page() -> ModuleType:
    """scripts/bench_page.py, imported from its file."""
    spec = importlib.util.spec_from_file_location("bench_page", ROOT / "scripts" / "bench_page.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["bench", "bench-large", "bench-tenth"])
def test_the_benchmark_writes_only_between_the_markers(tmp_path: Path, name: str) -> None:
    """A table written into a copy of the performance page replaces what stood between the
    markers of its benchmark (make bench, make bench-large, make bench-tenth), and every
    other byte of the page stays."""
    writer = bench_page()
    start, end = writer.markers(name)
    original = read(ROOT / "docs" / "performance.md")
    head, rest = original.split(start + "\n")
    old_table, tail = rest.split(end)
    assert old_table.strip()
    page = tmp_path / "performance.md"
    page.write_text(original, encoding="utf-8")
    table = "| scenario | req/s |\n|---|---|\n| (z) a fake row | 1 |\n"
    writer.write_between_markers(page, table, name)
    assert read(page) == f"{head}{start}\n\n{table}\n{end}{tail}"
    writer.write_between_markers(page, "| again |\n", name)  # the markers stay: it repeats
    assert read(page) == f"{head}{start}\n\n| again |\n\n{end}{tail}"
    assert read(ROOT / "docs" / "performance.md") == original


@pytest.mark.parametrize("text", ["no markers", "<!-- bench:end -->\n<!-- bench:start -->\n"])
def test_the_benchmark_refuses_a_page_without_its_markers(tmp_path: Path, text: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match="bench:start"):
        bench_page().write_between_markers(page, "| table |\n")
    assert read(page) == text


@pytest.mark.parametrize(
    ("smoke", "rows", "clean"), [(True, "", True), (False, "g,h", True), (False, "", False)]
)
def test_a_smoke_a_partial_or_a_failed_run_leaves_the_page_alone(
    tmp_path: Path, smoke: bool, rows: str, clean: bool
) -> None:
    page = tmp_path / "performance.md"
    page.write_text(read(ROOT / "docs" / "performance.md"), encoding="utf-8")
    before = read(page)
    assert not bench_page().publish(page, "| x |\n", smoke=smoke, rows=rows, clean=clean)
    assert read(page) == before
    assert bench_page().publish(page, "| x |\n", smoke=False, rows="", clean=True)
    assert "\n| x |\n" in read(page)


def test_the_benchmark_publishes_through_that_rule() -> None:
    """bench.py and bench_large.py hand their own flags to the rule above, whatever the run."""
    for script in ("bench.py", "bench_large.py"):
        source = read(ROOT / "scripts" / script)
        assert "smoke=args.smoke, rows=args.rows, clean=clean" in source
        assert source.count("write_between_markers") == 0


@pytest.mark.system
def test_the_postgresql_setup_steps_serve(tmp_path: Path) -> None:
    """The operations page's setup, run as written by its superuser on a throwaway cluster
    that asks other roles for their password on 127.0.0.1, as Debian's does (libpq's PG*
    variables say where): the role, the database, the URL with its password, and the
    server, which fills the new database from the sample and answers from it."""
    [steps] = blocks(section("Running on PostgreSQL"), "sh")
    require_postgresql()
    with cluster() as superuser:
        asyncio.run(ask_for_passwords(superuser))
        where = urlsplit(superuser)
        script = steps.replace("127.0.0.1:5432", f"127.0.0.1:{where.port}")
        assert script != steps and "PASSWORD '" in script and ":change-me@" in script
        port = free_port()
        env = clean_env(
            PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            PGHOST="127.0.0.1",
            PGPORT=str(where.port),
            PGUSER=str(where.username),
            REPORTING_PORT=str(port),
        )
        ProcessGuard.check()
        with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
            proc = subprocess.Popen(
                ["bash", "-ec", script], cwd=tmp_path, env=env, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip
        try:
            app = AppProcess(proc, f"http://127.0.0.1:{port}", tmp_path / "none")
            assert app.serving(), (tmp_path / "err").read_text()
            url = f"{app.base}/api/companies/v1/campaigns/1/events"
            status, _, body = fetch(url, {"X-API-KEY": KEY_1})
            assert status == 200 and json.loads(body), body
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(GUARD_SECONDS)
        wrong = f"postgresql://reporting:wrong@127.0.0.1:{where.port}/reporting"
        with pytest.raises(asyncpg.InvalidPasswordError):
            asyncio.run(asyncpg.connect(wrong))  # the password was asked for
    assert "Created the PostgreSQL database from sample.json" in (tmp_path / "out").read_text()


async def ask_for_passwords(superuser: str) -> None:
    """Trust the superuser, ask every other role its password (SCRAM) on 127.0.0.1."""
    conn = await asyncpg.connect(superuser)
    try:
        hba = Path(await conn.fetchval("SHOW hba_file"))
        hba.write_text(
            f"host all {urlsplit(superuser).username} 127.0.0.1/32 trust\n"
            "host all all 127.0.0.1/32 scram-sha-256\n",
            encoding="utf-8",
        )
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


@pytest.mark.system
def test_the_reading_role_reads_the_tables_an_upgrade_makes() -> None:
    """The operations page's reading role, made as written once the owner's first load made
    the tables, may still read every table after the owner makes some again, as an
    upgrade does (the stats' tables: the upgrade to version 14)."""
    [grants] = blocks(section("Running on PostgreSQL"), "sql")
    require_postgresql()
    with cluster() as superuser:
        where = urlsplit(superuser)
        url = f"postgresql://{{}}@{where.hostname}:{where.port}/reporting"
        asyncio.run(make_owner(superuser))
        sample_file = str(ROOT / "fixtures" / "sample.json")
        loaded = loader.main(
            [sample_file, "--database-url", url.format("reporting"), "--no-progress"]
        )
        assert loaded == 0
        unreadable = asyncio.run(
            upgrade_as_owner(url.format(where.username), url.format("reporting"), grants)
        )
    assert unreadable == []


async def make_owner(superuser: str) -> None:
    """The page's setup: the role `reporting` and its database."""
    admin = await asyncpg.connect(superuser)
    try:
        await admin.execute("CREATE ROLE reporting LOGIN")
        await admin.execute("CREATE DATABASE reporting OWNER reporting")
    finally:
        await admin.close()


async def upgrade_as_owner(superuser: str, owner: str, grants: str) -> list[str]:
    """Run the page's grants as the superuser, then rebuild the stats' tables as their
    owner; the tables the reading role may not read."""
    admin = await asyncpg.connect(superuser)
    try:
        await admin.execute(grants)
        conn = await asyncpg.connect(owner)
        try:
            async with conn.transaction():
                await rebuild_stats_summaries(conn)
        finally:
            await conn.close()
        rows = await admin.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
            " AND NOT has_table_privilege('reporting_reader', c.oid, 'SELECT')"
        )
    finally:
        await admin.close()
    return sorted(row["relname"] for row in rows)
