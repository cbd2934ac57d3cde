"""What the tools and the server leave on disk (docs/operations.md, Security: "Files on
disk", "Read-only media").

A database holds the webhooks' signing secrets in clear: a new one is its owner's alone
whatever the umask, SQLite's -wal and -shm follow it, and a file that exists keeps its
mode, as does an export written again. A WAL database in a read-only directory is
refused in one line that says why; a copy out of WAL mode is served from there.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support.servers import (
    GUARD_SECONDS,
    ROOT,
    AppProcess,
    Launcher,
    clean_env,
    fetch,
    free_port,
    run_python,
    stop,
)

pytestmark = pytest.mark.system

SAMPLE = ROOT / "fixtures" / "sample.json"
KEY = json.loads(SAMPLE.read_text(encoding="utf-8"))["api_keys"][0]["key"]
GENERATED = ["--companies", "1", "--employees", "5", "--campaigns", "1"]
GENERATED += ["--events-per-campaign", "3", "--courses", "1", "--inscriptions", "2"]
WEBHOOK = ["create", "--company", "1", "--url", "https://example.com/in", "--events", "fail"]


@pytest.fixture(autouse=True)
def common_umask() -> Iterator[None]:
    """The umask most systems give (022): what every process started here inherits."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def modes(folder: Path) -> dict[str, int]:
    """Each file's permission bits, by name."""
    return {path.name: stat.S_IMODE(path.stat().st_mode) for path in folder.iterdir()}


def tool(script: str, *args: str | Path) -> None:
    done = run_python(f"scripts/{script}.py", *map(str, args))
    assert done.returncode == 0, done.stderr


def answers(app: AppProcess) -> int:
    return fetch(f"{app.base}/api/companies/v1/campaigns", {"X-API-KEY": KEY})[0]


def test_a_new_database_is_its_owners_alone(tmp_path: Path) -> None:
    loaded, generated = tmp_path / "loaded.sqlite3", tmp_path / "generated.sqlite3"
    tool("load_fixtures", "--no-progress", "--db", loaded, SAMPLE)
    tool("generate_fixtures", "--no-progress", "--db", generated, *GENERATED, "--seed", "1")
    tool("webhooks", "--db", loaded, *WEBHOOK, "--label", "SOC")
    assert modes(tmp_path) == {"loaded.sqlite3": 0o600, "generated.sqlite3": 0o600}


def test_the_first_start_makes_the_database_and_its_wal_owner_only(
    tmp_path: Path, launcher: Launcher
) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    app = launcher.serve(folder / "sample.sqlite3", bootstrap=True)
    assert answers(app) == 200
    assert modes(folder) == {f"sample.sqlite3{end}": 0o600 for end in ("", "-wal", "-shm")}


def test_a_file_that_exists_keeps_its_mode(tmp_path: Path) -> None:
    """A file the operator opened to a group stays so through every writer."""
    db = tmp_path / "shared.sqlite3"
    tool("load_fixtures", "--no-progress", "--db", db, SAMPLE)
    db.chmod(0o640)
    tool("load_fixtures", "--no-progress", "--db", db, SAMPLE)
    tool("manage_keys", "--db", db, "create", "--company", "1", "--label", "audit")
    tool("webhooks", "--db", db, *WEBHOOK, "--label", "SOC")
    tool("webhooks", "--db", db, "run", "--once")
    assert modes(tmp_path)["shared.sqlite3"] == 0o640


def test_an_export_written_again_keeps_its_mode(tmp_path: Path, sample_db: Path) -> None:
    out = tmp_path / "export.json"
    tool("export_fixtures", "--db", sample_db, out)
    assert modes(tmp_path)["export.json"] == 0o644  # a new one follows the umask
    out.chmod(0o600)
    tool("export_fixtures", "--db", sample_db, out)
    assert modes(tmp_path)["export.json"] == 0o600
    assert not Path(f"{out}.part").exists()


READ_ONLY = 'mount --bind "$DIR" "$DIR" && mount -o remount,bind,ro "$DIR" && exec "$@"'


def read_only(folder: Path, db: Path) -> subprocess.Popen[bytes]:
    """The server on ``db`` with ``folder`` mounted read-only (a private mount: even root
    cannot write there), on a free port; skips where no private mount can be made."""
    if not shutil.which("unshare"):
        pytest.skip("needs unshare for a private read-only mount")
    server = [sys.executable, "-m", "app", "--db", str(db), "--bootstrap", "false"]
    server += ["--host", "127.0.0.1", "--port", str(free_port())]
    command = ["unshare", "--mount", "--map-root-user", "sh", "-c", READ_ONLY, "sh", *server]
    proc = subprocess.Popen(
        command, cwd=ROOT, env=clean_env(DIR=str(folder)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    return proc


def test_a_wal_database_in_a_read_only_directory_is_refused_in_one_line(
    tmp_path: Path, sample_db: Path
) -> None:
    folder = tmp_path / "media"
    folder.mkdir()
    shutil.copy(sample_db, folder / "r.sqlite3")  # the tools leave it in WAL mode
    proc = read_only(folder, folder / "r.sqlite3")
    _, err = (text.decode() for text in proc.communicate(timeout=GUARD_SECONDS))
    if "mount" in err:
        pytest.skip(f"no private read-only mount here: {err.strip()}")
    assert proc.returncode == 2, err
    assert err == (
        f"error: database file {folder / 'r.sqlite3'} cannot be read in a read-only directory:"
        " SQLite reads it through r.sqlite3-shm, which it cannot create there (make the"
        " directory writable, or serve a copy switched out of WAL mode: PRAGMA journal_mode"
        " = DELETE)\n"
    )


def test_a_copy_out_of_wal_mode_is_served_from_a_read_only_directory(
    tmp_path: Path, sample_db: Path
) -> None:
    folder = tmp_path / "media"
    folder.mkdir()
    db = shutil.copy(sample_db, folder / "r.sqlite3")
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode = DELETE").fetchone() == ("delete",)
    conn.close()
    proc = read_only(folder, db)
    try:
        port = proc.args[proc.args.index("--port") + 1]
        app = AppProcess(proc, f"http://127.0.0.1:{port}", tmp_path / "unused")
        if not app.serving():
            err = proc.communicate(timeout=GUARD_SECONDS)[1].decode()
            if "mount" in err:
                pytest.skip(f"no private read-only mount here: {err.strip()}")
            raise AssertionError(err)
        assert answers(app) == 200
    finally:
        stop(proc)
    assert sorted(modes(folder)) == ["r.sqlite3"]
