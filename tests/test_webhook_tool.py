"""reporting-webhooks' subscriptions on both stores: a secret shown once, in the
Standard Webhooks form; list, disable, enable, delete and rotate-secret; refusals are
one line and exit code 1, and change nothing."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from app.tools.webhooks import main

SECRET = re.compile(r"^  (whsec_[A-Za-z0-9+/=]+)$", re.MULTILINE)
URL = "https://user:pass@hooks.example.com/in?token=abc"


def run(capsys: pytest.CaptureFixture[str], store: list[str], *argv: str) -> tuple[int, str, str]:
    code = main([*store, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def check_the_tool(capsys: pytest.CaptureFixture[str], store: list[str]) -> None:
    code, out, _ = run(capsys, store, "create", "--company", "1", "--url", URL,
                       "--events", "fail,Report", "--label", "SOC")  # fmt: skip
    assert code == 0
    [secret] = SECRET.findall(out)
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    webhook_id = re.search(r"webhook (\d+)", out)[1]  # type: ignore[index]
    code, listed, _ = run(capsys, store, "list")
    assert "hooks.example.com" in listed and "fail,report" in listed and "enabled" in listed
    assert "whsec_" not in listed and "pass" not in listed and "token" not in listed
    assert run(capsys, store, "disable", webhook_id)[0] == 0
    assert "disabled" in run(capsys, store, "list")[1]
    assert run(capsys, store, "enable", webhook_id)[0] == 0
    code, out, _ = run(capsys, store, "rotate-secret", webhook_id)
    assert code == 0 and SECRET.findall(out)[0] != secret
    for argv in (
        ("create", "--company", "1", "--url", "http://hooks.example.com/", "--events", "fail",
         "--label", "x"),
        ("create", "--company", "1", "--url", URL, "--events", "fail,nope", "--label", "x"),
        ("create", "--company", "999", "--url", URL, "--events", "fail", "--label", "x"),
        ("disable", "999"),
    ):  # fmt: skip
        code, out, err = run(capsys, store, *argv)
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert len(run(capsys, store, "list")[1].splitlines()) == 2
    assert run(capsys, store, "delete", webhook_id)[0] == 0
    assert len(run(capsys, store, "list")[1].splitlines()) == 1


def test_subscriptions_on_sqlite(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check_the_tool(capsys, ["--db", str(sample_db)])


def test_subscriptions_on_postgresql(pg_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    check_the_tool(capsys, ["--database-url", pg_database])


@pytest.mark.parametrize("schedule", ["nan", "inf", "0,1e400", "0,-1", ""])
def test_a_retry_schedule_of_no_finite_seconds_is_refused(
    sample_db: Path, capsys: pytest.CaptureFixture[str], schedule: str
) -> None:
    """Refused before the sender starts (``inf`` would wait for ever; an empty one is no
    schedule, not the default)."""
    argv = ("run", "--once", "--retry-schedule", schedule)  # once: a schedule let through ends
    code, out, err = run(capsys, ["--db", str(sample_db)], *argv)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "retry" in err or "seconds" in err
