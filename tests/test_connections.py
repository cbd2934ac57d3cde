"""Connections under attack: the "Connections" rules of docs/operations.md (Security).

A request's headers must arrive within the header timeout of their first byte, an idle
connection closes after the keep-alive timeout, connections are bounded per client
address and in total (beyond: 503 problem+json with Retry-After, then closed), and
running out of file descriptors is one log line a while, never a traceback storm.
Oversized headers are 431 and an oversized request line 414 (contract.md 5: problem+json),
and so is a request whose line and headers together pass their byte cap, counted as the
bytes arrive: a few hundred unfinished requests cost a few MB, not gigabytes;
tests/test_shims.py pins the aiohttp private names that make these possible.

Each test attacks a real server process (tests/servers.py) over raw sockets, with the
timeouts configured short; the only clock a test reads is a guard against hanging.
"""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.config import load_config
from app.web.aiohttp_shim import MAX_HEADER_BYTES
from app.web.connections import ACCEPT_BURST, RESERVED_FILES, open_files_plan

from .support.factories import API, KEY_1, PROBLEM_KEYS
from .support.servers import AppProcess, Launcher

GUARD = 30.0  # seconds; only so that a broken server cannot hang the suite
STEP = 0.05
HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def connect(app: AppProcess, source: str = "127.0.0.1") -> socket.socket:
    """A raw TCP connection to ``app`` from the local address ``source`` (any 127.x)."""
    where = urlsplit(app.base)
    sock = socket.socket()
    sock.settimeout(GUARD)
    sock.bind((source, 0))
    sock.connect((where.hostname, where.port))
    return sock


@contextmanager
def connections(
    app: AppProcess, count: int, source: str = "127.0.0.1"
) -> Iterator[list[socket.socket]]:
    """``count`` connections that each start a request and never finish its headers."""
    with ExitStack() as stack:
        socks = []
        for _ in range(count):
            sock = stack.enter_context(connect(app, source))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            socks.append(sock)
        yield socks


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def closed_by_server(sock: socket.socket, drip: bytes = b"") -> bytes:
    """Wait until the server closes ``sock`` (sending ``drip`` every step); what it sent."""
    received = b""
    for _ in range(int(GUARD / STEP)):
        if drip:
            try:
                sock.sendall(drip)
            except OSError:  # reset: closed while we wrote
                return received
        if select.select([sock], [], [], STEP)[0]:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
    raise AssertionError(f"the server kept the connection open for {GUARD} s")


