"""The server's command line (issue 12 item 4; contract.md 8, configuration).

Every bad setting, flag or REPORTING_* variable, ends in one line on stderr and exit
code 2, never a traceback: an impossible port, a database in a directory that does not
exist, a port already taken. The "Serving on" banner appears only once the socket is
bound. Help texts are plain text: no reStructuredText markup, no issue references.
"""

from __future__ import annotations

import argparse
import re
import socket
from pathlib import Path

import pytest

from app.config import build_parser, load_config
from app.tools import export, generator, gophish, keytool, loader, reclassify, swap, webhooks

from .support.servers import GUARD_SECONDS, Launcher

BAD_SETTINGS = [
    (["--port", "99999"], {}, "99999"),
    (["--port", "0"], {}, "port 0"),
    (["--port=-1"], {}, "-1"),
    ([], {"REPORTING_PORT": "70000"}, "70000"),
    (["--port", "eighty"], {}, "eighty"),
    (["--bootstrap", "maybe"], {}, "maybe"),
    ([], {"REPORTING_BOOTSTRAP": "perhaps"}, "perhaps"),
    (["--read-connections", "0"], {}, "read connections"),
    ([], {"REPORTING_ANSWER_MEMORY_MB": "-1"}, "answer memory"),
    (["--rate-per-second", "fast"], {}, "fast"),
    (["--log-level", "loud"], {}, "loud"),
    (["--no-such-flag"], {}, "--no-such-flag"),
]


@pytest.mark.parametrize(("argv", "environ", "names"), BAD_SETTINGS)
def test_every_bad_setting_is_one_line_and_exit_2(
    argv: list[str], environ: dict[str, str], names: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        load_config(argv, environ)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert names in lines[0] and "Traceback" not in err


def all_help(parser: argparse.ArgumentParser) -> str:
    """The help of a parser and of each of its subcommands."""
    texts = [parser.format_help()]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            texts += [sub.format_help() for sub in action.choices.values()]
    return "\n".join(texts)


TOOLS = {
    "loader": loader.build_parser,
    "keytool": keytool.build_parser,
    "generator": generator.build_parser,
    "import-gophish": gophish.build_parser,
    "reclassify": reclassify.build_parser,
    "swap": swap.build_parser,
    "export": export.build_parser,
    "webhooks": webhooks.build_parser,
}
PARSERS = {"server": lambda: build_parser({}), **TOOLS}


@pytest.mark.parametrize("name", PARSERS)
def test_help_is_plain_text(name: str) -> None:
    text = all_help(PARSERS[name]())
    for markup in ("``", ":func:", ":class:", ":meth:", "contract.md", "reporting-api.md"):
        assert markup not in text, (name, markup)
    assert not re.search(r"^\s*\.\. ", text, re.MULTILINE), name  # a directive
    assert not re.search(r"\bissue\b", text, re.IGNORECASE), name


def every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and its subcommands' parsers, nested ones too."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += every_parser(sub)
    return found


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_argument_has_help_and_no_empty_default(name: str) -> None:
    """The webhook tool's ``--company`` and ids had none; the generator's help said
    ``(default: None)`` of each required size and ``(default: False)`` of each switch."""
    for parser in every_parser(TOOLS[name]()):
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                assert action.help and action.help.strip(), (parser.prog, action.dest)
        text = parser.format_help()
        assert "(default: None)" not in text and "(default: False)" not in text, parser.prog


def test_bootstrap_help_names_its_values() -> None:
    text = " ".join(build_parser({}).format_help().split())
    found = re.search(r"--bootstrap BOOTSTRAP (.*?)\[env REPORTING_BOOTSTRAP\]", text)
    assert found is not None
    assert "true or false" in found[1]


@pytest.mark.system
def test_a_database_in_a_missing_directory_is_one_line_and_exit_2(
    tmp_path: Path, launcher: Launcher
) -> None:
    db = tmp_path / "nonexistent" / "dir" / "x.sqlite3"
    app = launcher.start(db, bootstrap=True)
    assert app.proc.wait(timeout=GUARD_SECONDS) == 2
    out, err = app.output_text()
    assert len(err.strip().splitlines()) == 1, err
    assert "does not exist" in err and "Traceback" not in err
    assert "Serving" not in out
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.system
def test_a_busy_port_is_one_line_exit_2_and_no_banner(sample_db: Path, launcher: Launcher) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = launcher.start(sample_db, "--port", str(port))  # the later --port wins
        code = app.proc.wait(timeout=GUARD_SECONDS)
    out, err = app.output_text()
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert f"cannot serve on 127.0.0.1:{port}" in err and "Traceback" not in err
    assert "Serving" not in out


@pytest.mark.system
def test_the_banner_follows_the_bound_socket(sample_db: Path, launcher: Launcher) -> None:
    app = launcher.serve(sample_db)
    out, _ = app.output_text()
    assert f"Serving the reporting API on {app.base}" in out
