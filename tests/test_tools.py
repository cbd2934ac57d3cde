"""House rule 3 for the offline tools (issue 10 item 1): every tool error is one clear line.

The loader, the key tool and the generator each have a ``main(argv)`` behind one wrapper
(app/tools/cli.py): an expected error (a refusal, a database that is missing, locked or
full, an OS error) is one line on stderr and exit 1; Ctrl-C is one line and exit 130;
a failed write changes nothing. scripts/ holds thin wrappers over those mains.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from app.data.schema import (
    SCHEMA_VERSION,
    DatabaseError,
    Writer,
    check_readable,
    connect_writer,
    write_transaction,
)
from app.data.stats_summary import HOUR_HISTOGRAMS
from app.tools import export, generator, keytool, loader, reclassify, swap, webhooks
from app.tools.cli import run_tool

from .support.factories import (
    dump_tables,
    generated_events,
    next_event_id,
    older_copy,
    query,
    sample,
    version_6_copy,
)
from .support.servers import GUARD_SECONDS, ROOT, clean_env, run_python, start_python, stop
from .support.stores import fetch_all, fresh_database

SAMPLE = str(ROOT / "fixtures" / "sample.json")
SIZES = ["--companies", "2", "--employees", "40", "--campaigns", "4"]
SIZES += ["--events-per-campaign", "10", "--courses", "2", "--inscriptions", "20", "--seed", "1"]
NOWHERE = "/nonexistent/dir/x.sqlite3"


def one_line(err: str) -> str:
    """The single line a refused tool printed (and no traceback)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("main", "argv", "prefix"),
    [
        (loader.main, [SAMPLE, "--db", NOWHERE], "load refused, database unchanged: "),
        (keytool.main, ["--db", NOWHERE, "list"], "error: "),
        (generator.main, ["--db", NOWHERE, *SIZES, "--no-progress"], "generation refused"),
    ],
    ids=["loader", "keytool", "generator"],
)
def test_every_tool_refuses_in_one_line(
    main: object, argv: list[str], prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert callable(main)
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert one_line(err).startswith(prefix) and out == ""
    assert not Path(NOWHERE).parent.exists()


TOO_LARGE = str(2**63)  # past the largest id a database holds


@pytest.mark.system
@pytest.mark.parametrize(
    "argv",
    [
        ["scripts/manage_keys.py", "create", "--company", TOO_LARGE, "--label", "x"],
        ["scripts/manage_keys.py", "create", "--partner", TOO_LARGE, "--label", "x"],
        ["scripts/manage_keys.py", "revoke", TOO_LARGE],
        ["scripts/manage_keys.py", "rotate", TOO_LARGE],
        ["scripts/manage_keys.py", "partner", "add-company", TOO_LARGE, "1"],
        ["scripts/reclassify.py", "--company", TOO_LARGE],
        ["scripts/webhooks.py", "disable", TOO_LARGE],
        ["scripts/webhooks.py", "create", "--company", TOO_LARGE, "--url", "https://a.example/",
         "--events", "click", "--label", "x"],
        *(
            ["scripts/webhooks.py", "create", "--company", "1", "--url", url, "--events",
             "click", "--label", "x"]
            for url in ("https://[::1", "https://a.example:99999/", "https://a.example:x/",
                        "https://a.example/a b", "https://a.example/a\x01b",
                        "https://a.example/\udcff")  # a byte of no UTF-8: was a traceback
        ),
        *(
            ["scripts/webhooks.py", "create", "--company", "1", "--url", "https://a.example/",
             "--events", "click", "--label", label]
            for label in ("two\nlines", "x" * 501)
        ),
        ["scripts/import_gophish.py", "{tmp}/export.json", "--company", TOO_LARGE],
        ["scripts/export_fixtures.py", "{tmp}/out.json", "--company", TOO_LARGE],
    ],
)  # fmt: skip
def test_an_argument_out_of_reach_is_one_line(
    argv: list[str], sample_db: Path, tmp_path: Path
) -> None:
    """An id past what a database holds, or a URL that cannot be read, is refused before
    anything is read or written: one line, a non-zero exit, the file unchanged."""
    (tmp_path / "export.json").write_text("[]", encoding="utf-8")
    script, *rest = (arg.replace("{tmp}", str(tmp_path)) for arg in argv)
    before = sample_db.read_bytes()
    done = run_python(script, "--db", str(sample_db), *rest)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sample_db.read_bytes() == before


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (loader.main, [str(ROOT / "tests" / "missing.json"), "--no-progress"]),
        (generator.main, [*SIZES[:-2], "--seed", "x", "--no-progress"]),
        (generator.main, [*SIZES[2:], "--companies", "0", "--seed", "1", "--no-progress"]),
    ],
    ids=["loader", "generator-usage", "generator-refused"],
)
def test_a_refused_write_into_a_new_file_leaves_no_file(
    main: Callable[[Sequence[str]], int], argv: list[str], tmp_path: Path
) -> None:
    """Only a write that succeeds makes the database file it was given."""
    db = tmp_path / "new.sqlite3"
    try:
        assert main([*argv, "--db", str(db)]) != 0
    except SystemExit as usage:  # argparse's own exit
        assert usage.code == 2
    assert list(tmp_path.iterdir()) == []
    assert loader.main([SAMPLE, "--db", str(db), "--no-progress"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["new.sqlite3"]
    assert query(db, "SELECT count(*) FROM companies") == [(2,)]


def test_a_refused_load_into_an_empty_file_gives_it_no_tables(tmp_path: Path) -> None:
    """The tables used to be made (and committed) before the load's own transaction: a
    refused load turned an empty file, which the server refuses, into an empty database,
    which it serves. They come with the load's rows now, or not at all."""
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"teams": [{"id": 1, "company_id": 99, "name": "x"}]}))
    assert loader.main([str(bad), "--db", str(empty), "--no-progress"]) == 1
    assert query(empty, "SELECT count(*) FROM sqlite_master") == [(0,)]
    assert query(empty, "PRAGMA user_version") == [(0,)]
    with pytest.raises(DatabaseError, match="holds no database of this service"):
        check_readable(empty)
    assert loader.main([SAMPLE, "--db", str(empty), "--no-progress"]) == 0
    assert query(empty, "SELECT count(*) FROM companies") == [(2,)]