def parse(data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one raw HTTP response."""
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines)}
    return int(status_line.split()[1]), headers, body


def ask(app: AppProcess, request: bytes = HEALTHZ, source: str = "127.0.0.1") -> int:
    """Send one request on a new connection that asks to be closed; the status."""
    with connect(app, source) as sock:
        sock.sendall(request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
        return parse(read_all(sock))[0]


def assert_refused(data: bytes) -> None:
    """A 503 problem+json with Retry-After that closes the connection."""
    status, headers, body = parse(data)
    assert status == 503, data
    assert headers["content-type"] == "application/problem+json; charset=utf-8"
    assert int(headers["retry-after"]) >= 1 and headers["connection"] == "close"
    problem = json.loads(body)
    assert set(problem) == PROBLEM_KEYS and problem["status"] == 503
    assert problem["request_id"] == headers["x-request-id"]


def logged(app: AppProcess, until: Callable[[str], bool]) -> str:
    """The server's stderr once ``until`` holds for it (it logs after answering)."""
    for _ in range(int(GUARD / STEP)):
        err = app.output_text()[1]
        if until(err):
            return err
        time.sleep(STEP)
    raise AssertionError(f"never logged: {app.output_text()[1][-2000:]}")


@pytest.mark.system  # starts a server process
def test_headers_that_never_finish_are_cut_off(launcher: Launcher, sample_db: Path) -> None:
    """Slowloris: a header line every 50 ms does not keep the connection open."""
    app = launcher.serve(sample_db, "--header-timeout", "0.3", "--keepalive-timeout", "600")
    with connect(app) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert closed_by_server(sock, drip=b"X-Drip: 1\r\n") == b""
    assert "request headers unfinished after 0.3 s" in logged(app, lambda e: "unfinished" in e)


@pytest.mark.system  # starts a server process
def test_a_pipelined_request_unfinished_behind_another_is_cut_off(
    launcher: Launcher, sample_db: Path
) -> None:
    """A request's start sent with the one before it is timed too, not kept alive."""
    app = launcher.serve(sample_db, "--header-timeout", "0.3", "--keepalive-timeout", "600")
    with connect(app) as sock:
        sock.sendall(HEALTHZ + b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        answered = closed_by_server(sock)
    assert answered.startswith(b"HTTP/1.1 200 ") and answered.count(b"HTTP/1.1 ") == 1
    assert "request headers unfinished after 0.3 s" in logged(app, lambda e: "unfinished" in e)


@pytest.mark.system  # starts a server process
def test_the_header_timeout_is_not_an_idle_timeout(launcher: Launcher, sample_db: Path) -> None:
    """A kept-alive connection may wait between requests longer than the header timeout."""
    app = launcher.serve(sample_db, "--header-timeout", "0.3", "--keepalive-timeout", "600")
    with connect(app) as sock:
        for _ in range(2):
            sock.sendall(HEALTHZ)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            time.sleep(0.6)  # twice the header timeout, idle
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # in pieces, well within the timeout
        sock.sendall(b"Host: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")


@pytest.mark.system  # starts a server process
def test_idle_connections_close_after_the_keep_alive_timeout(
    launcher: Launcher, sample_db: Path
) -> None:
    """aiohttp's default keeps an idle connection for an hour; ours for the setting."""
    app = launcher.serve(sample_db, "--keepalive-timeout", "0.3")
    with connect(app) as silent, connect(app) as served:
        served.sendall(HEALTHZ)
        assert served.recv(65536).startswith(b"HTTP/1.1 200 ")
        assert closed_by_server(served) == b""
        assert closed_by_server(silent) == b""


@pytest.mark.system  # starts a server process
def test_connections_are_bounded_per_address_and_in_total(
    launcher: Launcher, sample_db: Path
) -> None:
    """Beyond either limit: 503 problem+json at once; other addresses are still served."""
    flags = ("--max-connections-per-address", "3", "--max-connections", "5")
    app = launcher.serve(sample_db, *flags, "--header-timeout", "600")
    with connections(app, 3, "127.0.0.1"):
        for _ in range(20):
            with connect(app, "127.0.0.1") as extra:
                assert_refused(closed_by_server(extra))
        assert ask(app, source="127.0.0.2") == 200
        with connections(app, 2, "127.0.0.2"), connect(app, "127.0.0.3") as extra:
            assert_refused(closed_by_server(extra))  # 5 open: the total limit
    assert ask(app, source="127.0.0.1") == 200  # closed connections are forgotten
    err = logged(app, lambda e: "limit of 5 open connections total" in e)
    assert err.count("limit of 3 open connections per address") <= 2  # 20 refusals


def answers_held(app: AppProcess, count: int, source: str) -> list[int]:
    """The status of a request on each of ``count`` connections from ``source``, all held
    open together (0: reset before an answer arrived)."""
    statuses = []
    with ExitStack() as stack:
        for _ in range(count):
            sock = stack.enter_context(connect(app, source))
            head = b""
            try:
                sock.sendall(HEALTHZ)
                while b"\r\n\r\n" not in head and (chunk := sock.recv(65536)):
                    head += chunk
            except ConnectionResetError:
                pass
            statuses.append(parse(head)[0] if head else 0)
    return statuses


@pytest.mark.system  # starts a server process and its workers
def test_a_trusted_proxy_on_a_dual_stack_socket_counts_towards_the_total_only(
    launcher: Launcher, sample_db: Path, redis_url: str
) -> None:
    """The workers' socket on ``::`` takes IPv4 too: a proxy at 127.0.0.1 arrives as
    ``::ffff:127.0.0.1``, and is exempt all the same from the per-address bound."""
    workers = ("--host", "::", "--workers", "2", "--redis-url", redis_url)
    flags = ("--trusted-proxies", "127.0.0.1", "--max-connections-per-address", "1")
    app = launcher.serve(sample_db, *workers, *flags)
    assert answers_held(app, 4, "127.0.0.1") == [200] * 4
    assert answers_held(app, 4, "127.0.0.2").count(200) <= 2  # one a worker for the others


@pytest.mark.system  # starts a server process
def test_running_out_of_file_descriptors_is_one_line_not_a_storm(
    launcher: Launcher, sample_db: Path
) -> None:
    """With the open-file limit cut under the server, accept() fails; it keeps serving."""
    app = launcher.serve(sample_db, "--max-connections-per-address", "10000")
    pid = app.proc.pid
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 10, in_use + 10))
    with connections(app, 100):  # the kernel completes them; the server cannot accept
        logged(app, lambda e: "Too many open files" in e)
        time.sleep(1.5)  # asyncio retries accept() every second: let it fail again
    assert ask(app) == 200  # the limit still holds, but the files are free again
    err = app.output_text()[1]
    assert "Traceback" not in err
    assert err.count("cannot accept connections: Too many open files") <= 2, err[-3000:]


