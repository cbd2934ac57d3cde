"""The README, followed as a new user would (issue 12 item 7).

Its `curl` examples run against a real server on the sample data and each returns
records; its Python client is generated from the live OpenAPI document and its code runs
and prints exactly the sample's records; its benchmark-database commands serve; it states
one revocation delay, the key cache's (contract.md 1 promises at most 5 s, checked on a
real server with the real key tool); it links only to what a clone has, says what
`make clean` deletes, and quotes no test counts that go stale.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from app.web.auth import CACHE_SECONDS

from .support.factories import by_id, make_sample_db, sample
from .support.servers import GUARD_SECONDS, ROOT, Launcher, clean_env, fetch, run_python

README = (ROOT / "README.md").read_text(encoding="utf-8")
BASE = "http://127.0.0.1:8080"  # where the README's examples point
BIN = Path(sys.executable).parent


def section(title: str) -> str:
    """The text of one `## title` section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match, title
    return match.group(1)


def blocks(text: str, lang: str) -> list[str]:
    """The fenced code blocks of one language in `text`."""
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


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
def test_the_python_client_example_runs(live: str, tmp_path: Path) -> None:
    """Generate the client as the README says, run its code, compare with the sample."""
    text = section("Python client")
    [shell] = blocks(text, "sh")
    [generate] = [line for line in shell.splitlines() if " generate " in line]
    words = shlex.split(generate.replace(BASE, live))
    env = clean_env(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
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
    [code] = blocks(text, "python")
    (tmp_path / "example.py").write_text(code.replace(BASE, live), encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == expected_client_output()


def expected_client_output() -> list[str]:
    """What the README's client code prints, computed from fixtures/sample.json."""
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
    """The README's two commands, on a tiny set made by the generator at the same path."""
    text = section("Performance")
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
    """Every sentence on revocation states the key cache's delay, and no other figure."""
    sentences = re.split(r"(?<=\.)\s+", " ".join(README.split()))
    about = [s for s in sentences if re.search(r"revoked key", s, re.I)]
    figures = {float(n) for s in about for n in re.findall(r"([0-9.]+) seconds?", s)}
    assert len(about) >= 2 and figures == {CACHE_SECONDS}, about
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


def test_links_point_at_what_a_clone_has() -> None:
    assert "../" not in README
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
        for title in re.findall(r"^#+ (.+)$", README, re.M)
    }
    for target in re.findall(r"\]\(([^)]+)\)", README):
        if target.startswith("#"):
            assert target[1:] in anchors, target
        elif not re.match(r"https?://", target):
            assert (ROOT / target).exists(), target


def test_make_clean_is_said_to_delete_the_database() -> None:
    recipe = re.search(r"^clean:\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and "reporting.sqlite3" in recipe.group(1)
    said = " ".join(README.replace("**", "").split())
    assert re.search(
        r"`make clean`.{0,200}?deletes.{0,200}?the database `reporting\.sqlite3`", said
    )


def test_no_test_counts_that_go_stale() -> None:
    counts = r"\b\d+ (passed|failed|tests?|files already formatted|source files)\b"
    assert not re.search(counts, README)
