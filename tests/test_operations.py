"""Operating the service: access log, log formats, signals, configuration.

Pins contract.md 8 (Operations): one access-log line per request with method, path,
status, duration, company and request id and never the key, text or JSON format;
SIGTERM and SIGINT let in-flight requests finish and exit 0 (a real server process);
SIGHUP to one process is logged and ends nothing, and with workers it starts new ones
while the old ones finish their answers;
``--help`` lists every REPORTING_* variable with its default; flags win over the
environment; a bad setting is refused clearly.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import http.client
import io
import json
import logging
import logging.handlers
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from aiohttp.test_utils import TestClient
from multidict import CIMultiDict

from app.config import Config, load_config
from app.data import events
from app.data.pool import ReadPool, Stream
from app.main import create_app
from app.tools.loader import load_files
from app.web.formats import encode_json_chunk
from app.web.logs import JsonFormatter, setup_logging

from .support.clients import ProblemTestServer
from .support.factories import API, KEY_1, make_sample_db, sample
from .support.servers import (
    GUARD_SECONDS,
    VARIABLES,
    Launcher,
    clean_env,
    fetch,
    listening_sockets,
    run_python,
    stop,
    worker_pids,
)

CAMPAIGN = f"{API}/campaigns/1/events"
ACCESS_FIELDS = {"method", "path", "status", "duration_ms", "company", "request_id"}


@pytest.fixture
async def logged_client(aiohttp_client: Any, sample_db: Path) -> TestClient:
    """The real app over the sample data, access-logging like production."""
    return await aiohttp_client(ProblemTestServer(create_app(Config(db=str(sample_db)))))


async def send(client: TestClient, path: str, key: str, request_id: str) -> int:
    """One request; returns its status once its body is read."""
    response = await client.get(path, headers={"X-API-KEY": key, "X-Request-ID": request_id})
    await response.read()
    return response.status


async def wait_for(condition: Any) -> None:
    """Let the server finish logging: the line is written after the response is sent."""
    for _ in range(200):
        if condition():
            return
        await asyncio.sleep(0.01)


async def test_one_access_line_per_request_and_never_the_key(
    logged_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.access")
    wrong = "rk_wrong_" + "k" * 40
    cases = [(CAMPAIGN, KEY_1, 200, 1), (CAMPAIGN, wrong, 401, None)]
    cases.append((f"{API}/campaigns/999999/events", KEY_1, 404, 1))
    for number, (path, key, status, _) in enumerate(cases):
        assert await send(logged_client, path, key, f"ops-{number}") == status

    def lines() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "app.access"]

    await wait_for(lambda: len(lines()) >= len(cases))
    assert len(lines()) == len(cases)
    for number, (path, _, status, company) in enumerate(cases):
        (record,) = [r for r in lines() if r.access["request_id"] == f"ops-{number}"]
        fields = record.access
        assert set(fields) >= ACCESS_FIELDS
        assert (fields["method"], fields["path"], fields["status"]) == ("GET", path, status)
        assert fields["company"] == company
        assert isinstance(fields["duration_ms"], float) and fields["duration_ms"] >= 0
        message = record.getMessage()
        for text in ("GET", path, str(status), f"ops-{number}", "duration"):
            assert text in message
    everything = caplog.text + "".join(JsonFormatter().format(r) for r in caplog.records)
    assert KEY_1 not in everything and wrong not in everything


@pytest.mark.parametrize("path", [CAMPAIGN, "/nope"])
@pytest.mark.parametrize("copies", [("dup-a", "dup-b"), ("dup-a", "dup-a")])
async def test_a_repeated_request_id_is_replaced_everywhere(
    logged_client: TestClient, caplog: pytest.LogCaptureFixture, path: str, copies: tuple[str, str]
) -> None:
    """X-Request-ID on two lines is not one sane id, even when they agree: a made one is
    sent back, and the access line and a problem body name that same id."""
    caplog.set_level(logging.INFO, logger="app.access")
    headers = CIMultiDict([("X-API-KEY", KEY_1), *(("X-Request-ID", c) for c in copies)])
    response = await logged_client.get(path, headers=headers)
    sent_back = response.headers.getall("X-Request-ID")
    assert len(sent_back) == 1 and sent_back[0] not in copies, sent_back
    assert re.fullmatch(r"[0-9a-f]{32}", sent_back[0])
    if response.status == 404:
        assert (await response.json(content_type=None))["request_id"] == sent_back[0]
    await response.read()

    def ids() -> list[str]:
        return [r.access["request_id"] for r in caplog.records if r.name == "app.access"]

    await wait_for(lambda: ids())
    assert ids() == sent_back


async def test_the_access_line_names_the_client_a_trusted_proxy_forwarded(
    aiohttp_client: Any, sample_db: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The client address the limits charge, on every line (an API request, a health
    check): behind a proxy of REPORTING_TRUSTED_PROXIES, the one it forwarded."""
    config = Config(db=str(sample_db), trusted_proxies="127.0.0.1")
    client = await aiohttp_client(ProblemTestServer(create_app(config)))
    caplog.set_level(logging.INFO, logger="app.access")
    forwarded = {"X-Forwarded-For": "198.51.100.1, 203.0.113.7"}
    for path, request_id in ((CAMPAIGN, "proxied-api"), ("/healthz", "proxied-health")):
        headers = {"X-API-KEY": KEY_1, "X-Request-ID": request_id, **forwarded}
        await (await client.get(path, headers=headers)).read()
    await (await client.get("/healthz", headers={"X-Request-ID": "direct"})).read()

    def remote(request_id: str) -> object:
        found = [r.access for r in caplog.records if r.name == "app.access"]
        return next((f["remote"] for f in found if f["request_id"] == request_id), None)

    await wait_for(lambda: remote("direct") is not None)
    assert remote("proxied-api") == remote("proxied-health") == "203.0.113.7"
    assert remote("direct") == "127.0.0.1"


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Put the root logger back as pytest had it after setup_logging replaced it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.usefixtures("restored_logging")
async def test_json_log_format(logged_client: TestClient) -> None:
    writer = setup_logging("INFO", "json")
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.handlers.QueueHandler)  # the standard library's
    assert isinstance(writer.formatter, JsonFormatter)
    stream = io.StringIO()
    writer.stream = stream
    assert await send(logged_client, CAMPAIGN, KEY_1, "json-1") == 200
    await wait_for(lambda: "json-1" in stream.getvalue())
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    (entry,) = [e for e in entries if e.get("request_id") == "json-1"]
    assert set(entry) >= ACCESS_FIELDS
    assert (entry["method"], entry["path"], entry["status"], entry["company"]) == (
        "GET",
        CAMPAIGN,
        200,
        1,
    )
    assert entry["logger"] == "app.access" and entry["level"] == "INFO"
    assert KEY_1 not in stream.getvalue()


