"""The writer tools' store arguments: an empty ``--db ''`` is a usage error, never taken
as absent (which sent the tools to PostgreSQL at its default address, and the GoPhish
importer into an AssertionError). And the package they install with lists every folder
it ships files from. An explicit ``--db`` wins over ``REPORTING_DATABASE_URL``, for every
tool alike (the key tool, the webhook tool and the importer wrote to PostgreSQL instead)."""

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


# Nothing listens there: a tool that went to PostgreSQL would fail to connect.
UNREACHABLE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.mark.parametrize(
    ("main", "argv"),
    [
        (loader.main, [SAMPLE, "--no-progress", "--db", "{db}"]),
        (export.main, ["out.json", "--db", "{db}"]),
        (reclassify.main, ["--db", "{db}"]),
        (gophish.main, [GOPHISH, "--company", "1", "--db", "{db}"]),
        (keytool.main, ["--db", "{db}", "list"]),
        (keytool.main, ["--db", "{db}", "revoke", "1"]),
        (webhooks.main, ["--db", "{db}", "list"]),
    ],
    ids=["load", "export", "reclassify", "import-gophish", "keys", "keys-revoke", "webhooks"],
)
def test_an_explicit_db_wins_over_the_database_url_variable(
    main: Callable[[Sequence[str]], int],
    argv: list[str],
    sample_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/operations.md has the operator ``export REPORTING_DATABASE_URL``; a tool run
    afterwards with ``--db FILE`` works on that file, not on PostgreSQL."""
    monkeypatch.setenv("REPORTING_DATABASE_URL", UNREACHABLE)
    monkeypatch.chdir(tmp_path)
    assert main([word.format(db=sample_db) for word in argv]) == 0, capsys.readouterr().err


def test_the_variable_still_serves_when_no_db_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPORTING_DATABASE_URL", UNREACHABLE)
    args = keytool.build_parser().parse_args(["list"])
    assert (args.db, args.database_url) == (None, UNREACHABLE)


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
