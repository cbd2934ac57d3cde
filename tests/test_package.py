"""Issue 10 item 5: a package that installs.

The wheel built from this tree, installed into a fresh virtual environment, has the
console scripts (reporting-api, reporting-load, reporting-keys, reporting-generate,
reporting-import-gophish, reporting-export, reporting-swap, reporting-reclassify), carries
fixtures/sample.json inside it, and a first start of the installed server creates its
database from that sample and answers with a sample key.
The environment borrows this one's dependencies through a .pth line (no download), but
imports ``app`` from the wheel, never from the source tree.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from .support.factories import API, KEYS, sample
from .support.servers import (
    GUARD_SECONDS,
    ROOT,
    AppProcess,
    ProcessGuard,
    clean_env,
    fetch,
    free_port,
    stop,
)

pytestmark = pytest.mark.system  # builds a wheel, makes a venv, starts the installed server

SCRIPTS = (
    "reporting-api",
    "reporting-load",
    "reporting-keys",
    "reporting-generate",
    "reporting-import-gophish",
    "reporting-swap",
    "reporting-export",
    "reporting-reclassify",
)


def run(*command: str | Path, cwd: Path) -> str:
    """Run a command to completion; fail the test with its output if it fails."""
    ProcessGuard.check()
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=clean_env(), capture_output=True,
        text=True, timeout=4 * GUARD_SECONDS, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of a copy of this tree (so the build leaves nothing in the repository)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("app", "fixtures"):
        shutil.copytree(ROOT / folder, source / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    run(*pip, "-w", work / "dist", source, cwd=work)
    (built,) = (work / "dist").glob("reporting_api-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path) -> Path:
    """A fresh virtual environment with the wheel installed; its bin folder."""
    home = wheel.parent.parent / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", home, cwd=wheel.parent)
    site = next((home / "lib").glob("python3*/site-packages"))
    # The dependencies come from this environment, after the new one's own packages.
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", home / "bin" / "python", "install"]
    run(*pip, "-q", "--no-deps", "--no-index", wheel, cwd=wheel.parent)
    return home / "bin"


def test_the_wheel_ships_the_sample_and_no_tests(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "app/fixtures/sample.json" in names
    assert "app/tools/keytool.py" in names and "app/web/server.py" in names
    shipped = ("index.html", "main.js", "uPlot.LICENSE")  # the dashboard, its charts' licence
    assert {f"app/web/static/dashboard/{name}" for name in shipped} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "scripts/", "fixtures/"))]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    listed = zipfile.ZipFile(wheel).read(entry_points).decode()
    for script in SCRIPTS:
        assert f"{script} = app." in listed


def test_the_installed_package_is_not_the_source_tree(venv: Path, tmp_path: Path) -> None:
    where = run(venv / "python", "-c", "import app; print(app.__file__)", cwd=tmp_path)
    assert Path(where.strip()).is_relative_to(venv.parent)
    assert not Path(where.strip()).is_relative_to(ROOT / "app")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_console_script_runs(venv: Path, tmp_path: Path, script: str) -> None:
    assert "usage:" in run(venv / script, "--help", cwd=tmp_path)


def test_the_installed_tools_load_and_list(venv: Path, tmp_path: Path) -> None:
    db = tmp_path / "loaded.sqlite3"
    shipped = run(
        venv / "python", "-c", "from app.tools.loader import SAMPLE_FIXTURE; print(SAMPLE_FIXTURE)",
        cwd=tmp_path,
    ).strip()  # fmt: skip
    assert Path(shipped).is_relative_to(venv.parent)
    assert "records into" in run(venv / "reporting-load", shipped, "--db", db, cwd=tmp_path)
    listed = run(venv / "reporting-keys", "--db", db, "list", cwd=tmp_path)
    for entry in sample()["api_keys"]:
        assert entry["key"][:12] in listed


def test_first_start_of_the_installed_server_serves_the_sample(venv: Path, tmp_path: Path) -> None:
    db, port = tmp_path / "new.sqlite3", free_port()
    logs = tmp_path / "server"
    command = [str(venv / "reporting-api"), "--db", str(db), "--port", str(port)]
    ProcessGuard.check()
    with open(f"{logs}.out", "wb") as out, open(f"{logs}.err", "wb") as err:
        proc = subprocess.Popen(command, cwd=tmp_path, env=clean_env(), stdout=out, stderr=err)
    server = AppProcess(proc, f"http://127.0.0.1:{port}", logs)
    try:
        assert server.serving(), server.output()
        status, _, body = fetch(f"{server.base}{API}/course-inscriptions?per_page=500", {
            "X-API-KEY": KEYS[1]
        })  # fmt: skip
        records = json.loads(body)
        page = fetch(f"{server.base}/dashboard/")
    finally:
        code = stop(proc)
    assert status == 200 and page[0] == 200 and b"main.js" in page[2]
    owner = {e["id"]: e["company_id"] for e in sample()["employees"]}
    assert len(records) == sum(1 for i in sample()["inscriptions"] if owner[i["employee_id"]] == 1)
    assert db.is_file()
    assert code == 0, server.output()
    printed = server.output_text()[0]
    for entry in sample()["api_keys"]:
        assert entry["key"] in printed  # created from the shipped sample, keys shown once
