"""Attacks on the read path (issue 11 items 1, 3, 5, 12, 14), each reproduced for real.

contract.md 2 (HEAD works wherever GET does; 404 before anything else about a record),
7 (ETag/304; large arrays stream), 1 (one tenant cannot starve another), 8 (/readyz
tells whether the database answers). Slow readers and the deep-page attack run against a
real server process over raw sockets; the others through the real app and client.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import sqlite3
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.data.listings import SUMMARY_RECORDS_INLINE
from app.data.pool import INLINE_PAGE_ROWS
from app.tools.loader import load_files

from .support.clients import inline_statements
from .support.factories import API, KEY_1, KEY_2, generated_events, make_sample_db, next_event_id
from .support.servers import GUARD_SECONDS, UNLIMITED, Launcher

BIG_EVENTS = 30_000  # about 6 MB of JSON: far more than the sockets' buffers hold
CAMPAIGN = f"{API}/campaigns/1/events"


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample plus enough events in campaign 1 that its array streams."""
    directory = tmp_path_factory.mktemp("big")
    db = make_sample_db(directory)
    extra = directory / "extra.json"
    events = generated_events(BIG_EVENTS, [1], next_event_id())
    extra.write_text(json.dumps({"campaign_events": events}), encoding="utf-8")
    load_files(db, [extra])
    return db


def port_of(server: Any) -> int:
    return int(server.base.rsplit(":", 1)[1])


def copy_of(db: Path, directory: Path) -> Path:
    return Path(shutil.copy(db, directory / "copy.sqlite3"))


def raw_get(port: int, path: str, key: str, method: str = "GET") -> socket.socket:
    """Send one request on a fresh socket and read nothing back (a client that stalls)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=GUARD_SECONDS)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = f"{method} {path} HTTP/1.1\r\nHost: x\r\nX-API-KEY: {key}\r\n\r\n"
    sock.sendall(request.encode())
    return sock


def read_head(sock: socket.socket) -> bytes:
    """The status line and headers of the answer waiting on ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


# ---- item 3: HEAD ------------------------------------------------------------------