@pytest.mark.system
@pytest.mark.parametrize("ca_file", ["{tmp}/missing.pem", "{tmp}/not.pem"])
def test_a_certificate_file_that_cannot_be_used_is_named(
    ca_file: str, sample_db: Path, tmp_path: Path
) -> None:
    (tmp_path / "not.pem").write_text("no certificate here", encoding="utf-8")
    given = ca_file.replace("{tmp}", str(tmp_path))
    done = run_python("scripts/webhooks.py", "--db", str(sample_db), "run", "--ca-file", given)
    assert done.returncode == 1
    assert one_line(done.stderr).startswith(f"error: --ca-file {given}: ")


@pytest.mark.system
@pytest.mark.parametrize(
    "argv",
    [
        ["scripts/manage_keys.py", "create", "--company", "1", "--label", "x"],
        ["scripts/reclassify.py"],
        ["scripts/webhooks.py", "create", "--company", "1", "--url", "https://a.example/",
         "--events", "click", "--label", "x"],
        ["scripts/webhooks.py", "run"],
    ],
)  # fmt: skip
@pytest.mark.parametrize("header", [False, True], ids=["no-byte", "header-only"])
def test_a_tool_that_needs_a_database_leaves_an_empty_file_empty(
    argv: list[str], header: bool, tmp_path: Path
) -> None:
    """An empty file is no database yet: refused in one line, not given the tables. So is
    a file with SQLite's header and no tables, as a refused load into an empty file
    leaves it (it switched the file to WAL): the key tool used to make the tables."""
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    if header:
        conn = sqlite3.connect(empty)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    size = empty.stat().st_size
    done = run_python(argv[0], "--db", str(empty), *argv[1:])
    assert done.returncode == 1, done.stderr
    assert "is empty" in one_line(done.stderr)
    assert empty.stat().st_size == size
    assert query(empty, "SELECT count(*) FROM sqlite_master") == [(0,)]


