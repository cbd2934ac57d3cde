"""docs/operations.md's tool examples, run as written on the sample loaded as
reporting.sqlite3 in a fresh folder, with each tool's own main: the key tool's commands
(and the key ids their comment states), the webhook tool's session (what `create`
prints, its secret aside), and the retry schedule the page spells out."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from app.tools import keytool, loader, webhooks
from app.tools.webhook_sender import SCHEDULE

from .support.docs import blocks, prose, section
from .support.servers import ROOT

TOOLS: dict[str, Callable[[Sequence[str]], int]] = {
    "reporting-load": loader.main,
    "reporting-keys": keytool.main,
    "reporting-webhooks": webhooks.main,
}
SECRET = re.compile(r"whsec_[A-Za-z0-9+/]{43}=")
UNITS = {"s": 1, "min": 60, "h": 3600}


@pytest.fixture
def shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[str], str]:
    """Run one of the page's command lines (``$ `` prompt and ``#`` comments allowed) in a
    fresh folder holding the sample as reporting.sqlite3; return what it printed."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPORTING_DATABASE_URL", raising=False)

    def run(line: str) -> str:
        words = shlex.split(line.removeprefix("$ "), comments=True)
        assert TOOLS[words[0]](words[1:]) == 0, (line, capsys.readouterr())
        return capsys.readouterr().out

    run(f"reporting-load {ROOT / 'fixtures' / 'sample.json'} --db reporting.sqlite3 --no-progress")
    return run


def test_the_key_examples_run_with_the_ids_they_name(shell: Callable[[str], str]) -> None:
    [block] = blocks(section("API keys"), "sh")
    outputs = [shell(line) for line in block.splitlines()]
    # "rotate 4 / revoke 5: the ids create printed (on the sample, keys 1 to 3 are its own)"
    assert outputs[0].startswith("Created key 4 ") and outputs[1].startswith("Created key 5 ")
    assert outputs[3].startswith("Revoked key 4.\nCreated replacement key 6 ")
    assert outputs[4].startswith("Revoked key 5;")


def test_the_webhook_session_prints_what_is_shown(shell: Callable[[str], str]) -> None:
    [block] = blocks(section("Webhooks"), "console")
    lines = [line for line in block.splitlines() if line.startswith("$ ")]
    shown = block.split(lines[0] + "\n", 1)[1].split("\n$ ", 1)[0] + "\n"
    printed = shell(lines[0])
    assert SECRET.sub("whsec_", printed) == SECRET.sub("whsec_", shown)
    for line in lines[1:]:
        if line.split()[-1] != "run":  # the sender runs until SIGTERM
            shell(line)


def test_the_stated_retry_schedule_is_the_senders() -> None:
    said = re.search(r"attempts after (.*?)\.", " ".join(prose(section("Webhooks")).split()))
    assert said, "the page no longer states the schedule"
    delays = re.findall(r"(\d+) (s|min|h)\b", said[1])
    assert tuple(float(int(n) * UNITS[unit]) for n, unit in delays) == SCHEDULE