@pytest.mark.system
async def test_head_on_a_streamed_array_sends_no_body(big_db: Path, tmp_path: Path) -> None:
    """HEAD then GET on one kept-alive connection: the second answer parses cleanly."""
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(copy_of(big_db, tmp_path), *UNLIMITED)
        sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=GUARD_SECONDS)
        with sock:
            both = (
                f"HEAD {CAMPAIGN} HTTP/1.1\r\nHost: x\r\nX-API-KEY: {KEY_1}\r\n\r\n"
                "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            sock.sendall(both.encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"ETag" in head or b"Etag" in head
    assert rest.startswith(b"HTTP/1.1 200 OK"), rest[:200]
    assert rest.endswith(b'{"status": "ok"}')


# ---- item 12: If-None-Match: * -----------------------------------------------------


async def test_if_none_match_star_is_404_for_a_record_that_does_not_exist(client: Any) -> None:
    star = {"X-API-KEY": KEY_1, "If-None-Match": "*"}
    for path in (f"{API}/campaigns/999999/events", f"{API}/campaigns/3/events"):
        response = await client.get(path, headers=star)  # free id, then company 2's id
        assert response.status == 404
    assert (await client.get(CAMPAIGN, headers=star)).status == 304
    assert (await client.get(f"{API}/victimsapi/7/events", headers=star)).status == 304
    assert (await client.get(f"{API}/victimsapi/999999/events", headers=star)).status == 404


# ---- item 1: slow readers ----------------------------------------------------------


@pytest.mark.system
async def test_stalled_readers_cannot_starve_other_tenants(big_db: Path, tmp_path: Path) -> None:
    """Four stalled readers of company 1: two are refused, the others never block company 2."""
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(copy_of(big_db, tmp_path), *UNLIMITED)
        stalled = [raw_get(port_of(server), CAMPAIGN, KEY_1) for _ in range(4)]
        try:
            heads = [read_head(sock) for sock in stalled]
            statuses = sorted(head.split(b" ", 2)[1] for head in heads)
            assert statuses == [b"200", b"200", b"429", b"429"], heads
            timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
            async with aiohttp.ClientSession(server.base, timeout=timeout) as session:
                # A count and a deep page need a pooled connection: one is always left.
                for page in ("1", "3"):
                    url = f"{API}/course-inscriptions?per_page=2&page={page}&filter[country]=Spain"
                    async with session.get(url, headers={"X-API-KEY": KEY_2}) as response:
                        assert response.status == 200
                async with session.get("/readyz") as response:
                    assert response.status == 200
                # Company 2's own long answer streams while company 1's are stalled.
                async with session.get(
                    f"{API}/campaigns/3/events", headers={"X-API-KEY": KEY_2}
                ) as response:
                    assert response.status == 200
                    await response.read()
        finally:
            for sock in stalled:
                sock.close()


@pytest.mark.system
async def test_a_reader_that_stops_is_cut_off_after_the_write_timeout(
    big_db: Path, tmp_path: Path
) -> None:
    """With --write-timeout 1 the server resets the stalled connection and frees its slot.

    A reset, not a close: a plain close would leave the kernel trickling the megabytes
    still in the send buffer to the slow client (an orderly end after all of them).
    """
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(
            copy_of(big_db, tmp_path),
            *UNLIMITED,
            "--write-timeout",
            "1",
            "--streams-per-company",
            "1",
        )
        sock = raw_get(port_of(server), CAMPAIGN, KEY_1)
        with sock:
            assert read_head(sock).startswith(b"HTTP/1.1 200")
            await asyncio.sleep(3)  # the write times out; the server aborts the connection
            sock.settimeout(10)  # a connection still open would leave recv waiting
            with pytest.raises(ConnectionResetError):
                while sock.recv(65536):
                    pass
        timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
        async with (
            aiohttp.ClientSession(server.base, timeout=timeout) as session,
            session.get(CAMPAIGN, headers={"X-API-KEY": KEY_1}) as response,
        ):
            assert response.status == 200  # the company's only stream slot is free again
            assert len(json.loads(await response.read())) > BIG_EVENTS


# ---- item 5: deep pages ------------------------------------------------------------


async def test_deep_pages_never_run_on_the_event_loop(make_client: Any, big_db: Path) -> None:
    """Once the total is known, shallow pages read inline; a deep one goes to a thread."""
    client = await make_client(db=str(big_db))
    inline = inline_statements(client)
    headers = {"X-API-KEY": KEY_1}
    assert (await client.get(f"{CAMPAIGN}?per_page=500&page=1", headers=headers)).status == 200
    inline.clear()
    assert (await client.get(f"{CAMPAIGN}?per_page=500&page=2", headers=headers)).status == 200
    assert any("LIMIT" in sql for sql in inline)  # shallow, total known: inline
    inline.clear()
    deep = INLINE_PAGE_ROWS // 500 + 30
    assert (await client.get(f"{CAMPAIGN}?per_page=500&page={deep}", headers=headers)).status == 200
    assert not any("LIMIT" in sql for sql in inline)  # deep: read on a pooled thread


@pytest.mark.parametrize(
    ("path", "on_the_loop"),
    [
        (f"{API}/victimsapi/changes?limit=5", True),
        (f"{API}/course-inscriptions/changes?limit=5", True),
        (f"{API}/victimsapi/changes?limit=5&filter%5Bdepartment%5D=Sales", False),
        (f"{API}/events?limit=5", False),
    ],
)
async def test_a_feed_window_reads_on_the_event_loop_only_when_it_reads_just_its_records(
    make_client: Any, path: str, on_the_loop: bool
) -> None:
    """A change feed without filters walks the company's own sequence index: its window
    reads no more rows than it returns, so it is read inline (a pooled thread's hand-over
    cost more than the read). A person filter, or the event feed's index that every
    company's events share, may pass over many rows: those go to a thread."""
    client = await make_client()
    inline = inline_statements(client)
    response = await client.get(path, headers={"X-API-KEY": KEY_1})
    assert response.status == 200
    records = await response.json()
    assert records or not on_the_loop  # an inline read that read something
    window = [sql for sql in inline if re.search(r"ORDER BY \w+\.seq, \w+\.id LIMIT", sql)]
    assert bool(window) == on_the_loop


async def read_again_inline(client: Any, path: str, pattern: str) -> bool:
    """Whether the second read of ``path`` (its total counted by the first) ran a
    statement matching ``pattern`` on the event loop's own connection."""
    inline = inline_statements(client)
    headers = {"X-API-KEY": KEY_1}
    assert (await client.get(path, headers=headers)).status == 200  # counts the total
    inline.clear()
    response = await client.get(path, headers=headers)
    assert response.status == 200 and await response.json()
    return any(re.search(pattern, sql) for sql in inline)


@pytest.mark.parametrize(
    ("query", "on_the_loop"),
    [
        ("", True),
        ("filter%5Btype%5D=report", False),
        ("filter%5Bwith_captcha%5D=false", False),
        ("filter%5Bautomation%5D=exclude_automated", False),
    ],
)
@pytest.mark.parametrize("paging", ["per_page=25&page=2&", ""])
async def test_a_filtered_campaign_event_read_never_runs_on_the_event_loop(
    make_client: Any, big_db: Path, query: str, on_the_loop: bool, paging: str
) -> None:
    """A campaign's events are walked by time: unfiltered, a short read walks no more rows
    than it returns, so it is read inline; a filter may pass over the whole campaign to
    find a few events (its reports), so its pages, total known or not, and its short
    arrays are read on a pooled thread."""
    client = await make_client(db=str(big_db), answer_memory_mb=0)
    path = f"{CAMPAIGN}?{paging}{query}"
    events = r"ORDER BY ev\.timestamp, ev\.id LIMIT"
    assert await read_again_inline(client, path, events) == on_the_loop


async def test_a_short_filtered_campaign_event_array_is_still_sent_whole(make_client: Any) -> None:
    """Read on a pooled thread, a filtered array under the inline size is still one body
    (a length, no stream: no stream slot taken), as an unfiltered one is."""
    client = await make_client(answer_memory_mb=0)
    inline = inline_statements(client)
    response = await client.get(f"{CAMPAIGN}?filter%5Btype%5D=click", headers={"X-API-KEY": KEY_1})
    assert response.status == 200 and await response.json()
    assert "Content-Length" in response.headers and "Transfer-Encoding" not in response.headers
    assert not any("LIMIT" in sql for sql in inline)


@pytest.mark.parametrize(
    ("path", "on_the_loop"),
    [
        (f"{API}/campaigns?per_page={SUMMARY_RECORDS_INLINE}", True),
        (f"{API}/campaigns?per_page={SUMMARY_RECORDS_INLINE + 1}", False),
        (f"{API}/courses?per_page={SUMMARY_RECORDS_INLINE}", True),
        (f"{API}/courses?per_page={SUMMARY_RECORDS_INLINE + 1}", False),
    ],
)
async def test_a_short_page_of_campaigns_or_courses_reads_on_the_event_loop(
    make_client: Any, path: str, on_the_loop: bool
) -> None:
    """Each campaign or course is a few rows of the writers' summaries: once its total is
    known, a page of at most SUMMARY_RECORDS_INLINE of them is read inline; a longer one
    (up to a thousand) goes to a thread (the answer is not kept: each request reads)."""
    client = await make_client(answer_memory_mb=0)
    page = r"ORDER BY c\.(launch_date, c\.)?id LIMIT"
    assert await read_again_inline(client, path, page) == on_the_loop


async def test_a_report_on_one_campaign_or_employee_reads_on_the_event_loop(
    make_client: Any, big_db: Path
) -> None:
    """One campaign's or one employee's report is a few rows of the writers' summaries:
    read on the event loop's own connection, with no hand-over to a pooled thread."""
    client = await make_client(db=str(big_db))
    inline = inline_statements(client)
    headers = {"X-API-KEY": KEY_1}
    for path, summary in (
        (f"{API}/campaigns/1", "campaign_funnels"),
        (f"{API}/victimsapi/1", "employee_phishing"),
    ):
        inline.clear()
        assert (await client.get(path, headers=headers)).status == 200
        assert any(summary in sql for sql in inline), path


# ---- item 14: a database replaced by rename ----------------------------------------


@pytest.mark.system
async def test_a_database_replaced_by_rename_is_served_afresh(
    sample_db: Path, tmp_path: Path
) -> None:
    with Launcher(tmp_path) as launcher:
        server = launcher.serve(sample_db, *UNLIMITED)
        timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
        async with aiohttp.ClientSession(
            server.base, headers={"X-API-KEY": KEY_1}, timeout=timeout
        ) as session:
            async with session.get(CAMPAIGN) as response:
                before = await response.json()
            replacement = tmp_path / "new" / "sample.sqlite3"
            replacement.parent.mkdir()
            shutil.copy(sample_db, replacement)
            conn = sqlite3.connect(replacement, isolation_level=None)  # other data
            conn.execute("DELETE FROM campaign_events WHERE campaign_id = 1 AND id % 2 = 0")
            conn.execute("UPDATE meta SET value = 'replaced' WHERE key = 'data_token'")
            conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            conn.close()
            os.replace(replacement, sample_db)
            await asyncio.sleep(0.3)
            async with session.get("/readyz") as response:
                assert response.status == 200
            async with session.get(CAMPAIGN) as response:
                after = await response.json()
            assert after == [e for e in before if e["id"] % 2]