@pytest.fixture(scope="module")
def big_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The sample plus 30,000 events in campaign 1 by the real loader: a streamed answer
    larger than what loopback socket buffers absorb (about 4 MB), so that it is still
    being sent while a client does not read it."""
    directory = tmp_path_factory.mktemp("ops")
    db = make_sample_db(directory)
    people = [e["id"] for e in sample()["employees"] if e["company_id"] == 1]
    events = [
        {"id": 700_000 + i, "campaign_id": 1, "employee_id": people[i % len(people)],
         "type": "open", "timestamp": f"2025-06-{1 + i % 28:02d}T10:00:{i % 60:02d}Z",
         "with_captcha": False}
        for i in range(30_000)
    ]  # fmt: skip
    (directory / "more.json").write_text(json.dumps({"campaign_events": events}))
    load_files(db, [directory / "more.json"])
    own = sum(e["campaign_id"] == 1 for e in sample()["campaign_events"])
    return db, own + len(events)


@pytest.mark.system
@pytest.mark.parametrize("workers", [1, 2], ids=["1-worker", "2-workers"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_signal_lets_the_request_in_flight_finish_then_exits_0(
    signum: int,
    workers: int,
    big_template: tuple[Path, int],
    tmp_path: Path,
    launcher: Launcher,
    request: pytest.FixtureRequest,
) -> None:
    template, expected = big_template
    # Two workers (gunicorn, contract.md 15) need Redis; the arbiter passes the signal on.
    flags = []
    if workers > 1:
        flags = ["--workers", "2", "--redis-url", request.getfixturevalue("redis_url")]
    app = launcher.serve(Path(shutil.copy(template, tmp_path / "db.sqlite3")), *flags)
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(app.base).port, timeout=30)
    conn.request("GET", "/healthz", headers={"X-Request-ID": "ready"})  # the connection is
    ready = conn.getresponse()  # accepted and kept alive: one process serves it throughout
    assert ready.status == 200 and ready.read()
    deadline = time.monotonic() + GUARD_SECONDS
    ready_line = re.compile(r"\[(\d+)\] INFO app\.access .*request_id=ready")
    while not (serving := ready_line.search(app.output_text()[1])):  # written within a second
        assert time.monotonic() < deadline, app.output_text()
        time.sleep(0.05)
    conn.request("GET", CAMPAIGN, headers={"X-API-KEY": KEY_1, "X-Request-ID": "inflight"})
    response = conn.getresponse()  # the answer has begun; its body (beyond the socket
    app.proc.send_signal(signum)  # buffers) waits for this client to read it
    while f"[{serving[1]}] INFO app.server shutting down" not in app.output_text()[1]:
        assert time.monotonic() < deadline and app.proc.poll() is None, app.output_text()
        time.sleep(0.05)  # until the serving process saw the signal
    body = response.read()
    assert response.status == 200
    events = json.loads(body)
    assert isinstance(events, list) and len(events) == expected
    try:
        code = app.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running 30 s after the signal; its output: {app.output_text()}")
    assert code == 0
    out, err = app.output_text()
    assert KEY_1 not in out + err
    # The request was still being answered when shutdown began, and it was logged as a 200.
    # Both lines are log records of the process that served it, and logs go to stderr.
    served = re.search(
        r"\[(\d+)\] INFO app\.access method=GET path=\S+/campaigns/1/events status=200 "
        r".*request_id=inflight",
        err,
    )
    assert served, err
    own = [line for line in err.splitlines() if f"[{served[1]}] " in line]
    shutdown = [i for i, line in enumerate(own) if "shutting down" in line]
    assert shutdown and shutdown[0] < next(i for i, line in enumerate(own) if "inflight" in line)


@pytest.mark.system
@pytest.mark.parametrize(
    ("workers", "shutdown"), [(1, 4.0), (2, 12.0)], ids=["1-worker", "2-workers-12s"]
)
def test_a_stream_still_read_at_the_end_of_the_shutdown_time_is_cut_then(
    workers: int,
    shutdown: float,
    big_template: tuple[Path, int],
    tmp_path: Path,
    launcher: Launcher,
    request: pytest.FixtureRequest,
) -> None:
    """A client reading a stream slowly but steadily never makes its write wait long: the
    stream is still cut within the shutdown time by the server's own clock (aiohttp on its
    own waited twice as long), and the process ends then: its cleanup and the
    interpreter's exit took up to 3.5 s more on a loaded machine (four busy loops on two
    cores), hence 5 s allowed for the end.

    12 s: aiohttp rounds up the deadline of each half over 5 s, which made it 13 to 14 s,
    past gunicorn's graceful timeout of 13 s: the worker was killed, its lines lost.

    One read connection: the stream holds the first one the app's cleanup closes, while
    the cut stream still ends its snapshot on it (with four, closed last, the 500 that
    closing it under the stream gave came only on a loaded machine).
    """
    template, _ = big_template
    flags = ["--shutdown-timeout", str(shutdown), "--read-connections", "1"]
    if workers > 1:
        flags += ["--workers", "2", "--redis-url", request.getfixturevalue("redis_url")]
    app = launcher.serve(Path(shutil.copy(template, tmp_path / "db.sqlite3")), *flags)
    with socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect(("127.0.0.1", urlsplit(app.base).port or 0))
        client.sendall(
            f"GET {CAMPAIGN} HTTP/1.1\r\nHost: x\r\nX-API-KEY: {KEY_1}\r\n"
            "X-Request-ID: slow\r\n\r\n".encode()
        )
        assert client.recv(1024).startswith(b"HTTP/1.1 200")
        app.proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        received = 0
        while app.proc.poll() is None and time.monotonic() < signalled + GUARD_SECONDS:
            received += len(client.recv(1024))  # about 50 KB a second, never stopping long
            time.sleep(0.02)
        took = time.monotonic() - signalled
    assert app.proc.wait() == 0
    assert received > 0  # it was reading throughout
    assert took < shutdown + 5, f"ended {took:.1f} s after the signal: {app.output_text()}"
    cut = f"WARNING app.errors cut short by the shutdown: GET {CAMPAIGN} (request id slow)"
    log = app.output_text()[1]
    assert cut in log, log  # the whole log: what ended the stream otherwise
    cut_at = re.search(rf"^(\S+ \S+) \[(\d+)\] {re.escape(cut)}$", log, re.MULTILINE)
    assert cut_at, log
    began = re.search(rf"^(\S+ \S+) \[{cut_at[2]}\] INFO app\.server shutting down", log, re.M)
    assert began, log
    waited = logged_at(cut_at[1]) - logged_at(began[1])
    assert waited < shutdown + 0.5, log
    if workers > 1:  # the worker that served it ended by itself, not by gunicorn's SIGKILL
        served = re.search(r"\[(\d+)\] WARNING app\.errors cut short", log)
        assert served and f"Worker exiting (pid: {served[1]})" in log, log


def logged_at(stamp: str) -> float:
    """The seconds of a log line's time, as the text format writes it."""
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


