"""The writer tools' store arguments: an empty ``--db ''`` is a usage error, never taken
as absent (which sent the tools to PostgreSQL at its default address, and the GoPhish
importer into an AssertionError). And the package they install with lists every folder
it ships files from."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from app.tools import export, generator, gophish, keytool, loader, reclassify, webhooks

from .support.servers import ROOT

SAMPLE = str(ROOT / "fixtures" / "sample.json")
GOPHISH = str(ROOT / "tests" / "data" / "gophish_export.json")
SIZES = ["--companies", "1", "--employees", "4", "--campaigns", "1", "--events-per-campaign"]
SIZES += ["1", "--courses", "1", "--inscriptions", "1", "--seed", "1", "--no-progress"]


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (loader.main, [SAMPLE, "--no-progress", "--db", ""]),
        (export.main, ["out.json", "--db", ""]),
        (reclassify.main, ["--db", ""]),
        (generator.main, [*SIZES, "--db", ""]),
        (gophish.main, [GOPHISH, "--company", "1", "--db", ""]),
        (keytool.main, ["--db", "", "list"]),
        (webhooks.main, ["--db", "", "list"]),
    ],
    ids=["load", "export", "reclassify", "generate", "import-gophish", "keys", "webhooks"],
)
def test_an_empty_db_is_a_usage_error(
    main: Callable[[Sequence[str]], int],
    argv: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("REPORTING_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "error: argument --db: the SQLite file's name is empty" in line
    assert list(tmp_path.iterdir()) == []


def test_every_folder_of_shipped_files_is_a_listed_package() -> None:
    """The tools and the server ship as one package: a folder of app/ holding files that
    Python could import as a package is in pyproject.toml's list, so that its files are
    package data (setuptools warns "absent from the packages configuration" otherwise,
    as it did for the dashboard's folder at every install)."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {
        ".".join(path.relative_to(ROOT).parts)
        for path in (ROOT / "app").rglob("*")
        if path.is_dir() and path.name != "__pycache__" and any(p.is_file() for p in path.iterdir())
    }
    assert folders - set(listed["packages"]) == set()
    assert "*" in listed["package-data"]["app.web.static.dashboard"]
