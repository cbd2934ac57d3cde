"""The writers write the same under any host locale and time zone.

A Turkish locale is the one that bites: Python 3.11's ``cursor.rowcount`` compares a
statement's first word with the C library's ``tolower``, where ``I`` is no ``i``, so an
``INSERT`` counted -1 rows there (a load moved the change sequence back by one, the
generator kept the first 20,000 rows of a table). The locale is built into the test's own
directory when the host lacks it.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.tools.loader import SAMPLE_FIXTURE

from .support.factories import dump_tables, query
from .support.servers import ROOT, clean_env, run_python

TURKISH = "tr_TR.UTF-8"
GENERATED = ["--companies", "2", "--employees", "40", "--campaigns", "3", "--seed", "5",
             "--events-per-campaign", "6", "--courses", "2", "--inscriptions", "30"]  # fmt: skip


@pytest.fixture(scope="module")
def turkish(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a host east of the date line with a Turkish locale."""
    env = clean_env(LC_ALL=TURKISH, LANG=TURKISH, TZ="Pacific/Kiritimati")
    installed = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=False)
    if TURKISH.lower().replace("-", "") not in installed.stdout.lower():
        if shutil.which("localedef") is None:
            pytest.skip("no tr_TR locale and no localedef to build one")
        home = tmp_path_factory.mktemp("locales")
        made = subprocess.run(
            ["localedef", "-i", "tr_TR", "-f", "UTF-8", str(home / TURKISH)],
            capture_output=True,
            check=False,
        )
        if made.returncode != 0:
            pytest.skip("the tr_TR locale cannot be built here")
        env["LOCPATH"] = str(home)
    return env


def plain() -> dict[str, str]:
    return clean_env(LC_ALL="C.UTF-8", LANG="C.UTF-8", TZ="UTC")


def tables(db: Path) -> dict[str, Any]:
    """Every table but the random meta tokens and the keys' creation instants."""
    rows = dump_tables(db, without=("created_at",))
    rows["meta"] = query(db, "SELECT value FROM meta WHERE key = 'change_seq'")
    return rows


def written(tmp_path: Path, name: str, env: dict[str, str], *args: str) -> tuple[str, Path]:
    db = tmp_path / f"{name}.sqlite3"
    done = run_python(*args, "--db", str(db), "--no-progress", env=env)
    assert done.returncode == 0, done.stderr
    return re.sub(r" in [\d.]+ s \([^)]*\)", "", done.stdout.replace(str(db), "DB")), db


@pytest.mark.system
def test_a_load_counts_and_places_its_events_under_a_turkish_locale(
    tmp_path: Path, turkish: dict[str, str]
) -> None:
    load = ["-m", "app.tools.loader", str(SAMPLE_FIXTURE)]
    said, db = written(tmp_path, "tr", turkish, *load)
    assert "448 events new or changed, 2 targets implied by events" in (
        run_python(*load, "--db", str(tmp_path / "c.sqlite3"), env=plain()).stdout
    )
    assert "448 events new or changed, 2 targets implied by events" in said
    assert tables(db) == tables(tmp_path / "c.sqlite3")


@pytest.mark.system
def test_the_generator_writes_and_counts_every_row_under_a_turkish_locale(
    tmp_path: Path, turkish: dict[str, str]
) -> None:
    said, db = written(tmp_path, "tr", turkish, "-m", "app.tools.generator", *GENERATED)
    same, c_db = written(tmp_path, "c", plain(), "-m", "app.tools.generator", *GENERATED)
    assert said == same and "campaign_events 18," in said
    assert tables(db) == tables(c_db)


@pytest.mark.system
def test_a_partner_given_a_company_under_a_turkish_locale_moves_the_data_version(
    tmp_path: Path, turkish: dict[str, str]
) -> None:
    _, db = written(tmp_path, "tr", turkish, "-m", "app.tools.loader", str(SAMPLE_FIXTURE))
    keys = ["-m", "app.tools.keytool", "--db", str(db), "partner"]
    made = run_python(*keys, "create", "--name", "MSP", env=turkish)
    assert made.returncode == 0, made.stderr
    (partner,) = re.findall(r"partner (\d+)", made.stdout)
    (before,) = query(db, "SELECT value FROM meta WHERE key = 'data_version'")
    added = run_python(*keys, "add-company", partner, "1", env=turkish)
    assert added.stdout == f"Partner {partner} reads company 1.\n", added.stdout
    assert query(db, "SELECT value FROM meta WHERE key = 'data_version'") != [before]


def test_no_writer_reads_a_cursor_rowcount() -> None:
    """What a write changed comes from changed_rows (app/data/schema.py) or RETURNING."""
    reads = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "app").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "rowcount"
    ]
    assert reads == []