async def test_the_cleanup_closes_a_connection_a_stream_holds_once_it_is_returned(
    big_template: tuple[Path, int],
) -> None:
    """At a shutdown aiohttp cancels a stream still being sent and goes on to the app's
    cleanup without waiting for it; the stream then ends its snapshot on its connection,
    which must still be open."""
    pool = await ReadPool.open(big_template[0], 1)
    listing = events.campaign_listing(1, 1)
    async with pool.whole(listing, encode_json_chunk) as stream:
        assert isinstance(stream, Stream)
        closing = asyncio.create_task(pool.close())
        await asyncio.sleep(0.2)
        assert not closing.done()
    await asyncio.wait_for(closing, GUARD_SECONDS)


async def test_the_cleanup_does_not_wait_for_a_connection_that_cannot_roll_back(
    sample_db: Path,
) -> None:
    """A borrowed connection that fails when returned (here, closed under its borrower) is
    not lent again, nor waited for by the cleanup."""
    pool = await ReadPool.open(sample_db, 1)
    with pytest.raises(ValueError, match="no active connection"):
        async with pool.acquire() as conn:
            await conn.close()
    await asyncio.wait_for(pool.close(), 5)


@pytest.mark.system
def test_sighup_to_one_process_is_logged_and_it_serves_on(
    big_template: tuple[Path, int], tmp_path: Path, launcher: Launcher
) -> None:
    """One process has nothing to reload: SIGHUP (a reload, a closed terminal) ends no
    request; Python's default would end the process at once, mid-answer."""
    template, expected = big_template
    app = launcher.serve(Path(shutil.copy(template, tmp_path / "db.sqlite3")))
    conn = http.client.HTTPConnection("127.0.0.1", urlsplit(app.base).port, timeout=30)
    conn.request("GET", CAMPAIGN, headers={"X-API-KEY": KEY_1})
    response = conn.getresponse()  # the answer has begun; the rest waits for this client
    app.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + GUARD_SECONDS
    while "INFO app.server SIGHUP ignored" not in app.output_text()[1]:
        assert time.monotonic() < deadline and app.proc.poll() is None, app.output_text()
        time.sleep(0.05)
    assert response.status == 200 and len(json.loads(response.read())) == expected
    conn.request("GET", "/healthz")  # the same connection, still kept alive
    assert conn.getresponse().status == 200
    conn.close()
    assert app.proc.poll() is None
    app.proc.send_signal(signal.SIGTERM)
    assert app.proc.wait(timeout=GUARD_SECONDS) == 0