def test_a_locked_database_is_one_line_after_a_bounded_wait(
    sample_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dump_tables(sample_db)
    holder = sqlite3.connect(sample_db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock throughout
        code = keytool.main(["--db", str(sample_db), "create", "--company", "1", "--label", "x"])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert code == 1
    line = one_line(capsys.readouterr().err)
    assert "locked by another writer" in line
    assert dump_tables(sample_db) == before


def fill(conn: sqlite3.Connection) -> None:
    """Write until the database may grow no more (max_page_count: SQLite's own SQLITE_FULL)."""
    conn.execute("PRAGMA max_page_count = 64")
    for _ in range(1000):
        conn.execute("INSERT INTO meta (key, value) VALUES (hex(randomblob(8)), zeroblob(4000))")


def test_a_full_database_names_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def write_too_much(argv: Sequence[str] | None) -> int:
        conn = connect_writer(tmp_path / "full.sqlite3")
        try:
            with write_transaction(conn):
                fill(conn)
        finally:
            conn.close()
        return 0

    assert run_tool(write_too_much, [], "load refused, database unchanged") == 1
    line = one_line(capsys.readouterr().err)
    assert line == "load refused, database unchanged: database: database or disk is full"


def test_a_failed_rollback_does_not_hide_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def rollback_blindly(argv: Sequence[str] | None) -> int:
        conn = sqlite3.connect(tmp_path / "full.sqlite3", isolation_level=None)
        conn.execute("CREATE TABLE meta (key TEXT, value BLOB)")
        conn.execute("BEGIN IMMEDIATE")
        try:
            fill(conn)
        except sqlite3.Error:
            # SQLITE_FULL already rolled back: this raises "cannot rollback" over the cause.
            conn.execute("ROLLBACK")
            raise
        return 0

    assert run_tool(rollback_blindly, [], "error") == 1
    line = one_line(capsys.readouterr().err)
    assert line == "error: database: database or disk is full"


@pytest.mark.system
@pytest.mark.parametrize(
    ("script", "argv", "prefix"),
    [
        ("scripts/load_fixtures.py", [SAMPLE, "--db", NOWHERE], "load refused"),
        ("scripts/manage_keys.py", ["--db", NOWHERE, "list"], "error: "),
        ("scripts/generate_fixtures.py", ["--db", NOWHERE, *SIZES], "generation refused"),
        ("scripts/reclassify.py", ["--db", NOWHERE], "reclassify refused"),
    ],
)
def test_scripts_are_the_tools(script: str, argv: list[str], prefix: str) -> None:
    done = run_python(script, *argv)
    assert done.returncode == 1
    assert one_line(done.stderr).startswith(prefix)
    assert done.stdout == ""


@pytest.mark.system
@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_not_a_refusal(tmp_path: Path) -> None:
    """The load was made; only its report line failed (a full disk): saying the database
    is unchanged would be false."""
    db = tmp_path / "x.sqlite3"
    with open("/dev/full", "w") as full:
        proc = start_python(
            "scripts/load_fixtures.py", SAMPLE, "--db", str(db), "--no-progress",
            stdout=full, stderr=subprocess.PIPE,
        )  # fmt: skip
        _, err = proc.communicate(timeout=GUARD_SECONDS)
    assert proc.returncode == 1
    assert err.decode().strip() == (
        "done, but its report could not be written: No space left on device"
    )
    assert query(db, "SELECT count(*) FROM companies") == [(len(sample()["companies"]),)]


def close_stdout() -> None:
    """In the child before exec: no stdout at all, as a shell's ``tool >&-`` starts it."""
    os.close(1)


@pytest.mark.system
def test_a_tool_started_without_stdout_says_so_in_one_line(tmp_path: Path) -> None:
    """Python gives such a tool no sys.stdout: the load is made and its report is lost,
    and a usage error keeps its exit code 2 (both were tracebacks, exit 1)."""
    db = tmp_path / "x.sqlite3"
    runs = {}
    for name, argv in {"load": [SAMPLE, "--db", str(db)], "usage": ["--bogus"]}.items():
        proc = start_python(
            "scripts/load_fixtures.py", *argv, "--no-progress",
            stderr=subprocess.PIPE, preexec_fn=close_stdout,
        )  # fmt: skip
        _, err = proc.communicate(timeout=GUARD_SECONDS)
        runs[name] = proc.returncode, err.decode()
    assert runs["load"] == (1, "done, but its report could not be written: stdout is closed\n")
    assert query(db, "SELECT count(*) FROM companies") == [(len(sample()["companies"]),)]
    code, err = runs["usage"]
    assert code == 2
    assert err.startswith("load_fixtures.py: error: ") and err.count("\n") == 1


def ignore_sigint() -> None:
    """In the child before exec: SIGINT ignored, as a shell's ``tool &`` without job control."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def block_sigint() -> None:
    """In the child before exec: SIGINT blocked, as a parent thread's mask passes it on."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


STOPS = {  # the signal, how the child inherits it, the exit code and the last line's end
    "int": (signal.SIGINT, None, 130, "interrupted"),
    "int-ignored": (signal.SIGINT, ignore_sigint, 130, "interrupted"),
    "int-blocked": (signal.SIGINT, block_sigint, 130, "interrupted"),
    "term": (signal.SIGTERM, None, 143, "stopped by SIGTERM"),
}


@pytest.mark.system
@pytest.mark.parametrize(("signum", "inherited", "code", "why"), STOPS.values(), ids=STOPS)
def test_a_stopped_write_is_one_line_and_writes_nothing(
    tmp_path: Path, signum: int, inherited: Callable[[], None] | None, code: int, why: str
) -> None:
    """Ctrl-C exits 130, also when the generator inherits SIGINT ignored or blocked (issue
    21 item 8: it then ran to the end and exited 0); SIGTERM stops it the same way, 143
    (it left the new file it was making behind)."""
    db = tmp_path / "gen.sqlite3"
    big = ["--companies", "2", "--employees", "20000", "--campaigns", "100"]
    big += ["--events-per-campaign", "5000", "--courses", "10", "--inscriptions", "50000"]
    proc = start_python(
        "scripts/generate_fixtures.py", "--db", str(db), *big, "--seed", "1",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=inherited,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        # The progress bar's first bytes: the write transaction is open.
        ready, _, _ = select.select([proc.stderr], [], [], GUARD_SECONDS)
        assert ready and proc.stderr.read(1), "the generator never started writing"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=GUARD_SECONDS)
    finally:
        stop(proc)
    assert proc.returncode == code, err
    text = err.decode()
    assert "Traceback" not in text
    assert text.strip().splitlines()[-1].endswith(f"generation refused, database unchanged: {why}")
    assert list(tmp_path.iterdir()) == []  # the new file it was making is gone
    assert out == b""


# Run in a child: the stop comes while the tool imports its database driver, as a tool's
# first ~0.3 s; then the tool runs as the console script ("entry") or the script does.
STOP_WHILE_IMPORTING = """
import os, runpy, signal, sys, tomllib

class StopWhileImporting:
    def find_spec(self, name, path=None, target=None):
        if name == "asyncpg":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), {signum})

sys.meta_path.insert(0, StopWhileImporting())
sys.argv = ["scripts/load_fixtures.py", "fixtures/sample.json", "--db", {db!r}, "--no-progress"]
if {entry!r} == "script":
    runpy.run_path(sys.argv[0], run_name="__main__")
with open("pyproject.toml", "rb") as file:
    module, name = tomllib.load(file)["project"]["scripts"]["reporting-load"].split(":")
sys.exit(getattr(__import__(module, fromlist=[name]), name)())
"""


@pytest.mark.system
@pytest.mark.parametrize("entry", ["script", "console-script"])
@pytest.mark.parametrize(("signum", "inherited", "code", "why"), STOPS.values(), ids=STOPS)
def test_a_stop_while_the_tool_is_still_importing_is_not_lost(
    tmp_path: Path,
    entry: str,
    signum: int,
    inherited: Callable[[], None] | None,
    code: int,
    why: str,
) -> None:
    """A stop in a tool's first ~0.3 s was lost with SIGINT inherited ignored (the load
    ran to the end, exit 0) and was a traceback otherwise: now it is held until the tool
    can act on it, then one line and 130 or 143, nothing written."""
    db = tmp_path / "x.sqlite3"
    child = STOP_WHILE_IMPORTING.format(signum=int(signum), db=str(db), entry=entry)
    proc = start_python(
        "-c", child, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=inherited
    )
    try:
        out, err = proc.communicate(timeout=GUARD_SECONDS)
    finally:
        stop(proc)
    assert (proc.returncode, out, err.decode()) == (
        code,
        b"",
        f"load refused, database unchanged: {why}\n",
    )
    assert not db.exists()


def test_every_tool_command_holds_stops_while_importing() -> None:
    """Each console script and script of a tool goes through app.tools.start (the server,
    reporting-api, has its own handlers)."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        commands = tomllib.load(file)["project"]["scripts"]
    tools = {name: target for name, target in commands.items() if name != "reporting-api"}
    assert tools and all(target.startswith("app.tools.start:") for target in tools.values())
    for script in (ROOT / "scripts").glob("*.py"):
        text = script.read_text(encoding="utf-8")
        if "(installed as reporting-" in text:
            assert "from app.tools.start import run" in text, script


DISK_FULL = """
set -e
mount -t tmpfs -o size=4m tmpfs "$DIR"
"$PYTHON" scripts/load_fixtures.py fixtures/sample.json --no-progress --db "$DIR/x.sqlite3" \
    >/dev/null
cp "$DIR"/x.sqlite3* "$OUT/before/"
dd if=/dev/zero of="$DIR/filler" bs=4k 2>/dev/null || true
truncate -s -64K "$DIR/filler"
set +e
"$PYTHON" scripts/load_fixtures.py "$BIG" --db "$DIR/x.sqlite3" --no-progress
echo "exit $?" >&2
cp "$DIR"/x.sqlite3* "$OUT/after/"
"""


@pytest.mark.system
@pytest.mark.skipif(not shutil.which("unshare"), reason="needs unshare for a private tmpfs")
def test_a_full_disk_is_named_and_loses_nothing(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    document = {k: sample()[k] for k in ("companies", "employees", "campaigns")}
    campaigns = [c["id"] for c in sample()["campaigns"]]
    document["campaign_events"] = generated_events(20_000, campaigns, next_event_id())
    big.write_text(json.dumps(document))
    for folder in ("disk", "before", "after"):
        (tmp_path / folder).mkdir()
    env = {"DIR": str(tmp_path / "disk"), "OUT": str(tmp_path), "BIG": str(big)}
    command = ["unshare", "--mount", "--map-root-user", "sh", "-c", DISK_FULL]
    done = subprocess.run(
        command, cwd=ROOT, env=clean_env(**env, PYTHON=sys.executable),
        capture_output=True, text=True, timeout=GUARD_SECONDS, check=False,
    )  # fmt: skip
    if "exit" not in done.stderr:
        pytest.skip(f"no private tmpfs here: {done.stderr.strip()}")
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == "exit 1", done.stderr
    assert lines[:-1] == ["load refused, database unchanged: database: database or disk is full"]
    before = dump_tables(tmp_path / "before" / "x.sqlite3")
    assert before["campaign_events"], "the sample was loaded first"
    assert dump_tables(tmp_path / "after" / "x.sqlite3") == before


def test_reclassify_agrees_with_the_count_of_events_that_kept_their_verdicts(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sample's two fast events gain a reason from networks that hold their addresses
    (docs/data.md's example), then lose it again: their verdicts stay, in plural."""
    networks = "40.92.0.0/15, 40.107.0.0/16, 52.100.0.0/14, 104.47.0.0/17"
    kept = "reclassified every company: 0 events moved between verdicts; 2 events kept their"
    kept += " verdicts with other reasons\n"
    for fast, nets in (("10", networks), ("", "")):
        monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", fast)
        monkeypatch.setenv("REPORTING_BOT_NETWORKS", nets)
        assert reclassify.main(["--db", str(sample_db)]) == 0
        assert capsys.readouterr().out == kept
    one = reclassify.summary(1, Counter({("automated", "automated"): 1}))
    assert one.endswith("; 1 event kept its verdict with other reasons")


class StoppedAtCommit(Writer):
    """A writer's connection that gets a stop (SIGINT or SIGTERM) as its write's COMMIT
    returns: the moment a Ctrl-C comes too late to undo the write."""

    stop = signal.SIGINT
    writing = False

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        cursor = super().execute(sql, *args)
        if sql.startswith("BEGIN"):
            self.writing = sql == "BEGIN IMMEDIATE"
        elif sql == "COMMIT" and self.writing:
            signal.raise_signal(self.stop)
        return cursor


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["int", "term"])
def test_a_stop_after_the_commit_does_not_say_nothing_was_written(
    sample_db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stop: int
) -> None:
    """A Ctrl-C (or SIGTERM) that came during the COMMIT or after it, while the loader
    closed the file, ended it with ``load refused, database unchanged: interrupted`` and
    exit 130, the load written all the same. It is too late to stop the write: the tool
    ends as it would have, with its report."""
    fixture = sample_db.parent / "events.json"
    document = {k: sample()[k] for k in ("companies", "employees", "campaigns")}
    campaigns = [c["id"] for c in sample()["campaigns"]]
    document["campaign_events"] = generated_events(20, campaigns, next_event_id())
    fixture.write_text(json.dumps(document))
    before = query(sample_db, "SELECT value FROM meta WHERE key = 'data_version'")
    connect = sqlite3.connect
    monkeypatch.setattr(StoppedAtCommit, "stop", stop)
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": StoppedAtCommit})
    )
    code = loader.main([str(fixture), "--db", str(sample_db), "--no-progress"])
    monkeypatch.undo()
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    assert out.startswith("loaded ")
    assert query(sample_db, "SELECT value FROM meta WHERE key = 'data_version'") != before


