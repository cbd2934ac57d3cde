"""HTTP behaviour of the running app: validators, compression, headers, methods, streaming.

Pins contract.md 7 (ETag and If-None-Match, the tag changing with a load, gzip over
1 KiB with Vary, Cache-Control, nosniff, no version in Server, X-Request-ID, large arrays
streamed) and contract.md 2.1 (HEAD wherever GET, 405 with Allow). CORS is in
test_cors.py.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, make_mocked_request

from app.data.schema import TOKEN
from app.keys import ANSWERS, DATA_VERSION
from app.tools.loader import load_files
from app.web.headers import assign_request_id
from app.web.responder import Known, TokenCache, make_etag

from .support.clients import MakeClient, traced
from .support.factories import API, KEY_1, KEY_2, assert_problem, get, make_sample_db, sample
from .support.stores import ON_POSTGRESQL, Store, activity, on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

CAMPAIGN = f"{API}/campaigns/1/events"  # company 1, 71 events: well over 1 KiB
EMPLOYEE = f"{API}/victimsapi/7/events"
INSCRIPTIONS = f"{API}/course-inscriptions"
ENDPOINTS = (CAMPAIGN, EMPLOYEE, INSCRIPTIONS)
SMALL = f"{API}/victimsapi/11/events"  # an employee of company 1 with 2 events
JSON_TYPE = "application/json; charset=utf-8"
BIG_EXTRA = 5000  # events added to campaign 1: more than CHUNK_ROWS, so it streams


async def get_raw(
    client: TestClient, path: str, method: str = "GET", **headers: str
) -> tuple[Any, bytes]:
    """GET (or ``method``) with KEY_1 without transparent decompression: the bytes as sent."""
    url, sent = client.make_url(path), {"X-API-KEY": KEY_1, **headers}
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.request(method, url, headers=sent) as resp,
    ):
        return resp, await resp.read()


def company_employees(company_id: int) -> list[int]:
    """Employee ids of one company, from the fixture."""
    return [e["id"] for e in sample()["employees"] if e["company_id"] == company_id]


def write_events(path: Path, first_id: int, count: int, seed: int = 7) -> list[dict[str, Any]]:
    """A fixture file adding `count` events to campaign 1 (some timestamps shared)."""
    rng = random.Random(seed)
    people = company_employees(1)
    events = [
        {
            "id": first_id + i,
            "campaign_id": 1,
            "employee_id": rng.choice(people),
            "type": rng.choice(["open", "click", "report", "fail"]),
            "timestamp": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
            f"{rng.randint(0, 23):02d}:{rng.choice([0, 30]):02d}:00Z",
            "with_captcha": rng.random() < 0.3,
        }
        for i in range(count)
    ]
    path.write_text(json.dumps({"campaign_events": events}), encoding="utf-8")
    return events


def ordered_ids(events: list[dict[str, Any]]) -> list[int]:
    """Event ids in the contract's order: timestamp, then id."""
    return [e["id"] for e in sorted(events, key=lambda e: (e["timestamp"], e["id"]))]


def campaign_one_events() -> list[dict[str, Any]]:
    return [e for e in sample()["campaign_events"] if e["campaign_id"] == 1]


@pytest.mark.parametrize("path", ENDPOINTS)
async def test_etag_and_if_none_match(client: TestClient, path: str) -> None:
    first = await get(client, path)
    assert first.status == 200
    etag = first.headers["ETag"]
    assert etag.removeprefix("W/").startswith('"') and etag.endswith('"')
    for header in (etag, "*", f'W/"nope", {etag}', etag.removeprefix("W/")):
        cached = await get(client, path, **{"If-None-Match": header})
        assert cached.status == 304, header
        assert await cached.read() == b""
        assert cached.headers["ETag"] == etag
    # A list sent on two lines is one list (RFC 9110 5.3).
    lines = [("X-API-KEY", KEY_1), ("If-None-Match", 'W/"nope"'), ("If-None-Match", etag)]
    assert (await client.get(path, headers=lines)).status == 304
    for header in ('"nope"', 'W/"nope", "other"'):
        fresh = await get(client, path, **{"If-None-Match": header})
        assert fresh.status == 200
        assert await fresh.read() == await first.read()