@pytest.mark.system
@pytest.mark.parametrize("to_workers", [False, True], ids=["arbiter", "every-process"])
def test_sighup_replaces_the_workers_and_lets_their_requests_finish(
    to_workers: bool,
    big_template: tuple[Path, int],
    tmp_path: Path,
    launcher: Launcher,
    redis_url: str,
) -> None:
    """SIGHUP to the arbiter (a reload), or to every process (a closed terminal): new
    workers start, and an old one ends only once the answer it was sending is complete."""
    template, expected = big_template
    db = Path(shutil.copy(template, tmp_path / "db.sqlite3"))
    app = launcher.serve(db, "--workers", "2", "--redis-url", redis_url)
    port = urlsplit(app.base).port or 0
    deadline = time.monotonic() + GUARD_SECONDS
    while len(old := set(worker_pids(app))) != 2 or listening_sockets(port) != 2:
        assert time.monotonic() < deadline and app.proc.poll() is None, app.output_text()
        time.sleep(0.05)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/healthz", headers={"X-Request-ID": "ready"})
    assert conn.getresponse().read()  # kept alive: the same worker serves the stream
    ready_line = re.compile(r"\[(\d+)\] INFO app\.access .*request_id=ready")
    while not (serving := ready_line.search(app.output_text()[1])):
        assert time.monotonic() < deadline, app.output_text()
        time.sleep(0.05)
    conn.request("GET", CAMPAIGN, headers={"X-API-KEY": KEY_1})
    response = conn.getresponse()  # begun; the rest waits for this client
    for pid in [app.proc.pid, *(old if to_workers else [])]:
        os.kill(pid, signal.SIGHUP)
    while f"[{serving[1]}] INFO app.server shutting down" not in app.output_text()[1]:
        assert time.monotonic() < deadline and int(serving[1]) in worker_pids(app), (
            app.output_text()
        )
        time.sleep(0.05)
    assert response.status == 200 and len(json.loads(response.read())) == expected
    conn.close()
    while (new := set(worker_pids(app))) & old or len(new) != 2 or listening_sockets(port) != 2:
        assert time.monotonic() < deadline and app.proc.poll() is None, app.output_text()
        time.sleep(0.05)
    assert fetch(f"{app.base}/healthz")[0] == 200
    assert stop(app.proc) == 0
    assert f"Worker exiting (pid: {serving[1]})" in app.output_text()[1]


