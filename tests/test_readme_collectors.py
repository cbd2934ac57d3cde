"""The interface page's two feed collectors, run as written against a live server (contract.md 13).

Each runs in a fresh directory against ``python -m app`` over a copy of the sample data;
it must end up with every event of company 1 in its file. Then the real loader writes
new events (with ids below the ones already read) and changes others while the server
runs, and the collector, run again, appends exactly those, each in its new state: the
last line of each id is the event as the feed gives it now.

At scale, each reads a generated company of 60,000 events unattended from a server at
the default rate limits: it meets 429s, waits as each ``Retry-After`` says (no 429 follows
another), prints nothing on stderr and stores every event once. The Python collector
counts a page's records by line feeds only, so a U+2028 inside a record does not make a
short page look full.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.tools.generator import Sizes, generate, generated_key
from app.tools.loader import load_files

from .support.docs import blocks, section
from .support.factories import KEY_1, make_sample_db, query, sample
from .support.servers import GUARD_SECONDS, AppProcess, Launcher, ProcessGuard, clean_env, fetch

pytestmark = pytest.mark.system  # a server process and the collectors' own processes

BASE = "http://127.0.0.1:8080"
FEED_PATH = "path=/api/companies/v1/events "  # the feed's access lines
TENANT_EVENTS = 60_000
SEED = 22


def block(lang: str) -> str:
    """The one fenced block of ``lang`` in the docs' section on the feed."""
    [code] = blocks(section("Incremental sync and exports"), lang)
    return str(code)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A live server over a fresh copy of the sample data, and that database."""
    db = make_sample_db(tmp_path)
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(db, "--rate-burst", "1000", "--rate-per-second", "1000")
        yield app.base, db


def feed_now(base: str) -> dict[int, Any]:
    """Every event of company 1 as the feed gives it now (JSON, followed to the end)."""
    events: dict[int, Any] = {}
    url = f"{base}/api/companies/v1/events?limit=1000"
    while True:
        status, headers, body = fetch(url, {"X-API-KEY": KEY_1})
        assert status == 200, body
        page = json.loads(body)
        events |= {e["id"]: e for e in page}
        if not page:
            return events
        url = f"{base}{headers['Link'][1:].split('>')[0]}"


def collected(directory: Path) -> list[dict[str, Any]]:
    lines = (directory / "events.ndjson").read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(line) for line in lines]


def change_the_data(db: Path, directory: Path) -> set[int]:
    """New events below and above the ids already read, and changed ones; their ids."""
    taken = {e["id"] for e in sample()["campaign_events"]}
    free_low = [i for i in range(1, 100) if i not in taken][:3]
    mine = [e for e in sample()["campaign_events"] if e["campaign_id"] == 1][:4]
    new = [
        dict(mine[0], id=event_id, type="report", timestamp="2026-04-01T10:00:00Z")
        for event_id in [*free_low, max(taken) + 1]
    ]
    changed = [dict(e, type="fail", ip="203.0.113.99") for e in mine]
    fixture = directory / "more.json"
    fixture.write_text(json.dumps({"campaign_events": new + changed}), encoding="utf-8")
    load_files(db, [fixture])
    return {e["id"] for e in new + changed}


def assert_caught_up(directory: Path, base: str, before: int, written: set[int]) -> None:
    rows = collected(directory)
    assert sorted(r["id"] for r in rows[before:]) == sorted(written)
    latest = {r["id"]: r for r in rows}
    assert latest == feed_now(base)


def test_the_python_collector(served: tuple[str, Path], tmp_path: Path) -> None:
    base, db = served
    work = tmp_path / "python"
    work.mkdir()
    script = block("python").replace(BASE, base)

    def run() -> None:
        run_python_collector(work, script)

    run()
    first = collected(work)
    assert {r["id"]: r for r in first} == feed_now(base)
    assert len(first) == len(feed_now(base))  # each exactly once
    run()  # caught up: nothing new, the cursor kept
    assert len(collected(work)) == len(first)
    written = change_the_data(db, tmp_path)
    run()
    assert_caught_up(work, base, len(first), written)


def test_the_shell_collector(served: tuple[str, Path], tmp_path: Path) -> None:
    """The loop runs until it sleeps; it is ended by its process group id."""
    base, db = served
    work = tmp_path / "shell"
    work.mkdir()
    script = block("sh").replace(BASE, base)

    def run_until(count: int) -> None:
        ProcessGuard.check()
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=work, env=clean_env(), start_new_session=True
        )
        try:
            deadline = time.monotonic() + GUARD_SECONDS
            while not (work / "events.ndjson").exists() or len(collected(work)) < count:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)  # would it write more than it should?
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(GUARD_SECONDS)

    everything = feed_now(base)
    run_until(len(everything))
    first = collected(work)
    assert len(first) == len(everything) and {r["id"]: r for r in first} == everything
    written = change_the_data(db, tmp_path)
    run_until(len(first) + len(written))
    assert_caught_up(work, base, len(first), written)


def run_python_collector(work: Path, script: str) -> None:
    """``python collector.py --once`` in ``work`` to its end; it must exit 0, silent."""
    (work / "collector.py").write_text(script, encoding="utf-8")
    ProcessGuard.check()
    done = subprocess.run(
        [sys.executable, "collector.py", "--once"],
        cwd=work,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS * 5,
        check=False,
    )
    assert done.returncode == 0 and not done.stderr, done.stderr


def feed_statuses(app: AppProcess) -> list[int]:
    """The status of each feed request the stopped server logged, in order."""
    lines = app.output_text()[1].splitlines()
    return [int(line.split(" status=")[1].split()[0]) for line in lines if FEED_PATH in line]


def events_of(db: Path, company: int) -> list[int]:
    """The ids of a company's events in the database."""
    sql = "SELECT e.id FROM campaign_events e JOIN campaigns c ON c.id = e.campaign_id"
    return [row[0] for row in query(db, f"{sql} WHERE c.company_id = ?", company)]