async def test_etag_depends_on_company_and_query(client: TestClient) -> None:
    one = await get(client, INSCRIPTIONS)
    two = await get(client, INSCRIPTIONS, key=KEY_2)
    assert one.headers["ETag"] != two.headers["ETag"]
    # Company 2 cannot have its request answered with company 1's validator.
    assert (
        await get(client, INSCRIPTIONS, key=KEY_2, **{"If-None-Match": one.headers["ETag"]})
    ).status == 200
    queries = ("", "?page=2", "?per_page=5", "?filter[country]=France", "?page=1")
    tags = [(await get(client, INSCRIPTIONS + q)).headers["ETag"] for q in queries]
    assert len(set(tags)) == len(tags)
    typed = await get(client, f"{CAMPAIGN}?filter[type]=open")
    assert typed.headers["ETag"] != (await get(client, CAMPAIGN)).headers["ETag"]
    assert (await get(client, CAMPAIGN, **{"If-None-Match": typed.headers["ETag"]})).status == 200


REPORT = f"{API}/campaigns/1"  # a record of company 1: the view checks its guard on a 304
MOVING = ("X-Request-ID", "Date", "RateLimit-Remaining", "RateLimit")  # each response's own


async def test_a_known_304_is_the_views(client: TestClient) -> None:
    """The 304 of an answer the process gave is the one the view gives, headers included."""
    first = await get(client, REPORT)
    etag = first.headers["ETag"]
    known = await get(client, REPORT, **{"If-None-Match": etag})
    forget_answers(client)  # forgotten: the view answers again
    viewed = await get(client, REPORT, **{"If-None-Match": etag})
    assert known.status == viewed.status == 304
    same = [{k: v for k, v in r.headers.items() if k not in MOVING} for r in (known, viewed)]
    assert same[0] == same[1] and known.headers["ETag"] == etag
    # The key is still asked for first: no key, no 304.
    await assert_problem(await get(client, REPORT, key=None, **{"If-None-Match": etag}), 401)


async def test_a_foreign_record_is_never_a_known_answer(client: TestClient) -> None:
    """Only answers the company was given are known: another company's record stays a 404
    even with the ETag the company's own view of that URL would have."""
    foreign = next(c["id"] for c in sample()["campaigns"] if c["company_id"] == 2)
    path = f"{API}/campaigns/{foreign}"
    assert (await get(client, path)).status == 404
    app = client.server.app
    request = make_mocked_request("GET", path, app=app)
    forged = make_etag(app[DATA_VERSION].token, 1, request, "JSON|")
    for header in (forged, "*"):
        await assert_problem(await get(client, path, **{"If-None-Match": header}), 404)


@ON_POSTGRESQL
async def test_a_known_304_runs_no_statement(client: TestClient, store: Store) -> None:
    """A 304 the process knows is answered before the view: not even the record's guard
    runs (the view's 304 runs it, which shows the test can see it)."""
    guard = "SELECT 1 FROM campaigns WHERE id"
    etag = (await get(client, REPORT)).headers["ETag"]
    before = await activity(store.url)
    assert (await get(client, REPORT, **{"If-None-Match": etag})).status == 304
    assert not any(guard in query for _, query, _ in await activity(store.url) - before)
    forget_answers(client)
    before = await activity(store.url)
    assert (await get(client, REPORT, **{"If-None-Match": etag})).status == 304
    assert any(guard in query for _, query, _ in await activity(store.url) - before)


def forget_answers(client: TestClient) -> None:
    """The process forgets the answers it gave: the next request of each runs its view."""
    client.server.app[ANSWERS].clear()


