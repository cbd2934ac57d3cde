"""contract.md 9 (a load with a progress display) and issue 12 item 2: what a load prints.

``scripts/load_fixtures.py`` shows one progress bar per table (rows and rows/s) when
stderr is a terminal, plain lines per table when it is not, nothing with
``--no-progress``, and ends with one summary line on stdout.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from app.tools.loader import SAMPLE_FIXTURE

from .support.factories import sample
from .support.servers import GUARD_SECONDS, ROOT, clean_env, run_python

pytestmark = pytest.mark.system  # every test here runs the command line as a process

SUMMARY = re.compile(
    r"loaded ([\d,]+) records into \S+ in [\d.]+ s \([\d,]+ records/s\);"
    r" ([\d,]+) events new or changed, ([\d,]+) targets implied by events"
)


def records_in_sample() -> int:
    return sum(len(rows) for rows in sample().values())


def test_plain_lines_per_table_when_not_a_terminal(tmp_path: Path) -> None:
    done = run_python(
        "scripts/load_fixtures.py", str(SAMPLE_FIXTURE), "--db", str(tmp_path / "a.db")
    )
    assert done.returncode == 0, done.stderr
    found = SUMMARY.fullmatch(done.stdout.strip())
    assert found, done.stdout
    assert int(found[1].replace(",", "")) == records_in_sample()
    assert int(found[2].replace(",", "")) == len(sample()["campaign_events"])
    listed = {(t["campaign_id"], t["employee_id"]) for t in sample()["campaign_targets"]}
    implied = {(e["campaign_id"], e["employee_id"]) for e in sample()["campaign_events"]} - listed
    assert int(found[3]) == len(implied)
    events = len(sample()["campaign_events"])
    assert re.search(rf"^campaign_events: {events} rows in [\d.]+ s \([\d,]+ rows/s\) done$",
                     done.stderr, re.M), done.stderr  # fmt: skip
    assert re.search(rf"^check and write campaign_events: {events} rows in ", done.stderr, re.M)
    assert "\r" not in done.stderr
    quiet = run_python(
        "scripts/load_fixtures.py",
        str(SAMPLE_FIXTURE),
        "--db",
        str(tmp_path / "b.db"),
        "--no-progress",
    )
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert SUMMARY.fullmatch(quiet.stdout.strip())


def test_a_bar_per_table_on_a_terminal(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: tqdm bars that redraw in place, with the rate."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    command = [
        sys.executable,
        "scripts/load_fixtures.py",
        str(SAMPLE_FIXTURE),
        "--db",
        str(tmp_path / "t.db"),
    ]
    proc = subprocess.Popen(
        command, cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=follower
    )
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closes with the process
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.wait(timeout=GUARD_SECONDS) == 0
    assert SUMMARY.fullmatch(proc.communicate()[0].decode().strip())
    text = shown.decode()
    assert "\r" in text, "a bar redraws its line"
    for table in ("employees", "campaign_events", "section_results"):
        assert re.search(rf"{table}: .*\d+ rows", text), text
    assert re.search(r"rows/s", text)
    assert " done" not in text, "no plain lines on a terminal"
