"""reporting-webhooks' subscriptions on both stores: a secret shown once, in the
Standard Webhooks form; list, disable, enable, delete and rotate-secret; refusals are
one line and exit code 1, and change nothing."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from app.tools.webhooks import build_parser, main, sender_settings

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


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--events", "fail,,open"),
        ("--events", "fail,"),
        ("--url", "https://a..b/"),
        ("--url", "https://%65xample.com/"),
        ("--url", "https://ex_ample.com/"),
        ("--url", f"https://{'a' * 64}.example/"),
        ("--url", "https://127.1/"),
        ("--url", "https://[fe80::1%25eth0]/"),
    ],
)
def test_an_empty_event_or_a_host_no_dns_name_nor_ip_is_refused(
    sample_db: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """urlsplit takes any host and the events' parser skips an empty element: both slips."""
    url, events = (value, "fail") if option == "--url" else ("https://hooks.example.com/", value)
    argv = ("create", "--company", "1", "--url", url, "--events", events, "--label", "x")
    code, out, err = run(capsys, ["--db", str(sample_db)], *argv)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
    assert option in err
    assert len(run(capsys, ["--db", str(sample_db)], "list")[1].splitlines()) == 1


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1:8443/in", "https://[::1]/in", "https://Hooks.Example.com./in",
     "https://localhost/in", "https://bücher.example/in", "https://xn--bcher-kva.example/"],
)  # fmt: skip
def test_a_dns_name_an_ip_literal_or_an_idna_name_is_taken(
    sample_db: Path, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    argv = ("create", "--company", "1", "--url", url, "--events", "open, click", "--label", "x")
    code, _, err = run(capsys, ["--db", str(sample_db)], *argv)
    assert code == 0, err


@pytest.mark.parametrize(
    ("option", "value"),
    [("--retry-schedule", s) for s in ("1_000", "１", "0,1e3", "+5", "5.", ".5", "0,,5")]
    + [("--allow-addresses", s) for s in ("127.0.0.1,,10.0.0.0/8", "127.0.0.1,", ",")],
)
def test_a_setting_of_other_than_plain_decimals_or_with_an_empty_element_is_refused(
    sample_db: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    """float() takes ``1_000``, fullwidth digits and exponents, which the docs' plain
    seconds are not; the addresses' parser skips an empty element."""
    argv = ("run", "--once", option, value)
    code, out, err = run(capsys, ["--db", str(sample_db)], *argv)
    assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err


def test_a_schedule_of_plain_decimals_is_taken() -> None:
    args = build_parser().parse_args(["--db", "x", "run", "--retry-schedule", "0, 5,0.05,300"])
    assert sender_settings(args).schedule == (0, 5, 0.05, 300)