async def three_times(client: TestClient, path: str, **headers: str) -> list[tuple[Any, bytes]]:
    """The answer as the view gives it, again (known), then from the view once it is
    forgotten: each with the bytes as sent."""
    first = await get_raw(client, path, **headers)
    known = await get_raw(client, path, **headers)
    forget_answers(client)
    return [first, known, await get_raw(client, path, **headers)]


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        (CAMPAIGN, {}),
        (CAMPAIGN, {"Accept": "text/csv"}),
        (CAMPAIGN, {"Accept": "application/x-ndjson"}),
        (CAMPAIGN, {"Accept-Encoding": "gzip"}),
        (f"{INSCRIPTIONS}?per_page=3&page=2", {"Accept": "text/csv"}),
        (REPORT, {"Accept-Encoding": "gzip"}),
    ],
)
async def test_a_known_answer_is_the_views(
    client: TestClient, path: str, headers: dict[str, str]
) -> None:
    """A small answer given again comes from memory, the same bytes and headers as the
    view's (gzip as the request accepts)."""
    answers = await three_times(client, path, **headers)
    assert [r.status for r, _ in answers] == [200] * 3
    assert answers[0][1] == answers[1][1] == answers[2][1]
    kept = [{k: v for k, v in r.headers.items() if k not in MOVING} for r, _ in answers]
    assert kept[0] == kept[1] == kept[2]


async def statements_of(client: TestClient, store: Store, path: str, key: str = KEY_1) -> int:
    """How many statements the server ran for one request of ``path`` (a 200), besides
    reading the data token (SQLite reads it afresh for a known answer)."""
    if store.url:
        before = await activity(store.url)
        assert (await get(client, path, key=key)).status == 200
        return len(await activity(store.url) - before)
    statements = await traced(client)
    assert (await get(client, path, key=key)).status == 200
    return len([sql for sql in statements if sql != TOKEN])


async def test_a_known_answer_runs_no_statement(client: TestClient, store: Store) -> None:
    """The second request of a small answer runs nothing but, on SQLite, the read of the
    data token; an answer that depends on the date, or is over the size kept, is read
    again (which shows the test can see it)."""
    for path in (REPORT, INSCRIPTIONS, f"{API}/courses"):
        await statements_of(client, store, path)
    assert await statements_of(client, store, REPORT) == 0
    assert await statements_of(client, store, INSCRIPTIONS) == 0
    assert await statements_of(client, store, f"{API}/courses") > 0  # today's date: no
    client.server.app[ANSWERS].largest = 100  # bodies of at most 100 bytes
    await statements_of(client, store, EMPLOYEE)
    assert await statements_of(client, store, EMPLOYEE) > 0


async def test_with_no_answer_memory_only_304s_are_known(
    make_client: MakeClient, store: Store
) -> None:
    """REPORTING_ANSWER_MEMORY_MB=0: every 200 runs its view; a 304 still needs none."""
    client = await make_client(answer_memory_mb=0)
    etag = (await get(client, REPORT)).headers["ETag"]
    assert await statements_of(client, store, REPORT) > 0
    if not store.url:
        statements = await traced(client)
        assert (await get(client, REPORT, **{"If-None-Match": etag})).status == 304
        assert statements == []


async def test_a_known_answer_is_the_companys_own(client: TestClient) -> None:
    """Company 2 asking the URL company 1's answer is kept for gets its own."""
    ones = await get(client, INSCRIPTIONS)
    assert (await get(client, INSCRIPTIONS)).headers["ETag"] == ones.headers["ETag"]
    twos = await get(client, INSCRIPTIONS, key=KEY_2)
    assert twos.headers["ETag"] != ones.headers["ETag"]
    assert await twos.read() != await ones.read()
    forget_answers(client)
    assert await (await get(client, INSCRIPTIONS, key=KEY_2)).read() == await twos.read()


def test_the_answers_kept_stay_within_their_bytes() -> None:
    """The oldest answers go first when the bytes kept would pass the bound."""
    answers = TokenCache[str, Known](max_bytes=10, size=Known.size)
    for name in "abc":
        answers.put(name, "t", Known(name, b"1234"))
    assert [answers.get(n, "t") is None for n in "abc"] == [True, False, False]
    answers.put("b", "t", Known("b", b"123456"))  # replaced: its old bytes no longer count
    assert answers.get("c", "t") is not None and answers.get("b", "t") is not None
    answers.put("d", "t", Known("d"))  # an ETag alone weighs nothing
    assert answers.get("c", "t") is not None


