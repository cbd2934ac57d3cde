"""The server's settings are checked where they are read (README, Configuration).

A setting that would start a broken server (nan and inf timeouts, a rate whose headers
run to 300 digits, thousands of threads, an empty host that listens everywhere, CORS
origins that can never match) or crash it later with a traceback (a malformed database
or Redis URL) stops the start with one line on stderr and exit 2. Numbers are plain
ASCII decimals within bounds stated once, in Config's metadata, which the help and the
README's table repeat. No error line prints a database URL's password.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from app.config import (
    Config,
    OneLineParser,
    base_url,
    build_parser,
    load_config,
    masked_url,
    unknown_settings,
)
from app.tools import keytool
from app.tools.cli import add_store_arguments
from app.web import server

from .support.docs import section
from .support.servers import GUARD_SECONDS, ROOT, Launcher, clean_env, free_port, run_python
from .support.stores import fresh_database, read_only_role

PASSWORD = "readpw"


def refusal(argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line load_config prints before it exits 2."""
    with pytest.raises(SystemExit) as exited:
        load_config(argv, environ)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    [line] = err.strip().splitlines()
    assert "Traceback" not in err
    return line


BAD = [
    # finite numbers only, within bounds
    (["--rate-per-second", "nan"], {}, "'nan' is not a number"),
    (["--rate-per-second", "1e-300"], {}, "'1e-300' is not a number"),
    (["--rate-per-second", "0.0001"], {}, "rate per second 0.0001 is out of range"),
    (["--keepalive-timeout", "nan"], {}, "'nan' is not a number"),
    (["--header-timeout", "inf"], {}, "'inf' is not a number"),
    ([], {"REPORTING_WRITE_TIMEOUT": "Infinity"}, "REPORTING_WRITE_TIMEOUT"),
    (["--shutdown-timeout", "86401"], {}, "at most a day"),
    # plain ASCII decimals, upper bounds
    (["--port", "1_8611"], {}, "'1_8611' is not a whole number"),
    (["--port", "\u0668\u0660\u0668\u0660"], {}, "is not a whole number"),
    ([], {"REPORTING_PORT": "\uff18\uff10\uff18\uff10"}, "REPORTING_PORT"),
    (["--rate-per-second", "1_0"], {}, "'1_0' is not a number"),
    (["--read-connections", "1000000000"], {}, "read connections 1000000000 is out of range"),
    (["--workers", "1000000", "--redis-url", "redis://127.0.0.1/0"], {}, "workers 1000000"),
    (["--answer-memory-mb", "65537"], {}, "answer memory mb 65537"),
    # an empty host would listen on every interface
    (["--host", ""], {}, "the host is empty"),
    ([], {"REPORTING_HOST": ""}, "the host is empty"),
    # an empty database file name
    (["--db", ""], {}, "the database file's name is empty"),
    ([], {"REPORTING_DB": ""}, "the database file's name is empty"),
    # the database URL
    (["--database-url", f"postgresql://u:{PASSWORD}@127.0.0.1:notaport/db"], {}, "'notaport'"),
    (["--database-url", f"postgresql://u:{PASSWORD}@127.0.0.1:99999/db"], {}, "'99999'"),
    (["--database-url", f"postgresql://u:{PASSWORD}@127.0.0.1:0/db"], {}, "port '0'"),
    (["--database-url", f"postgresql://u:{PASSWORD}@[bad/db"], {}, "Invalid IPv6 URL"),
    (["--database-url", f"postgresql://u:{PASSWORD}@[bad]/db"], {}, "bad"),
    (["--database-url", f"postgresql://u:{PASSWORD}@h/db?sslmode=bogus"], {}, "'bogus'"),
    (["--database-url", f"postgresql://u:{PASSWORD}@h/db?sslmode=REQUIRE"], {}, "'REQUIRE'"),
    (["--database-url", f"mysql://u:{PASSWORD}@h/db"], {}, "postgresql://"),
    (["--database-url", f"postgresql://u:{PASSWORD}@h/d\udcffb"], {}, "not printable"),
    ([], {"REPORTING_DATABASE_URL": f"postgres://u:{PASSWORD}@h:x/db"}, "port 'x'"),
    # a password's "#", "/" or "?" not percent-encoded: the host seems to end inside it
    (["--database-url", f"postgresql://u:{PASSWORD}#1@127.0.0.1/db"], {}, "percent-encoded"),
    ([], {"REPORTING_DATABASE_URL": f"postgres://u:{PASSWORD}/1@h/db"}, "percent-encoded"),
    (["--redis-url", f"redis://:{PASSWORD}?1@127.0.0.1:6379/0"], {}, "percent-encoded"),
    # the Redis URL
    (["--redis-url", "redis://127.0.0.1:notaport/0"], {}, "port 'notaport'"),
    (["--redis-url", f"redis://:{PASSWORD}@127.0.0.1:6379/zero"], {}, "database 'zero'"),
    (["--redis-url", "redis://127.0.0.1:6379/0?db=x"], {}, "database 'x'"),
    (["--redis-url", "redis://[::1/0"], {}, "Invalid IPv6 URL"),
    # CORS origins that no browser's Origin header equals
    (["--cors-origins", "*"], {}, "CORS origin '*'"),
    (["--cors-origins", "https://app.example/"], {}, "'https://app.example/'"),
    (["--cors-origins", "https://a.example,https://*.example"], {}, "'https://*.example'"),
    (["--cors-origins", "app.example"], {}, "'app.example'"),
    (["--cors-origins", "ftp://app.example"], {}, "'ftp://app.example'"),
    (["--cors-origins", "https://App.example"], {}, "'https://App.example'"),
    (["--cors-origins", "https://app.example:443"], {}, "'https://app.example:443'"),
    (["--cors-origins", "http://localhost:99999"], {}, "'http://localhost:99999'"),
    (["--cors-origins", "https://app.example/dash"], {}, "'https://app.example/dash'"),
    # log level and format: any case, or refused
    (["--log-format", "xml"], {}, "text or json"),
]