@pytest.mark.system
def test_help_lists_every_variable_and_its_default() -> None:
    result = run_python("-m", "app", "--help", env=clean_env(COLUMNS="200"))
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for variable, default in VARIABLES.items():
        found = re.search(rf"\[env {variable}\] \(default: ([^)]*)\)", text)
        assert found, variable
        if default is not None:
            assert re.fullmatch(rf"{re.escape(default)}(\.0)?", found[1]), (variable, found[1])


@pytest.mark.parametrize(
    ("flag", "variable", "flag_value", "env_value", "attribute", "default"),
    [
        ("--port", "REPORTING_PORT", "9001", "9002", "port", 8080),
        ("--rate-burst", "REPORTING_RATE_BURST", "5", "7", "rate_burst", 20),
        ("--log-format", "REPORTING_LOG_FORMAT", "json", "text", "log_format", "text"),
        ("--cors-origins", "REPORTING_CORS_ORIGINS", "https://a.example", "https://b.example",
         "cors_origins", ""),
    ],
)  # fmt: skip
def test_flags_win_over_environment(
    flag: str, variable: str, flag_value: str, env_value: str, attribute: str, default: Any
) -> None:
    def value(config: Config) -> str:
        return str(getattr(config, attribute))

    assert value(load_config([flag, flag_value], {variable: env_value})) == flag_value
    assert value(load_config([], {variable: env_value})) == env_value
    assert getattr(load_config([], {}), attribute) == default


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {"REPORTING_LOG_FORMAT": "xml"}, "text or json"),
        (["--log-format", "xml"], {}, "text or json"),
        (["--rate-burst", "0"], {}, "burst"),
        (["--trusted-proxies", "10.0.0.300"], {}, "10.0.0.300"),
        (["--port", "eighty"], {}, "eighty"),
        (["--log-level", "loud"], {}, "loud"),
        ([], {"REPORTING_PORT": "eighty"}, "eighty"),
    ],
    ids=["env-format", "flag-format", "burst", "proxy", "flag-port", "log-level", "env-port"],
)
def test_bad_setting_exits_2_with_a_clear_error(
    argv: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        load_config(argv, environ)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


@pytest.mark.system
def test_bad_environment_fails_the_command_cleanly() -> None:
    result = run_python("-m", "app", env=clean_env(COLUMNS="200", REPORTING_LOG_FORMAT="xml"))
    assert result.returncode == 2
    assert "text or json" in result.stderr and "Traceback" not in result.stderr