@pytest.mark.parametrize("store_kind", ["sqlite"])  # the memory is the process's, either way
async def test_the_answers_kept_hold_their_headers_within_the_budget(
    make_client: MakeClient,
) -> None:
    """A page's Link repeats its query string: a long one makes headers far larger than
    the body, and the bytes of the answers kept (headers too) stay within the budget."""
    client = await make_client(answer_memory_mb=1)
    for n in range(250):  # each answer: a body of 2 bytes and a Link of about 6 KB
        filters = f"filter%5Bdepartment%5D={'a' * 3000}{n}"
        assert (await get(client, f"{INSCRIPTIONS}?{filters}&per_page=1")).status == 200
    kept = client.server.app[ANSWERS].values()
    held = sum(len(k.body or b"") + sum(len(n) + len(v) for n, v in k.headers) for k in kept)
    assert kept and held <= 1024 * 1024


@pytest.mark.writes
@pytest.mark.parametrize("store_kind", ["sqlite"])  # PostgreSQL: as its notification arrives
async def test_a_known_answer_holds_every_load_committed_before_the_request(
    client: TestClient, store: Store, tmp_path: Path
) -> None:
    """An answer kept in memory is sent only at the data token read afresh: the request
    right after a load gets the load's data (the process had not noticed it yet)."""
    before = await get(client, CAMPAIGN)
    assert (await get(client, CAMPAIGN)).headers["ETag"] == before.headers["ETag"]  # kept
    extra = tmp_path / "extra.json"
    event = {"id": 900002, "campaign_id": 1, "employee_id": 1, "type": "open",
             "timestamp": "2025-12-31T23:59:58Z", "with_captcha": False}  # fmt: skip
    extra.write_text(json.dumps({"campaign_events": [event]}), encoding="utf-8")
    await store.load([extra])
    after = await get(client, CAMPAIGN)
    assert [e["id"] for e in await after.json()][-1] == 900002
    assert after.headers["ETag"] != before.headers["ETag"]


@pytest.mark.writes
async def test_etag_changes_after_a_load(client: TestClient, store: Store, tmp_path: Path) -> None:
    before = await get(client, CAMPAIGN)
    old_tag, old_ids = before.headers["ETag"], [e["id"] for e in await before.json()]
    assert old_ids == ordered_ids(campaign_one_events())
    extra = tmp_path / "extra.json"
    event = {"id": 900001, "campaign_id": 1, "employee_id": 1, "type": "click",
             "timestamp": "2025-12-31T23:59:59Z", "with_captcha": False}  # fmt: skip
    extra.write_text(json.dumps({"campaign_events": [event]}), encoding="utf-8")
    assert (await get(client, CAMPAIGN)).headers["ETag"] == old_tag  # kept whole: small
    await store.load([extra])
    for _ in range(30):  # the server notices the load (files or NOTIFY); allow up to 3 s
        after = await get(client, CAMPAIGN)  # the kept answer is the old token's
        if after.headers["ETag"] != old_tag:
            break
        await asyncio.sleep(0.1)
    assert after.status == 200
    assert after.headers["ETag"] != old_tag
    assert [e["id"] for e in await after.json()] == [*old_ids, 900001]
    assert (await get(client, CAMPAIGN, **{"If-None-Match": old_tag})).status == 200
    assert (await get(client, CAMPAIGN, **{"If-None-Match": after.headers["ETag"]})).status == 304