@pytest.mark.parametrize(("argv", "environ", "names"), BAD)
def test_a_bad_setting_is_one_line_and_exit_2(
    argv: list[str], environ: dict[str, str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = refusal(argv, environ, capsys)
    assert names in line
    assert PASSWORD not in line


@pytest.mark.parametrize(
    "changes",
    [
        {"rate_per_second": float("nan")},
        {"rate_per_second": 1e-300},
        {"keepalive_timeout": float("nan")},
        {"header_timeout": float("inf")},
        {"read_timeout": -float("inf")},
        {"read_connections": 10**9},
    ],
)
def test_config_refuses_what_no_flag_may_give(changes: dict[str, Any]) -> None:
    """The bounds hold for a Config made in code too (nan compares false)."""
    with pytest.raises(ValueError, match="out of range"):
        Config(**changes)


@pytest.mark.parametrize(
    ("argv", "environ", "check"),
    [
        (["--port", "08080"], {}, ("port", 8080)),
        (["--rate-per-second", "0.001"], {}, ("rate_per_second", 0.001)),
        ([], {"REPORTING_KEEPALIVE_TIMEOUT": "86400"}, ("keepalive_timeout", 86400.0)),
        (["--read-connections", "256"], {}, ("read_connections", 256)),
        (["--workers", "64", "--redis-url", "redis://127.0.0.1:6379/0"], {}, ("workers", 64)),
        (["--log-format", "JSON"], {}, ("log_format", "json")),
        ([], {"REPORTING_LOG_FORMAT": "Text"}, ("log_format", "text")),
        (["--log-level", "debug"], {}, ("log_level", "DEBUG")),
        ([], {"REPORTING_LOG_LEVEL": "Warning"}, ("log_level", "WARNING")),
        (["--host", "::1"], {}, ("host", "::1")),
        (["--db", "", "--database-url", "postgresql://u@h/db"], {}, ("db", "")),
        (["--database-url", "postgres://u:p@h1:5432,h2:5433/db?sslmode=verify-full"], {}, None),
        (["--database-url", "postgresql://u@[::1]:5432/db?sslmode=require"], {}, None),
        (["--database-url", "postgresql:///db?host=/run/postgresql"], {}, None),
        (["--redis-url", "rediss://u:p@[::1]:6380/3"], {}, None),
        (["--redis-url", "unix:///run/redis.sock?db=2"], {}, None),
        (["--cors-origins", "https://app.example, http://localhost:3000"], {}, None),
        (["--cors-origins", "http://[::1]:8080,https://xn--bcher-kva.example"], {}, None),
    ],
)
def test_good_settings_are_taken(
    argv: list[str], environ: dict[str, str], check: tuple[str, object] | None
) -> None:
    config = load_config(argv, environ)
    if check is not None:
        assert getattr(config, check[0]) == check[1]


def test_the_log_level_and_format_take_any_case_in_code_too() -> None:
    config = Config(log_level="error", log_format="JSON")
    assert (config.log_level, config.log_format) == ("ERROR", "json")


def bounded() -> list[dataclasses.Field[Any]]:
    return [item for item in dataclasses.fields(Config) if "range" in item.metadata]


def test_every_bound_is_in_the_help_and_the_readme() -> None:
    """The bounds live in Config's metadata; the help and the README's table state them."""
    help_text = " ".join(build_parser({}).format_help().split())
    rows = dict(
        re.findall(r"^\| `(--[\w-]+)` \| `\w+` \| (.+) \|$", section("Configuration"), re.M)
    )
    assert len(bounded()) >= 15
    for item in bounded():
        low, high = item.metadata["range"]
        flag = f"--{item.name.replace('_', '-')}"
        assert f"{low:,} to {high:,}" in rows[flag], flag
        assert re.search(rf"{flag} \w+ [^[]*\({low:,} to {high:,}\) \[env", help_text), flag


def test_the_help_masks_a_password_a_variable_gives() -> None:
    """A default in the help may be a REPORTING_* variable's value: a URL with its password."""
    environ = {
        "REPORTING_DATABASE_URL": f"postgresql://u:{PASSWORD}@127.0.0.1/db",
        "REPORTING_REDIS_URL": f"redis://:{PASSWORD}@127.0.0.1:6379/0",
    }
    text = " ".join(build_parser(environ).format_help().split())
    assert "(default: postgresql://u:***@127.0.0.1/db)" in text
    assert "(default: redis://:***@127.0.0.1:6379/0)" in text
    assert PASSWORD not in text


def test_the_read_connections_help_names_both_stores() -> None:
    text = " ".join(build_parser({}).format_help().split())
    found = re.search(r"--read-connections READ_CONNECTIONS (.*?)\[env", text)
    assert found is not None
    assert "PostgreSQL" in found[1] and "SQLite" in found[1]


# --- where the server says it listens ---


def test_an_ipv6_address_is_bracketed() -> None:
    assert base_url("::1", 8611) == "http://[::1]:8611"
    assert base_url("127.0.0.1", 80) == "http://127.0.0.1:80"


def test_the_banner_and_the_listening_line_make_their_url_in_one_place() -> None:
    """The banner (app/__main__.py) and the "listening on" line write no http:// of their
    own, which printed http://::1:8080: both call config.base_url."""
    for path in (ROOT / "app" / "__main__.py", ROOT / "app" / "web" / "server.py"):
        source = path.read_text(encoding="utf-8")
        assert "http://" not in source and "base_url(" in source, path


class Started(Exception):
    """Raised by on_started to leave serve() once it has logged."""


class UnboundSite:
    """A TCPSite that binds nothing: the test never listens on ::1."""

    def __init__(self, *args: object) -> None:
        pass

    async def start(self) -> None:
        pass


async def test_the_listening_line_brackets_an_ipv6_address(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(web, "TCPSite", UnboundSite)
    caplog.set_level(logging.INFO, logger="app.server")

    def started() -> None:
        raise Started

    with pytest.raises(Started):
        await server.serve(web.Application(), "::1", 8611, started)
    assert "listening on http://[::1]:8611" in caplog.text


# --- the server's start ---


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:p@ss:w@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u:p#s/s?w@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgres://u@h/db?password=pw&sslmode=require", "postgres://u@h/db?password=***&sslmode=require"),
        ("redis://:pw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("postgresql://h/db", "postgresql://h/db"),
    ],
)  # fmt: skip
def test_masked_url(url: str, shown: str) -> None:
    assert masked_url(url) == shown


@pytest.mark.system
def test_a_failed_first_start_does_not_print_the_password(
    pg_url: str, tmp_path: Path, launcher: Launcher
) -> None:
    """A read-only role cannot load the sample into an empty database: the error line
    names the database's URL, without its password."""
    with contextlib.contextmanager(fresh_database)(pg_url, "template0") as empty:
        reader = asyncio.run(read_only_role(empty))
        reader = reader.replace("reporting_reader@", f"reporting_reader:{PASSWORD}@")
        app = launcher.start(tmp_path / "unused.sqlite3", "--database-url", reader, bootstrap=True)
        assert app.proc.wait(timeout=GUARD_SECONDS) == 2
    out, err = app.output_text()
    [line] = err.strip().splitlines()
    assert line.startswith("error: database postgresql://reporting_reader:***@127.0.0.1:"), err
    assert "read-only" in line and PASSWORD not in err + out


@pytest.mark.system
@pytest.mark.parametrize("bootstrap", [True, False])
def test_a_directory_is_not_a_database_file(
    bootstrap: bool, tmp_path: Path, launcher: Launcher
) -> None:
    app = launcher.start(tmp_path, bootstrap=bootstrap)
    assert app.proc.wait(timeout=GUARD_SECONDS) == 2
    out, err = app.output_text()
    assert err == f"error: database file {tmp_path} is a directory\n"
    assert "Serving" not in out


@pytest.mark.system
@pytest.mark.parametrize("kind", ["empty", "foreign"])
def test_a_file_that_holds_no_database_of_ours_says_so(
    kind: str, tmp_path: Path, launcher: Launcher
) -> None:
    """An empty file, or another program's SQLite database (schema version 0), named
    what it is rather than "schema version 0"."""
    file = tmp_path / "other.sqlite3"
    file.touch()
    if kind == "foreign":
        with contextlib.closing(sqlite3.connect(file)) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
    app = launcher.start(file, bootstrap=False)
    assert app.proc.wait(timeout=GUARD_SECONDS) == 2
    _, err = app.output_text()
    assert err == f"error: {file} holds no database of this service: make one with reporting-load\n"


# --- the tools read the same URL check ---


def store_parser(monkeypatch: pytest.MonkeyPatch, url: str | None = None) -> OneLineParser:
    if url is None:
        monkeypatch.delenv("REPORTING_DATABASE_URL", raising=False)
    else:
        monkeypatch.setenv("REPORTING_DATABASE_URL", url)
    parser = OneLineParser(prog="tool")
    add_store_arguments(parser, "SQLite file")
    return parser


BAD_URLS = [
    f"postgresql://u:{PASSWORD}@127.0.0.1:notaport/db",
    f"postgresql://u:{PASSWORD}@127.0.0.1:99999/db",
    f"postgresql://u:{PASSWORD}@[bad/db",
    f"postgresql://u:{PASSWORD}@127.0.0.1/db?sslmode=bogus",
    f"postgresql://u:{PASSWORD}#1@127.0.0.1/db",
]


@pytest.mark.parametrize("url", BAD_URLS)
@pytest.mark.parametrize("given", ["flag", "variable"])
def test_a_tool_refuses_a_bad_url_as_a_usage_error(
    url: str, given: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = store_parser(monkeypatch, None if given == "flag" else url)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--database-url", url] if given == "flag" else [])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("tool: error: argument --database-url: database URL postgresql://u:***@")
    assert PASSWORD not in line


def test_a_tool_takes_a_good_url(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "postgresql://u:pw@127.0.0.1:5432/db?sslmode=prefer"
    assert store_parser(monkeypatch).parse_args(["--database-url", url]).database_url == url
    assert store_parser(monkeypatch, url).parse_args([]).database_url == url


def test_the_key_tool_refuses_a_bad_url_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("REPORTING_DATABASE_URL", raising=False)
    with pytest.raises(SystemExit) as exited:
        keytool.main(["--database-url", BAD_URLS[0], "list"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "'notaport'" in err
    assert "Traceback" not in err and PASSWORD not in err


# --- the real command ---


@pytest.mark.system
@pytest.mark.parametrize(
    ("flags", "names"),
    [
        (["--rate-per-second", "nan"], "'nan'"),
        (["--database-url", f"postgresql://u:{PASSWORD}@127.0.0.1:99999/db"], "'99999'"),
        (["--redis-url", "redis://127.0.0.1:notaport/0"], "'notaport'"),
        (["--cors-origins", "*"], "'*'"),
    ],
)
def test_the_server_refuses_them_before_it_starts(
    flags: list[str], names: str, tmp_path: Path
) -> None:
    """(Were one taken, the missing file would stop the start: nothing is served.)"""
    missing = str(tmp_path / "missing.sqlite3")
    base = ["-m", "app", "--db", missing, "--bootstrap", "false", "--port", str(free_port())]
    result = run_python(*base, *flags, env=clean_env())
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert names in line and PASSWORD not in line and "Traceback" not in result.stderr
    assert "Serving" not in result.stdout


def test_a_variable_nothing_reads_is_named_with_the_closest_setting() -> None:
    environ = {
        "REPORTING_ORIGINS": "https://app.example",  # misspelt: REPORTING_CORS_ORIGINS
        "REPORTING_PORT": "8090",
        "REPORTING_BOT_NETWORKS": "10.0.0.0/8",  # a writer's: known to the server too
        "PORT": "1",  # not ours
    }
    [warning] = unknown_settings(environ)
    assert warning.startswith("REPORTING_ORIGINS is not a setting")
    assert "did you mean REPORTING_CORS_ORIGINS?" in warning


def test_every_variable_the_code_reads_is_a_known_setting() -> None:
    """A setting added to the code but not to the list would be warned about when used."""
    read = set()
    for path in (ROOT / "app").rglob("*.py"):
        read |= set(re.findall(r"REPORTING_[A-Z_]*[A-Z]", path.read_text()))
    assert read and unknown_settings(dict.fromkeys(read, "")) == []


@pytest.mark.system
def test_the_server_and_a_tool_warn_of_a_misspelt_variable(sample_db: Path, tmp_path: Path) -> None:
    """The server warns before anything else can stop its start (here a missing file)."""
    missing = str(tmp_path / "missing.sqlite3")
    env = clean_env(REPORTING_TRUSTED_PROXY="10.0.0.1")
    base = ["-m", "app", "--db", missing, "--bootstrap", "false", "--port", str(free_port())]
    served = run_python(*base, env=env)
    assert served.returncode == 2
    assert "REPORTING_TRUSTED_PROXY is not a setting" in served.stderr
    assert "did you mean REPORTING_TRUSTED_PROXIES?" in served.stderr
    listed = run_python("scripts/manage_keys.py", "--db", str(sample_db), "list", env=env)
    assert listed.returncode == 0, listed.stderr
    [warning] = listed.stderr.strip().splitlines()
    assert warning.startswith("warning: REPORTING_TRUSTED_PROXY is not a setting")
    quiet = run_python("scripts/manage_keys.py", "--db", str(sample_db), "list")
    assert quiet.returncode == 0 and quiet.stderr == ""


@pytest.mark.parametrize("given", ["flag", "variable"])
@pytest.mark.parametrize("url", [f"postgresql://u:{PASSWORD}@h/d\udcffb", "postgresql://h/d\x1bb"])
def test_a_tool_refuses_a_url_of_characters_that_are_not_printable(
    url: str, given: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A byte of no UTF-8 in the URL (a surrogate in Python's argv) ended the tools in the
    driver's traceback; a control character would be echoed to the terminal."""
    parser = store_parser(monkeypatch, None if given == "flag" else url)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--database-url", url] if given == "flag" else [])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(
        "tool: error: argument --database-url: the database URL holds a character that is not"
        " printable"
    )