def test_a_stop_held_at_a_commit_stops_the_next_write(
    sample_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A stop held from the commit of an upgrade (reporting-swap upgrades an older new
    file, then takes the served file's write lock) is sent again as the next transaction
    begins: the swap stops, and the served file stays."""
    old = older_copy(sample_db, tmp_path / "old.sqlite3", [], SCHEMA_VERSION - 1)
    served = sample_db.read_bytes()
    connect = sqlite3.connect
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": StoppedAtCommit})
    )
    code = swap.main([str(old), "--db", str(sample_db)])
    monkeypatch.undo()
    out, err = capsys.readouterr()
    assert (code, out, err) == (130, "", "swap refused: interrupted\n")
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert sample_db.read_bytes() == served


@pytest.mark.system
@pytest.mark.parametrize(
    "module", ["loader", "keytool", "generator", "reclassify", "swap", "webhooks", "export"]
)
def test_a_tool_run_as_a_module_runs(module: str) -> None:
    """``python -m app.tools.loader FILE --db DB`` exited 0 having loaded nothing: the
    module had no ``__main__`` block (only the GoPhish importer's had one)."""
    done = run_python("-m", f"app.tools.{module}", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout


class StoppedMidQuery(Writer):
    """A writer's connection that gets a stop while the stats' median query is open: the
    summaries' clean-up then fails on the table that query holds."""

    stop = signal.SIGINT

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        cursor = super().execute(sql, *args)
        if sql == HOUR_HISTOGRAMS:
            signal.raise_signal(self.stop)
        return cursor


@pytest.mark.parametrize(
    ("stop", "code", "why"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped by SIGTERM")],
    ids=["int", "term"],
)
def test_a_stop_mid_query_is_not_taken_for_a_locked_table(
    sample_db: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    stop: int,
    code: int,
    why: str,
) -> None:
    """A Ctrl-C while a write's query was open ended the tool with ``database: database
    table is locked`` and exit 1: dropping the scratch tables failed, and that error hid
    the stop. It is the stop that is told, and nothing is written."""
    monkeypatch.setenv("REPORTING_BOT_FAST_SECONDS", "3600")  # verdicts move: the query has rows
    before = dump_tables(sample_db)
    connect = sqlite3.connect
    monkeypatch.setattr(StoppedMidQuery, "stop", stop)
    monkeypatch.setattr(
        sqlite3, "connect", lambda *a, **k: connect(*a, **{**k, "factory": StoppedMidQuery})
    )
    code_seen = reclassify.main(["--db", str(sample_db)])
    monkeypatch.undo()
    out, err = capsys.readouterr()
    assert (code_seen, out, err) == (code, "", f"reclassify refused, database unchanged: {why}\n")
    assert dump_tables(sample_db) == before


@pytest.mark.parametrize(
    ("main", "argv", "prefix"),
    [
        (reclassify.main, [], "reclassify refused, database unchanged"),
        (export.main, ["{tmp}/out.json"], "export refused, nothing written"),
        (webhooks.main, ["run", "--once"], "error"),
    ],
    ids=["reclassify", "export", "webhook-sender"],
)
def test_a_postgresql_database_without_the_schema_is_one_line_and_left_so(
    main: Callable[[Sequence[str]], int],
    argv: list[str],
    prefix: str,
    pg_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As a SQLite file without tables is: reclassify made the whole schema there and
    exited 0, and the export and the sender ended on ``relation ... does not exist``."""
    with contextlib.contextmanager(fresh_database)(pg_url, "template0") as url:
        given = [word.replace("{tmp}", str(tmp_path)) for word in argv]
        code = main(["--database-url", url, *given])
        out, err = capsys.readouterr()
        assert (code, out) == (1, "")
        assert err == f"{prefix}: the PostgreSQL database has no schema (load fixtures first)\n"
        tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        assert asyncio.run(fetch_all(url, tables)) == []
    assert list(tmp_path.iterdir()) == []


def test_an_export_reads_its_own_schema_version_only(
    sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of another program, of an older or of a newer schema version: one line that
    says so, no file written (it was ``no such table: partners``, or an export of tables
    this version does not know)."""
    other = tmp_path / "other.sqlite3"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    newer = older_copy(sample_db, tmp_path / "newer.sqlite3", [], SCHEMA_VERSION + 1)
    older = version_6_copy(sample_db, tmp_path / "older.sqlite3")
    for db, cause in (
        (other, "holds no database of this service"),
        (newer, f"has schema version {SCHEMA_VERSION + 1}"),
        (older, "has schema version 6"),
    ):
        before = db.read_bytes()
        code = export.main([str(tmp_path / "out.json"), "--db", str(db)])
        out, err = capsys.readouterr()
        assert (code, out) == (1, "")
        assert one_line(err).startswith(f"export refused, nothing written: {db} {cause}")
        assert db.read_bytes() == before
        assert not (tmp_path / "out.json").exists()
