"""The access log under attack (contract.md 8; issue 11 items 6 and 8).

One access line per request, whatever the client sends: control characters and spaces
in a logged field are escaped (text and JSON formats), so ``%0D%0A`` in a path cannot
forge a line or a field. A client that leaves in the middle of a streamed answer is one
access line with status 499 on either store, never a 500 with a traceback nor a 503 that
takes the leaving for a database outage. A stream the store fails after its 200 was sent
ends in a reset, never in a second status line and a final chunk a client could take for
a whole answer: its access line keeps the 200, and one line says it was cut.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.tools.loader import load_files
from app.tools.pg_loader import load_pg
from app.web.logs import TextFormatter, escape_controls

from .support.factories import API, KEY_1, make_sample_db, sample
from .support.servers import AppProcess, Launcher, fetch
from .support.stores import fetch_all, run_apart

GUARD = 30.0  # seconds; only so that a broken server cannot hang the suite
# CR LF forging a whole access line, ESC driving a terminal, a Unicode line separator,
# a right-to-left override, a backslash and an undecodable byte.
HOSTILE_PATH = (
    "/x%0D%0A2025-01-01%2000:00:00,000%20INFO%20app.access%20method=GET%20path=/forged"
    "%20status=200%1B[31m%E2%80%A8%E2%80%AE%5C%FF"
)


def send_raw(app: AppProcess, target: str, request_id: str) -> None:
    """One request with a target no well-behaved client sends; its answer is read."""
    where = urlsplit(app.base)
    with socket.create_connection((where.hostname, where.port), timeout=GUARD) as sock:
        head = f"GET {target} HTTP/1.1\r\nHost: x\r\nX-Request-ID: {request_id}\r\n"
        sock.sendall(f"{head}Connection: close\r\n\r\n".encode())
        while sock.recv(65536):
            pass


def access_lines(app: AppProcess, request_id: str) -> list[str]:
    """The server's stderr lines once the request's access line is there."""
    for _ in range(int(GUARD / 0.05)):
        lines = app.output_text()[1].splitlines()
        if any(request_id in line for line in lines):
            return lines
        time.sleep(0.05)
    raise AssertionError(app.output_text()[1])


@pytest.mark.system  # starts a server process
def test_a_hostile_path_is_one_text_line(launcher: Launcher, sample_db: Path) -> None:
    app = launcher.serve(sample_db)
    send_raw(app, HOSTILE_PATH, "inject-text")
    lines = access_lines(app, "inject-text")
    (line,) = [line for line in lines if "app.access" in line and "/x" in line]
    assert "request_id=inject-text" in line
    assert not any("/forged" in other for other in lines if other != line)
    fields = dict(word.split("=", 1) for word in line.split(" app.access ", 1)[1].split(" "))
    assert fields["status"] == "404"  # the forged "status=200" stayed inside the path
    assert fields["path"].startswith("/x\\x0d\\x0a2025-01-01\\x2000:00:00,000\\x20INFO")
    assert fields["path"].endswith("status=200\\x1b[31m\\u2028\\u202e\\x5c%FF")
    assert line.isprintable()


@pytest.mark.system  # starts a server process
def test_a_hostile_path_is_one_json_line(launcher: Launcher, sample_db: Path) -> None:
    app = launcher.serve(sample_db, "--log-format", "json")
    send_raw(app, HOSTILE_PATH, "inject-json")
    lines = access_lines(app, "inject-json")
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    (entry,) = [e for e in entries if e.get("request_id") == "inject-json"]
    assert entry["status"] == 404
    assert entry["path"].startswith("/x\\x0d\\x0a2025-01-01 00:00:00,000 INFO")
    assert entry["path"].isprintable()
    assert all(line.isprintable() for line in lines)


def test_other_log_lines_escape_their_message() -> None:
    """Any message that quotes client input (an error's path) stays on one line."""
    record = logging.LogRecord(
        "app.errors", logging.ERROR, __file__, 1, "for %s", ("/a\r\nb",), None
    )
    assert TextFormatter("%(message)s").format(record) == "for /a\\x0d\\x0ab"
    assert escape_controls("/plain/path") == "/plain/path"


# ---- a client leaving mid-stream -----------------------------------------------------


def kernel_send_buffer_max() -> int:
    """The most a socket's send buffer grows to (tcp_wmem), 4 MiB where it cannot be read."""
    try:
        return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return 4 * 1024 * 1024


def big_events() -> dict[str, list[dict[str, object]]]:
    """Fixture data: events enough that campaign 1's array outgrows the kernel's buffers.

    Each event is over 150 bytes of JSON: 1.5 times the send buffer's maximum, so the server
    is still writing when the client leaves, whatever the machine.
    """
    people = [e["id"] for e in sample()["employees"] if e["company_id"] == 1]
    count = 3 * kernel_send_buffer_max() // 2 // 150
    events = [
        {"id": 800_000 + i, "campaign_id": 1, "employee_id": people[i % len(people)],
         "type": "click", "timestamp": f"2025-07-{1 + i % 28:02d}T08:00:{i % 60:02d}Z",
         "with_captcha": True}
        for i in range(count)
    ]  # fmt: skip
    return {"campaign_events": events}


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample plus big_events()."""
    directory = tmp_path_factory.mktemp("leaving")
    db = make_sample_db(directory)
    (directory / "more.json").write_text(json.dumps(big_events()))
    load_files(db, [directory / "more.json"])
    return db


def leave_mid_stream(app: AppProcess, request_id: str, query: str = "") -> None:
    """Ask for the big array, read its first bytes, then reset the connection."""
    where = urlsplit(app.base)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server cannot run ahead
    sock.settimeout(GUARD)
    try:
        sock.connect((where.hostname, where.port))
        head = f"GET {API}/campaigns/1/events{query} HTTP/1.1\r\nHost: x\r\nX-API-KEY: {KEY_1}\r\n"
        sock.sendall(
            f"{head}X-Request-ID: {request_id}\r\nAccept-Encoding: identity\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 200 ")
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset
        sock.close()


@pytest.mark.system  # starts a server process
def test_a_client_leaving_mid_stream_is_499_without_a_trace(
    launcher: Launcher, big_db: Path, tmp_path: Path
) -> None:
    """The production server (no handler cancellation), as a client really leaves it."""
    app = launcher.serve(Path(shutil.copy(big_db, tmp_path / "big.sqlite3")))
    leave_mid_stream(app, "leaver")
    lines = access_lines(app, "request_id=leaver")
    (line,) = [line for line in lines if "request_id=leaver" in line]
    assert " status=499 " in line
    err = app.output_text()[1]
    assert "Traceback" not in err and " ERROR " not in err, err[-3000:]
    status, _, body = fetch(f"{app.base}/api/companies/v1/campaigns/1/events", {"X-API-KEY": KEY_1})
    assert status == 200 and body.endswith(b"]")  # still serving


def serve_big_on_postgresql(launcher: Launcher, pg_database: str, tmp_path: Path) -> AppProcess:
    """A server over the PostgreSQL database, campaign 1 given events enough to stream."""
    (tmp_path / "more.json").write_text(json.dumps(big_events()))
    asyncio.run(load_pg(pg_database, [tmp_path / "more.json"]))
    return launcher.serve(tmp_path / "unused.sqlite3", "--database-url", pg_database)


@pytest.mark.system
def test_a_client_leaving_a_postgresql_stream_is_499_too(
    launcher: Launcher, pg_database: str, tmp_path: Path
) -> None:
    """Not 503 with "the database does not answer": the client's leaving is no outage."""
    app = serve_big_on_postgresql(launcher, pg_database, tmp_path)
    leave_mid_stream(app, "leaver", "?format=csv")
    lines = access_lines(app, "request_id=leaver")
    (line,) = [line for line in lines if "request_id=leaver" in line]
    assert " status=499 " in line
    err = app.output_text()[1]
    assert "does not answer" not in err and "Traceback" not in err, err[-3000:]
    url = f"{app.base}/api/companies/v1/campaigns/1/events?format=csv"
    status, _, body = fetch(url, {"X-API-KEY": KEY_1})
    assert status == 200 and body.endswith(b"\r\n")  # still serving


# ---- a stream the store fails mid-body -----------------------------------------------

FINAL_CHUNK = b"\r\n0\r\n\r\n"


def cut_mid_stream(app: AppProcess, request_id: str, cut: Callable[[], None]) -> bytes:
    """Ask for the big array, read its first bytes, ``cut`` the store while the server
    waits to write more, then read to the end; every byte the client received."""
    where = urlsplit(app.base)
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server cannot run ahead
        sock.settimeout(GUARD)
        sock.connect((where.hostname, where.port))
        head = f"GET {API}/campaigns/1/events HTTP/1.1\r\nHost: x\r\nX-API-KEY: {KEY_1}\r\n"
        sock.sendall(
            f"{head}X-Request-ID: {request_id}\r\nAccept-Encoding: identity\r\n\r\n".encode()
        )
        received = sock.recv(4096)
        cut()
        try:
            while part := sock.recv(65536):
                received += part
        except ConnectionResetError:
            pass
    return received


def assert_cut_off(app: AppProcess, received: bytes, cause: str) -> None:
    """The client saw a 200 that never ended: no second status line, no final chunk; the
    access line says 200 and one line (no trace) says why it was cut."""
    assert received.startswith(b"HTTP/1.1 200 ")
    assert b"HTTP/1.1 5" not in received, received[-1000:]
    assert not received.endswith(FINAL_CHUNK), received[-1000:]
    lines = access_lines(app, "request_id=cutter")
    (line,) = [line for line in lines if "request_id=cutter" in line and "app.access" in line]
    assert " status=200 " in line
    (cut,) = [line for line in lines if "cut short" in line]
    assert "(request id cutter)" in cut and cause in cut, cut
    err = app.output_text()[1]
    assert "Traceback" not in err and " status=503 " not in err, err[-3000:]


@pytest.mark.system
def test_a_stream_whose_file_fails_is_cut_off(
    launcher: Launcher, big_db: Path, tmp_path: Path
) -> None:
    """SQLite: the pages not yet read are damaged while the answer streams."""
    db = Path(shutil.copy(big_db, tmp_path / "big.sqlite3"))
    app = launcher.serve(db)

    def damage() -> None:  # every page but the first (the header and the schema): zeros
        with db.open("r+b") as file:
            file.seek(4096)
            file.write(bytes(db.stat().st_size - 4096))

    assert_cut_off(app, cut_mid_stream(app, "cutter", damage), "SQLite: ")


@pytest.mark.system
def test_a_postgresql_stream_whose_connection_is_cut_is_cut_off(
    launcher: Launcher, pg_database: str, tmp_path: Path
) -> None:
    """The reading backend ended (pg_terminate_backend, a restart) mid-stream."""
    app = serve_big_on_postgresql(launcher, pg_database, tmp_path)
    others = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    others += " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    received = cut_mid_stream(app, "cutter", lambda: run_apart(fetch_all(pg_database, others)))
    assert_cut_off(app, received, "PostgreSQL: ")
    status, _, body = fetch(f"{app.base}{API}/campaigns/1/events", {"X-API-KEY": KEY_1})
    assert status == 200 and body.endswith(b"]")  # still serving