def test_the_open_file_limit_fits_the_connection_limit() -> None:
    """The soft limit is raised to fit the connections, which yield if the hard one cannot."""
    spare = RESERVED_FILES + ACCEPT_BURST
    assert open_files_plan(1000, 20_000, 20_000) == (1000, 20_000)
    assert open_files_plan(1000, 1024, 4096) == (1000, 1000 + spare)
    assert open_files_plan(1000, 1024, 1024) == (1024 - spare, 1024)
    assert open_files_plan(1000, 1024, resource.RLIM_INFINITY) == (1000, 1000 + spare)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--header-timeout", "0", "timeouts must be positive"),
        ("--keepalive-timeout", "-1", "timeouts must be positive"),
        ("--max-connections", "0", "max connections"),
        ("--max-connections-per-address", "0", "max connections"),
        ("--header-timeout", "soon", "soon"),
    ],
)
def test_bad_connection_settings_exit_2(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        load_config([flag, value], {})
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_connection_settings_from_the_environment() -> None:
    config = load_config([], {"REPORTING_HEADER_TIMEOUT": "2.5", "REPORTING_MAX_CONNECTIONS": "9"})
    assert (config.header_timeout, config.max_connections) == (2.5, 9)
    assert (
        load_config(["--max-connections", "7"], {"REPORTING_MAX_CONNECTIONS": "9"}).max_connections
        == 7
    )


REFUSED_BY_THE_PARSER = {
    "long-header": (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 9000, 431),
    "many-headers": (b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-N: 1\r\n" * 200, 431),
    "long-request-line": (b"GET /healthz?" + b"a" * 17_000 + b" HTTP/1.1\r\nHost: x", 414),
    "long-dashboard-line": (b"GET /dashboard/" + b"a" * 17_000 + b" HTTP/1.1\r\nHost: x", 414),
    "over-32-kib-of-head": (b"GET /dashboard/ HTTP/1.1\r\n" + b"X-P: " + b"p" * 8000 * 5, 431),
    "unknown-method": (b"FOO /dashboard/ HTTP/1.1\r\nHost: x", 501),
    "raw-byte-in-path": (b"GET /dashboard/\xff HTTP/1.1\r\nHost: x", 400),
}


@pytest.mark.system  # starts a server process
@pytest.mark.parametrize(
    ("head", "status"), REFUSED_BY_THE_PARSER.values(), ids=REFUSED_BY_THE_PARSER.keys()
)
def test_what_the_parser_refuses_gets_its_status_and_the_pages_policy(
    launcher: Launcher, sample_db: Path, head: bytes, status: int
) -> None:
    app = launcher.serve(sample_db)
    with connect(app) as sock:
        sock.sendall(head.rstrip(b"\r\n") + b"\r\nConnection: close\r\n\r\n")
        got, headers, body = parse(read_all(sock))
    assert got == status
    assert headers["content-type"] == "application/problem+json; charset=utf-8"
    assert json.loads(body)["status"] == status
    # The dashboard's policy, which a refusal whose page is unknown always carries.
    assert headers["x-frame-options"] == "DENY"
    assert "default-src" in headers["content-security-policy"]


@pytest.mark.system  # starts a server process
@pytest.mark.parametrize(
    "framing", [b"Content-Length: 100000000000\r\n", b"Transfer-Encoding: chunked\r\n"]
)
def test_a_request_body_is_refused_unread(
    launcher: Launcher, sample_db: Path, framing: bytes
) -> None:
    """Every endpoint only reads: a body announced (of any size) gets 400 problem+json
    and the connection is closed, however long the client goes on sending it."""
    app = launcher.serve(sample_db)
    with connect(app) as sock:
        sock.sendall(b"GET /api/companies/v1/campaigns HTTP/1.1\r\nHost: x\r\n" + framing + b"\r\n")
        got, headers, body = parse(closed_by_server(sock, drip=b"1000\r\n" + b"x" * 4096))
    assert got == 400
    assert headers["content-type"] == "application/problem+json; charset=utf-8"
    assert "no request body" in json.loads(body)["detail"]


@pytest.mark.system  # starts a server process
def test_long_filter_lists_fit_the_request_line(launcher: Launcher, sample_db: Path) -> None:
    """Three filters of 100 values each (about 11 KB) are a request, not a 414."""
    values = {
        "email": "employee.number.{:03d}%40northwind-logistics.example",
        "last_name": "Lastname-Hyphenated{:03d}",
        "department": "Department%20of%20Things%20{:03d}",
    }
    query = "&".join(
        f"filter[{name}]=" + ",".join(form.format(n) for n in range(100))
        for name, form in values.items()
    )
    target = f"{API}/course-inscriptions?{query}"
    assert len(target) > 8190  # aiohttp's default limit
    app = launcher.serve(sample_db)
    request = f"GET {target} HTTP/1.1\r\nHost: x\r\nX-API-KEY: {KEY_1}\r\n\r\n".encode()
    assert ask(app, request) == 200


def head_of(size: int) -> bytes:
    """A complete GET /healthz whose request line and headers are exactly ``size`` bytes."""
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    pad = size - len(head) - 2
    while pad > 0:
        value = min(pad, 8000) - len(b"X-Pad: \r\n")
        assert value >= 0, "no room for one more header"
        head += b"X-Pad: " + b"p" * value + b"\r\n"
        pad = size - len(head) - 2
    assert len(head) + 2 == size
    return head + b"\r\n"


@pytest.mark.system  # starts a server process
def test_the_header_bytes_of_a_request_are_capped(launcher: Launcher, sample_db: Path) -> None:
    """Line and headers of exactly the cap are served; one byte more is a 431 problem."""
    app = launcher.serve(sample_db)
    with connect(app) as sock:
        sock.sendall(head_of(MAX_HEADER_BYTES))
        assert parse(read_all(sock))[0] == 200
    with connect(app) as sock:
        sock.sendall(head_of(MAX_HEADER_BYTES + 1))
        status, headers, body = parse(read_all(sock))
    assert status == 431
    assert headers["content-type"] == "application/problem+json; charset=utf-8"
    problem = json.loads(body)
    assert set(problem) == PROBLEM_KEYS and problem["status"] == 431
    assert "over 32768 bytes" in logged(app, lambda e: "headers over" in e)


def rss_kib(app: AppProcess) -> int:
    """The server process's resident memory, from /proc."""
    status = Path(f"/proc/{app.proc.pid}/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1])


def attack(sock: socket.socket, headers: int = 126, size: int = 8000) -> None:
    """Send a request line and up to ``headers`` large headers, never the blank line."""
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        for n in range(headers):
            sock.sendall(b"X-Pad-%d: " % n + b"p" * size + b"\r\n")
    except OSError:  # refused and closed by the server
        return


@pytest.mark.system  # starts a server process
def test_unfinished_large_headers_cost_little_memory(launcher: Launcher, sample_db: Path) -> None:
    """150 requests of 1 MB of headers and 150 just under the cap, all left unfinished.

    Uncapped, the server would hold about 150 MB; capped, the refused ones hold nothing
    and the others the cap each, and the memory is given back once they close.
    """
    assert MAX_HEADER_BYTES > 30_000
    app = launcher.serve(sample_db, "--max-connections-per-address", "1000")
    assert ask(app) == 200
    before = rss_kib(app)
    with ExitStack() as stack:
        for _ in range(150):
            attack(stack.enter_context(connect(app)))
            sock = stack.enter_context(connect(app))
            sock.sendall(head_of(30_000)[:-4])  # unfinished, under the cap
        assert ask(app) == 200  # the server has read what was sent before
        during = rss_kib(app)
    for _ in range(3):
        assert ask(app) == 200
    after = rss_kib(app)
    print(f"RSS KiB before {before}, during {during}, after {after}")
    assert during - before < 40 * 1024
    assert after - before < 20 * 1024
