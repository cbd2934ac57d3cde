"""The interface page's two feed collectors, run as written against a live server (contract.md 13).

Each runs in a fresh directory against ``python -m app`` over a copy of the sample data;
it must end up with every event of company 1 in its file. Then the real loader writes
new events (with ids below the ones already read) and changes others while the server
runs, and the collector, run again, appends exactly those, each in its new state: the
last line of each id is the event as the feed gives it now.
"""

from __future__ import annotations

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

from app.tools.loader import load_files

from .support.docs import blocks, section
from .support.factories import KEY_1, make_sample_db, sample
from .support.servers import GUARD_SECONDS, Launcher, ProcessGuard, clean_env, fetch

pytestmark = pytest.mark.system  # a server process and the collectors' own processes

BASE = "http://127.0.0.1:8080"


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
    lines = (directory / "events.ndjson").read_text(encoding="utf-8").splitlines()
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
    (work / "collector.py").write_text(block("python").replace(BASE, base), encoding="utf-8")

    def run() -> None:
        ProcessGuard.check()
        done = subprocess.run(
            [sys.executable, "collector.py", "--once"],
            cwd=work,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=GUARD_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr

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