def test_a_line_separator_inside_a_record_is_not_a_record(tmp_path: Path) -> None:
    """A page one record short of the limit, one record holding U+2028: one request."""
    db = make_sample_db(tmp_path)
    [event] = [e for e in sample()["campaign_events"] if e["campaign_id"] == 1][:1]
    fixture = tmp_path / "separator.json"
    changed = dict(event, user_agent="Mozilla/5.0\u2028(X11)")
    fixture.write_text(json.dumps({"campaign_events": [changed]}), encoding="utf-8")
    load_files(db, [fixture])
    count = len(events_of(db, 1))
    code = block("python")
    assert code.count("1000") == 2  # the limit asked for, and the one a full page holds
    work = tmp_path / "python"
    work.mkdir()
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(db)
        script = code.replace(BASE, app.base).replace("1000", str(count + 1))
        run_python_collector(work, script)
    assert feed_statuses(app) == [200]  # the short page said: caught up
    text = (work / "events.ndjson").read_text(encoding="utf-8")
    assert text.count("\n") == count and text.count("\u2028") == 1
    assert sorted(r["id"] for r in collected(work)) == sorted(events_of(db, 1))


@pytest.fixture(scope="module")
def tenant(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated company of 60,000 events, alone in its database (in few campaigns:
    fewer summaries for the generator to fill)."""
    db = tmp_path_factory.mktemp("tenant") / "tenant.sqlite3"
    sizes = Sizes(companies=1, employees=500, campaigns=12, events_per_campaign=5000,
                  courses=1, inscriptions=1)  # fmt: skip
    generate(db, sizes, SEED)
    assert len(events_of(db, 1)) == TENANT_EVENTS
    return db


def for_the_tenant(code: str, base: str) -> str:
    """A docs snippet pointed at ``base`` with the generated company's key."""
    assert KEY_1 in code
    return code.replace(BASE, base).replace(KEY_1, generated_key(1, SEED))


def assert_waited_as_told(app: AppProcess) -> None:
    """Each 429 the collector met was followed by a request that passed (no 429 after a
    429): it waited as ``Retry-After`` said, no less. Whether a 429 comes at the defaults
    depends on how fast the machine serves a page."""
    statuses = feed_statuses(app)
    assert set(statuses) <= {200, 429} and 200 in statuses
    assert all((a, b) != (429, 429) for a, b in itertools.pairwise(statuses)), statuses


def assert_every_event_once(work: Path, db: Path) -> None:
    ids = [r["id"] for r in collected(work)]
    assert len(ids) == TENANT_EVENTS and sorted(ids) == sorted(events_of(db, 1))


def test_the_python_collector_reads_a_large_tenant_at_the_default_limits(
    tenant: Path, tmp_path: Path
) -> None:
    work = tmp_path / "python"
    work.mkdir()
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(tenant)
        run_python_collector(work, for_the_tenant(block("python"), app.base))
    assert_waited_as_told(app)
    assert_every_event_once(work, tenant)


def test_the_shell_collector_reads_a_large_tenant_at_the_default_limits(
    tenant: Path, tmp_path: Path
) -> None:
    work = tmp_path / "shell"
    work.mkdir()
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(tenant)
        run_shell_collector(work, for_the_tenant(block("sh"), app.base), TENANT_EVENTS)
    assert_waited_as_told(app)
    assert_every_event_once(work, tenant)


@pytest.mark.parametrize("lang", ["python", "sh"])
def test_a_collector_waits_as_each_429_says(lang: str, tmp_path: Path) -> None:
    """A bucket of one token refilled each second: every second request meets a 429."""
    db = make_sample_db(tmp_path)
    count = len(events_of(db, 1))
    code = block(lang)
    assert code.count("1000") == 2  # the limit asked for, and the one a full page holds
    work = tmp_path / lang
    work.mkdir()
    with Launcher(tmp_path) as launcher:
        app = launcher.serve(db, "--rate-burst", "1", "--rate-per-second", "1")
        script = code.replace(BASE, app.base).replace("1000", "100")
        if lang == "python":
            run_python_collector(work, script)
        else:
            run_shell_collector(work, script, count)
    assert 429 in feed_statuses(app)
    assert_waited_as_told(app)
    assert sorted(r["id"] for r in collected(work)) == sorted(events_of(db, 1))


def run_shell_collector(work: Path, script: str, count: int) -> None:
    """The shell loop in ``work`` until its file holds ``count`` events, then ended by its
    process group id; curl says nothing on stderr meanwhile."""
    ProcessGuard.check()
    with open(work / "collector.err", "wb") as err:
        proc = subprocess.Popen(
            ["bash", "-c", script], cwd=work, env=clean_env(), stderr=err,
            start_new_session=True,
        )  # fmt: skip
    try:
        wait_for_lines(work / "events.ndjson", count, proc)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(GUARD_SECONDS)
    assert (work / "collector.err").read_bytes() == b""


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen[bytes]) -> None:
    """Until ``path`` holds ``count`` lines, reading only what was appended since."""
    seen, offset = 0, 0
    while seen < count:
        assert proc.poll() is None, "the collector stopped"
        if path.exists():
            with path.open("rb") as file:
                file.seek(offset)
                more = file.read()
            offset += len(more)
            seen += more.count(b"\n")
        time.sleep(0.2)
