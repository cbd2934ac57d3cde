"""What the Makefile promises (issue 12 items 8 and 9; house rule 1).

``make run`` installs only what serving needs, ``make test`` and ``make lint`` install
the test extras (pytest, hypothesis, schemathesis, ruff, mypy) and lint with ruff and
mypy; ``make clean`` deletes the virtual environment, every cache (.schemathesis/
included) and the database ``make run`` made, and nothing else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from .support.servers import GUARD_SECONDS, ROOT, ProcessGuard, clean_env

TEST_TOOLS = {"pytest", "pytest-aiohttp", "pytest-xdist", "hypothesis", "schemathesis"}
TEST_TOOLS |= {"ruff", "mypy"}
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def requirement_names(requirements: list[str]) -> set[str]:
    """The distribution names of PEP 508 requirement strings."""
    return {re.split(r"[\s<>=!~\[;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_serving_depends_on_no_test_tool() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not requirement_names(project["dependencies"]) & TEST_TOOLS
    assert requirement_names(project["optional-dependencies"]["test"]) >= TEST_TOOLS


def test_git_ignores_what_the_tools_leave() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    assert {".schemathesis/", ".hypothesis/", ".mypy_cache/", "*.sqlite3"} <= set(ignored)


def make(*args: str, cwd: Path = ROOT) -> str:
    """Run make as a user would (no settings inherited from an outer make); its stdout."""
    ProcessGuard.check()
    env = {k: v for k, v in clean_env().items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=GUARD_SECONDS, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def installs(plan: str) -> list[str]:
    """The pip install lines of a dry run."""
    return [
        line for line in plan.splitlines() if "pip install" in line and "--upgrade pip" not in line
    ]


@pytest.mark.system
@needs_make
@pytest.mark.parametrize(
    "target",
    ["run", "load", "keys", "bench-smoke", "bench-large", "bench-data-large", "bench-tenth"],
)
def test_serving_targets_install_only_the_package(target: str) -> None:
    plan = installs(make("--dry-run", "--always-make", target))
    assert plan and all(line.rstrip().endswith("-e .") for line in plan), plan


@pytest.mark.system
@needs_make
@pytest.mark.parametrize("target", ["test", "test-fast", "lint"])
def test_test_targets_install_the_test_extras(target: str) -> None:
    plan = make("--dry-run", "--always-make", target)
    assert installs(plan) and all("'.[test]'" in line for line in installs(plan))
    if target in ("test", "lint"):
        for step in ("ruff check .", "ruff format --check .", "bin/mypy"):
            assert step in plan, step


@pytest.mark.system
@needs_make
def test_make_clean_deletes_the_database_and_the_caches_only(tmp_path: Path) -> None:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    doomed = [".venv/bin/python", ".schemathesis/report", ".hypothesis/examples/x",
              ".pytest_cache/v", ".ruff_cache/x", ".mypy_cache/x", "bench-data/bench.sqlite3",
              "reporting.sqlite3", "reporting.sqlite3-wal", "reporting.sqlite3-shm",
              "app/__pycache__/x.pyc"]  # fmt: skip
    kept = ["fixtures/sample.json", "app/main.py", "other.sqlite3", "README.md"]
    for name in doomed + kept:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    make("clean", cwd=tmp_path)
    assert [name for name in doomed if (tmp_path / name).exists()] == []
    for folder in (".venv", ".schemathesis", ".hypothesis", "bench-data", "app/__pycache__"):
        assert not (tmp_path / folder).exists(), folder
    assert all((tmp_path / name).read_text() == "x" for name in kept)
