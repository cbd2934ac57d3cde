"""contract.md 9 (a load with a progress display) and issue 12 item 2: what a load prints.

``scripts/load_fixtures.py`` shows one progress bar per table (rows and rows/s) when
stderr is a terminal, plain lines per table when it is not, nothing with
``--no-progress``, and ends with one summary line on stdout.
"""

from __future__ import annotations

import fcntl
import json
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


def on_a_terminal(*args: str) -> tuple[str, str]:
    """Run ``python *args`` with stderr on a pseudo-terminal; its stdout and what the
    terminal showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=clean_env(), stdout=subprocess.PIPE, stderr=follower
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
    return proc.communicate()[0].decode(), shown.decode()


def test_a_bar_per_table_on_a_terminal(tmp_path: Path) -> None:
    """stderr on a pseudo-terminal: tqdm bars that redraw in place, with the rate."""
    out, text = on_a_terminal(
        "scripts/load_fixtures.py", str(SAMPLE_FIXTURE), "--db", str(tmp_path / "t.db")
    )
    assert SUMMARY.fullmatch(out.strip())
    assert "\r" in text, "a bar redraws its line"
    for table in ("employees", "campaign_events", "section_results"):
        assert re.search(rf"{table}: .*\d+ rows", text), text
    assert re.search(r"rows/s", text)
    assert " done" not in text, "no plain lines on a terminal"


def test_tiny_tables_count_whole_rows(tmp_path: Path) -> None:
    """One row is ``1 row``, and no count or rate has a fraction (tqdm's own ``1.00``)."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"companies": [{"id": 1, "name": "One"}]}), encoding="utf-8")
    out, text = on_a_terminal("scripts/load_fixtures.py", str(one), "--db", str(tmp_path / "o.db"))
    assert "companies: 1 row " in text, text
    assert not re.search(r"\d\.\d", text), text
    assert out.startswith("loaded 1 record into "), out
    assert out.strip().endswith("; 0 events new or changed, 0 targets implied by events"), out
    plain = run_python("scripts/load_fixtures.py", str(one), "--db", str(tmp_path / "p.db"))
    assert re.match(r"companies: 1 row in [\d.]+ s", plain.stderr), plain.stderr


def test_one_event_is_counted_in_the_singular(tmp_path: Path) -> None:
    sample_copy = tmp_path / "s.db"
    assert run_python("scripts/load_fixtures.py", str(SAMPLE_FIXTURE), "--db", str(sample_copy),
                      "--no-progress").returncode == 0  # fmt: skip
    event = {"id": 990001, "campaign_id": 1, "employee_id": 1, "type": "open",
             "timestamp": "2025-06-01T10:00:00Z", "with_captcha": False}  # fmt: skip
    one = tmp_path / "event.json"
    one.write_text(json.dumps({"campaign_events": [event]}), encoding="utf-8")
    done = run_python(
        "scripts/load_fixtures.py", str(one), "--db", str(sample_copy), "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("loaded 1 record into "), done.stdout
    assert "; 1 event new or changed, 0 targets implied by events" in done.stdout


def test_names_from_the_file_are_escaped_on_the_terminal(tmp_path: Path) -> None:
    """A table's or a field's name is the file's text: an escape sequence in it (here one
    that retitles the terminal, one that clears it) or a line break is shown escaped."""
    fixture = tmp_path / "hostile.json"
    fixture.write_text(
        json.dumps({"companies": [{"id": 1, "name": "a", "x\x1b[2J\ny": 1}], "t\x1b]0;t\x07": []})
    )
    done = run_python("scripts/load_fixtures.py", str(fixture), "--db", str(tmp_path / "a.db"))
    assert done.returncode == 1, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "companies[0].x\\x1b[2J\\ny: Unknown field." in done.stderr
    assert "t\\x1b]0;t\\x07: Unknown field." in done.stderr
    assert re.search(r"^t\\x1b\]0;t\\x07: 0 rows in ", done.stderr, re.M), done.stderr


def test_unknown_fields_are_named_in_the_record_order_whatever_the_hash_seed(
    tmp_path: Path,
) -> None:
    """Python orders a set of strings differently in each process (PYTHONHASHSEED), and
    marshmallow finds unknown fields through one: the refusal names them as the record
    gives them, byte for byte the same in every process."""
    fixture = tmp_path / "unknown.json"
    fields = ["zeta", "alpha", "mid", "beta", "gamma"]
    fixture.write_text(json.dumps({"companies": [{"id": 1, "name": "a", **dict.fromkeys(fields)}]}))
    args = ("scripts/load_fixtures.py", str(fixture), "--db", str(tmp_path / "a.db"))
    outputs: set[str] = set()
    for seed in ("0", "1", "2"):
        done = run_python(*args, "--no-progress", env=clean_env(PYTHONHASHSEED=seed))
        assert done.returncode == 1, done.stderr
        outputs.add(done.stderr)
    assert len(outputs) == 1, outputs  # one answer, whichever process gave it
    [stderr] = outputs
    named = re.findall(r"companies\[0\]\.(\w+): Unknown field\.", stderr)
    assert named == fields, stderr