async def test_gzip_over_one_kib_with_vary(client: TestClient) -> None:
    plain, plain_body = await get_raw(client, CAMPAIGN, **{"Accept-Encoding": "identity"})
    assert len(plain_body) > 1024
    assert "Content-Encoding" not in plain.headers
    packed, packed_body = await get_raw(client, CAMPAIGN, **{"Accept-Encoding": "gzip"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert "accept-encoding" in packed.headers.get("Vary", "").lower()
    assert gzip.decompress(packed_body) == plain_body


@pytest.mark.parametrize("path", [SMALL, f"{INSCRIPTIONS}?page=999"])
async def test_small_bodies_are_not_compressed(client: TestClient, path: str) -> None:
    response, body = await get_raw(client, path, **{"Accept-Encoding": "gzip"})
    assert response.status == 200
    assert len(body) < 1024
    assert "Content-Encoding" not in response.headers
    assert isinstance(json.loads(body), list)


async def test_standard_headers_everywhere(client: TestClient) -> None:
    responses = [await get(client, path) for path in ENDPOINTS]
    responses += [
        await get(client, "/healthz", key=None),
        await get(client, "/readyz", key=None),
        await get(client, CAMPAIGN, key=None),
        await get(client, f"{API}/campaigns/999999/events"),
        await get(client, f"{API}/campaigns/0/events"),
        await get(client, "/nowhere"),
        await client.post(CAMPAIGN),
    ]
    assert [r.status for r in responses] == [200, 200, 200, 200, 200, 401, 404, 400, 404, 405]
    for response in responses:
        assert response.headers["Cache-Control"] == "private, no-cache"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        server = response.headers.get("Server", "")
        assert not any(ch.isdigit() for ch in server), server
        assert "aiohttp" not in server.lower() and "python" not in server.lower()
    for response in responses[:3]:
        assert response.headers["Content-Type"] == JSON_TYPE


@pytest.mark.parametrize(
    ("path", "key", "status"),
    [
        (CAMPAIGN, KEY_1, 200),
        (CAMPAIGN, "wrong", 401),
        (f"{API}/campaigns/999999/events", KEY_1, 404),
    ],
    ids=["200", "401", "404"],
)
async def test_request_id_echoed_or_generated(
    client: TestClient, path: str, key: str, status: int
) -> None:
    for given in ["trace-42.a:b@c/d+e=f_g", "x" * 128]:
        response = await get(client, path, key=key, **{"X-Request-ID": given})
        assert response.status == status
        assert response.headers["X-Request-ID"] == given
        if status != 200:
            assert (await assert_problem(response, status))["request_id"] == given
    for given in [None, "x" * 129, "has space", "<script>", ""]:
        headers = {} if given is None else {"X-Request-ID": given}
        response = await get(client, path, key=key, **headers)
        assert response.status == status
        made = response.headers["X-Request-ID"]
        assert re.fullmatch("[0-9a-f]{32}", made), made
        if status != 200:
            assert (await assert_problem(response, status))["request_id"] == made


def test_made_request_ids_differ_in_a_forked_worker() -> None:
    """Workers are forked from one process: each must make ids of its own, never the
    same sequence as its parent or a sibling."""
    request = make_mocked_request("GET", "/healthz")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then out without the test runner's exit
        os.write(write, " ".join(assign_request_id(request) for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    parent = {assign_request_id(request) for _ in range(3)}
    assert os.waitpid(pid, 0)[1] == 0
    with os.fdopen(read) as child:
        made_there = set(child.read().split())
    assert len(made_there) == 3 and not parent & made_there


def same_headers(head: Any, got: Any) -> bool:
    """Whether a HEAD's headers are its GET's, but for those that change every request.

    A streamed GET is framed by ``Transfer-Encoding: chunked``; a HEAD frames no body.
    """
    volatile = {"Date", "X-Request-ID", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit"}
    volatile.add("Transfer-Encoding")
    return {k: v for k, v in head.items() if k not in volatile} == {
        k: v for k, v in got.items() if k not in volatile
    }


@pytest.mark.parametrize("path", [*ENDPOINTS, "/healthz", "/readyz"])
async def test_head_wherever_get(client: TestClient, path: str) -> None:
    got = await get(client, path)
    head = await client.head(path, headers={"X-API-KEY": KEY_1})
    assert head.status == got.status == 200
    assert await head.read() == b""
    assert same_headers(head.headers, got.headers)


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("key", [KEY_1, None])
async def test_other_methods_are_405_with_allow(
    client: TestClient, method: str, path: str, key: str | None
) -> None:
    headers = {"X-API-KEY": key} if key else {}
    response = await client.request(method, path, headers=headers)
    await assert_problem(response, 405)
    assert {m.strip() for m in response.headers["Allow"].split(",")} == {"GET", "HEAD"}


@pytest.fixture(scope="module")
def big_template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int], Path]:
    """The sample plus 5,000 events in campaign 1, built once by the real loader."""
    directory = tmp_path_factory.mktemp("big")
    db = make_sample_db(directory)
    added = write_events(directory / "big.json", 500_001, BIG_EXTRA)
    load_files(db, [directory / "big.json"])
    return db, ordered_ids(campaign_one_events() + added), directory / "big.json"


async def big_client(
    make_client: MakeClient,
    big_template: tuple[Path, list[int], Path],
    tmp_path: Path,
    store: Store,
) -> tuple[TestClient, list[int]]:
    """A client of the store holding campaign 1's big listing, and its ids in order."""
    template, expected, added = big_template
    if store.kind == "sqlite":
        return await make_client(db=str(shutil.copy(template, tmp_path / "big.sqlite3"))), expected
    await store.load([added])
    return await make_client(), expected


@pytest.mark.writes
async def test_large_array_is_streamed_complete_and_in_order(
    make_client: MakeClient,
    big_template: tuple[Path, list[int], Path],
    tmp_path: Path,
    store: Store,
) -> None:
    client, expected = await big_client(make_client, big_template, tmp_path, store)
    whole, body = await get_raw(client, CAMPAIGN, **{"Accept-Encoding": "identity"})
    assert whole.status == 200
    assert whole.headers["Content-Type"] == JSON_TYPE
    assert whole.headers.get("Transfer-Encoding") == "chunked"  # streamed, not buffered
    events = json.loads(body)
    assert [e["id"] for e in events] == expected
    pages: list[dict[str, Any]] = []
    for page in range(1, len(expected) // 500 + 2):
        pages += await (await get(client, f"{CAMPAIGN}?per_page=500&page={page}")).json()
    assert pages == events
    packed, packed_body = await get_raw(client, CAMPAIGN, **{"Accept-Encoding": "gzip"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed_body) == body
    for coding in ("gzip", "identity"):  # HEAD sends the headers its GET sends
        got, _ = await get_raw(client, CAMPAIGN, **{"Accept-Encoding": coding})
        head, head_body = await get_raw(client, CAMPAIGN, "HEAD", **{"Accept-Encoding": coding})
        assert head.status == 200 and head_body == b""
        assert same_headers(head.headers, got.headers), coding


async def exchange(client: TestClient, first: bytes, then: bytes = b"") -> tuple[bytes, bool]:
    """Send ``first`` on one connection and, once its first answer is in, ``then``; all
    that came back, and whether the server closed the connection (not idle 2 s)."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    received = b""
    try:
        writer.write(first)
        await writer.drain()
        if then:
            received = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            length = re.search(rb"\r\nContent-Length: (\d+)", received)
            assert length, received
            received += await reader.readexactly(int(length[1]))
            writer.write(then)
        while chunk := await asyncio.wait_for(reader.read(65536), 2):
            received += chunk
    except TimeoutError:
        return received, False
    except ConnectionResetError:
        pass
    finally:
        writer.close()
    return received, True


def pipelined(method: str, path: str, key: str, version: str = "1.1", *lines: str) -> bytes:
    """A raw request with its key and its own request id, ``lines`` among its headers."""
    head = [f"{method} {path} HTTP/{version}", "Host: x", f"X-API-KEY: {key}", *lines]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


@pytest.mark.writes
async def test_an_http_1_0_stream_ends_with_the_close_not_the_next_answer(
    make_client: MakeClient,
    big_template: tuple[Path, list[int], Path],
    tmp_path: Path,
    store: Store,
) -> None:
    """HTTP/1.0 has no chunks: a streamed array's end is the connection's close, so no
    answer to a request pipelined behind it (another company's) may follow it."""
    client, expected = await big_client(make_client, big_template, tmp_path, store)
    old = pipelined("GET", CAMPAIGN, KEY_1, "1.0", "Connection: keep-alive")
    received, closed = await exchange(client, old + pipelined("GET", f"{API}/campaigns", KEY_2))
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 ") and b"Content-Length" not in head
    assert closed and [e["id"] for e in json.loads(body)] == expected


@pytest.mark.parametrize("upgrade", ["h2c", "websocket"])
async def test_a_request_asking_to_upgrade_is_answered_then_closed(
    client: TestClient, upgrade: str
) -> None:
    """aiohttp drops what arrives with a request to switch to anything but websocket:
    the start of the next request must not go unanswered, its rest read as a request."""
    asking = pipelined("GET", CAMPAIGN, KEY_1, "1.1", "Connection: Upgrade", f"Upgrade: {upgrade}")
    following = pipelined("GET", f"{API}/campaigns", KEY_2)
    received, closed = await exchange(client, asking + following[:30], following[30:])
    assert received.startswith(b"HTTP/1.1 200 ") and b"\r\nConnection: close\r\n" in received
    assert received.count(b"HTTP/1.1 ") == 1 and closed
