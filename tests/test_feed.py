"""The event feed's interface (contract.md 13, with sections 1, 2, 3 and 7 on the new path).

Fields, order (change sequence, then id), the four filters, ``limit``/``cursor`` and the
400s of ``page``/``per_page``, ``X-Next-Cursor`` and ``Link: rel="next"`` on every answer,
cursors bound to the company and the filter set and tamper-evident, ETag/304, and the
query plan (the ``(seq, id)`` index, never a sort). The guarantee under loads is in
test_feed_sync.py.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sqlite3
import struct
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from app.data.feed import START, FeedFilters, feed_listing
from app.data.listings import read_window

from .support.clients import MakeClient
from .support.factories import KEY_1, KEY_2, KEYS, assert_problem, by_id, get, make_sample_db, query
from .support.feeds import FEED
from .support.stores import Store, on_both_stores
from .support.verdicts import sample_verdicts

store_kind = on_both_stores()  # every test on the app runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)
Params = list[tuple[str, str]]


def feed_order(db: Path) -> list[int]:
    """Every event id in the order of the change sequence (what the loader wrote)."""
    return [row[0] for row in query(db, "SELECT id FROM campaign_events ORDER BY seq, id")]


def oracle(db: Path, company: int, keep: Any = None) -> list[dict[str, Any]]:
    """The company's feed built from the fixture, in the database's (seq, id) order."""
    events, campaigns, people = by_id("campaign_events"), by_id("campaigns"), by_id("employees")
    automation = sample_verdicts()
    out = []
    for event_id in feed_order(db):
        e = events[event_id]
        c, p = campaigns[e["campaign_id"]], people[e["employee_id"]]
        if c["company_id"] != company or (keep is not None and not keep(e)):
            continue
        out.append(
            {
                "id": e["id"],
                "type": e["type"],
                "timestamp": e["timestamp"],
                "with_captcha": e["with_captcha"],
                "ip": e.get("ip"),
                "user_agent": e.get("user_agent"),
                "campaign": {k: c[k] for k in ("id", "title", "launch_date")},
                "victim": {k: p[k] for k in ("id", "first_name", "last_name", "email")}
                | {"department": p["department"]},
                "automation": automation[e["id"]],
            }
        )
    return out


async def follow(
    client: TestClient, params: Params, limit: int, key: str = KEY_1
) -> tuple[list[dict[str, Any]], str]:
    """Follow Link rel=next from the start until an empty answer; the records, last cursor."""
    url = str(URL(FEED).with_query([*params, ("limit", str(limit))]))
    records: list[dict[str, Any]] = []
    while True:
        response = await get(client, url, key)
        assert response.status == 200, await response.text()
        body = await response.json()
        records += body
        link = response.headers["Link"]
        assert link.startswith("<") and link.endswith('>; rel="next"')
        url = link[1 : -len('>; rel="next"')]
        assert URL(url).query["cursor"] == response.headers["X-Next-Cursor"]
        if not body:
            return records, response.headers["X-Next-Cursor"]
        assert len(body) <= limit


@pytest.mark.parametrize("company", [1, 2])
async def test_every_event_of_the_company_in_sequence_order(
    client: TestClient, sample_db: Path, company: int
) -> None:
    records, _ = await follow(client, [], 1000, KEYS[company])
    assert records == oracle(sample_db, company)


def verdict(e: dict[str, Any]) -> str:
    return str(sample_verdicts()[e["id"]]["verdict"])


FILTERS: list[tuple[Params, Any]] = [
    ([("filter[type]", "CLICK, report")], lambda e: e["type"] in ("click", "report")),
    ([("filter[with_captcha]", "false")], lambda e: not e["with_captcha"]),
    ([("filter[with_captcha]", "TRUE")], lambda e: True),
    ([("filter[from_date]", "2025-03-01")], lambda e: e["timestamp"] >= "2025-03-01"),
    ([("filter[to_date]", "2025-03-01")], lambda e: e["timestamp"] < "2025-03-02"),
    (
        [("filter[from_date]", "2025-02-12"), ("filter[to_date]", "2025-02-12")],
        lambda e: e["timestamp"].startswith("2025-02-12"),
    ),
    (
        [("filter[type]", "open"), ("filter[type]", "fail"), ("filter[with_captcha]", "false")],
        lambda e: e["type"] in ("open", "fail") and not e["with_captcha"],
    ),
    ([("filter[automation]", "include")], lambda e: True),
    ([("filter[automation]", "exclude_automated")], lambda e: verdict(e) != "automated"),
    (
        [("filter[automation]", "Exclude_Suspected"), ("filter[type]", "click")],
        lambda e: verdict(e) == "human" and e["type"] == "click",
    ),
]


@pytest.mark.parametrize(("params", "keep"), FILTERS)
@pytest.mark.parametrize("limit", [7, 1000])
async def test_filters_and_pages_of_any_size(
    client: TestClient, sample_db: Path, params: Params, keep: Any, limit: int
) -> None:
    expected = oracle(sample_db, 1, keep)
    assert expected, "the filter should keep something"
    records, _ = await follow(client, params, limit)
    assert records == expected


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ("page=1", ["page"]),
        ("per_page=10", ["per_page"]),
        ("limit=0", ["limit"]),
        ("limit=1001", ["limit"]),
        ("limit=1e3", ["limit"]),
        ("limit=5&limit=6", ["limit"]),
        ("cursor=abc", ["cursor"]),
        ("cursor=", ["cursor"]),
        ("filter[type]=opened", ["filter[type]"]),
        ("filter[from_date]=2025-02-30", ["filter[from_date]"]),
        ("filter[from_date]=2025-03-02&filter[to_date]=2025-03-01", ["filter[from_date]"]),
        ("filter[campaign]=1", ["filter[campaign]"]),
        ("format=xml", ["format"]),
        ("filter[automation]=exclude", ["filter[automation]"]),
        ("filter[automation]=include&filter[automation]=include", ["filter[automation]"]),
    ],
)
async def test_bad_parameters_are_400(client: TestClient, params: str, names: list[str]) -> None:
    body = await assert_problem(await get(client, f"{FEED}?{params}"), 400)
    assert list(body["errors"]) == names


def next_link(response: Any) -> list[tuple[str, str]]:
    """The parameters of the Link rel=next target (a relative reference to the feed)."""
    target, rel = response.headers["Link"].split(">; ")
    assert rel == 'rel="next"' and target.startswith(f"<{FEED}?")
    return list(URL(target[1:]).query.items())


async def test_next_cursor_and_link_on_every_answer(client: TestClient) -> None:
    """Short, empty and first answers all say where to go next, keeping every parameter."""
    params = [("filter[type]", "click"), ("format", "json"), ("limit", "3")]
    first = await get(client, str(URL(FEED).with_query(params)))
    cursor = first.headers["X-Next-Cursor"]
    assert next_link(first) == [*params, ("cursor", cursor)]
    _, last = await follow(client, [("filter[type]", "click")], 3)
    params = [("filter[type]", "click"), ("limit", "3"), ("cursor", last)]
    end = await get(client, str(URL(FEED).with_query(params)))
    assert await end.json() == []
    assert end.headers["X-Next-Cursor"] == last  # caught up: the same cursor again
    assert next_link(end) == params
    for header in ("X-Total-Count", "X-Page", "X-Total-Pages"):
        assert header not in end.headers


@pytest.mark.writes
async def test_an_empty_feed_still_gives_a_cursor(
    store: Store, make_client: MakeClient, tmp_path: Path
) -> None:
    """A company without events: [] with a cursor that later finds its first events."""
    await store.execute("DELETE FROM campaign_events")  # the loader cannot delete
    client = await make_client()
    response = await get(client, FEED)
    assert response.status == 200 and await response.json() == []
    cursor = response.headers["X-Next-Cursor"]
    assert 'rel="next"' in response.headers["Link"]
    person = next(e for e in by_id("employees").values() if e["company_id"] == 1)
    event = {"id": 1, "campaign_id": 1, "employee_id": person["id"], "type": "open"}
    event |= {"timestamp": "2026-01-01T08:00:00Z", "with_captcha": False}
    (tmp_path / "first.json").write_text(json.dumps({"campaign_events": [event]}))
    await store.load([tmp_path / "first.json"])
    later = await get(client, f"{FEED}?cursor={cursor}")
    assert [record["id"] for record in await later.json()] == [1]


async def test_a_cursor_is_bound_to_its_company(client: TestClient) -> None:
    mine = (await get(client, f"{FEED}?limit=2")).headers["X-Next-Cursor"]
    assert (await get(client, f"{FEED}?cursor={mine}")).status == 200
    body = await assert_problem(await get(client, f"{FEED}?cursor={mine}", KEY_2), 400)
    assert list(body["errors"]) == ["cursor"]


async def test_a_cursor_is_bound_to_its_filters(client: TestClient) -> None:
    given = await get(client, f"{FEED}?filter[type]=open,click&limit=2")
    cursor = given.headers["X-Next-Cursor"]
    same = "filter[type]=Click&filter[type]=open,OPEN"  # the same set, spelled otherwise
    assert (await get(client, f"{FEED}?{same}&cursor={cursor}")).status == 200
    assert (await get(client, f"{FEED}?cursor={cursor}&limit=9&format=csv")).status == 400
    for other in (
        "filter[type]=open",
        "filter[type]=open,click,fail",
        "filter[type]=open,click&filter[with_captcha]=false",
        "filter[type]=open,click&filter[to_date]=2030-01-01",
        "filter[type]=open,click&filter[automation]=exclude_automated",
        "filter[type]=open,click&filter[automation]=exclude_suspected",
    ):
        response = await get(client, f"{FEED}?{other}&cursor={cursor}")
        assert (await assert_problem(response, 400))["errors"].keys() == {"cursor"}
    # limit and format are not filters: a collector may change them between requests
    assert (await get(client, f"{FEED}?filter[type]=click,open&limit=9&cursor={cursor}")).ok
    # include is the default: the same filter set, the same cursor (as before it existed)
    included = "filter[type]=open,click&filter[automation]=include&limit=2"
    assert (await get(client, f"{FEED}?{included}")).headers["X-Next-Cursor"] == cursor
    suspected = "filter[automation]=exclude_suspected&limit=2"
    bound = (await get(client, f"{FEED}?{suspected}")).headers["X-Next-Cursor"]
    assert (await get(client, f"{FEED}?{suspected}&cursor={bound}")).status == 200
    for other in ("", "filter[automation]=exclude_automated&"):
        response = await get(client, f"{FEED}?{other}cursor={bound}")
        assert (await assert_problem(response, 400))["errors"].keys() == {"cursor"}


async def test_a_tampered_cursor_is_400(client: TestClient) -> None:
    cursor = (await get(client, f"{FEED}?limit=2")).headers["X-Next-Cursor"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for index in range(len(cursor)):  # every character changed, one at a time
        swapped = alphabet[(alphabet.index(cursor[index]) + 1) % 64]
        forged = cursor[:index] + swapped + cursor[index + 1 :]
        await assert_problem(await get(client, f"{FEED}?cursor={forged}"), 400)
    for forged in (cursor + "A", cursor[:-1], cursor + "=", "%00" + cursor[1:], "é" * 43):
        await assert_problem(await get(client, f"{FEED}?cursor={forged}"), 400)


async def test_a_forged_cursor_tells_nothing_of_the_sequence(client: TestClient) -> None:
    """A cursor edited by hand is refused alike wherever its position lies: one past the
    end of the change sequence, which every company's loads move, gets the refusal of
    one inside it. Otherwise a company could find, by halving, how far the sequence has
    gone at any moment, and so when other companies load and how much."""
    cursor = (await get(client, f"{FEED}?limit=2")).headers["X-Next-Cursor"]
    tag = base64.urlsafe_b64decode(cursor + "=")[16:]

    def at(seq: int) -> str:
        raw = struct.pack(">QQ", seq, 1) + tag
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    inside = await assert_problem(await get(client, f"{FEED}?cursor={at(1)}"), 400)
    past = await assert_problem(await get(client, f"{FEED}?cursor={at(2**40)}"), 400)
    assert past["errors"] == inside["errors"]
    assert "restored" in past["errors"]["cursor"][0]  # a real cursor after a restore
    assert "Start again without a cursor" in past["errors"]["cursor"][0]


async def test_a_cursor_from_another_database_is_400(
    client: TestClient, tmp_path: Path, make_client: MakeClient
) -> None:
    """Each database signs with its own secret (meta cursor_secret): here a new SQLite
    file's, whichever store ``client`` serves from."""
    (tmp_path / "other").mkdir()
    other = await make_client(db=str(make_sample_db(tmp_path / "other")), database_url="")
    cursor = (await get(other, f"{FEED}?limit=2")).headers["X-Next-Cursor"]
    await assert_problem(await get(client, f"{FEED}?cursor={cursor}"), 400)


async def test_etag_and_304(client: TestClient) -> None:
    first = await get(client, f"{FEED}?limit=5")
    etag = first.headers["ETag"]
    again = await get(client, f"{FEED}?limit=5", **{"If-None-Match": etag})
    assert again.status == 304 and again.headers["ETag"] == etag
    assert again.headers["Vary"] == "Accept, Accept-Encoding"
    after = await get(client, f"{FEED}?limit=5&cursor={first.headers['X-Next-Cursor']}")
    assert after.headers["ETag"] != etag


def test_the_feed_walks_the_sequence_index_and_never_sorts(sample_db: Path) -> None:
    """Events carry no company: the (seq, id) index is read in order, campaigns joined."""
    conn = sqlite3.connect(sample_db)
    try:
        for filters in (
            FeedFilters(),
            FeedFilters.of(types=["click"], without_captcha=True),
            FeedFilters.of(automation="exclude_suspected"),
            FeedFilters.of(
                from_date=dt.date.fromisoformat("2025-03-01"),
                to_date=dt.date.fromisoformat("2025-04-01"),
            ),
        ):
            listing = feed_listing(1, filters, START)
            plan = conn.execute(
                f"EXPLAIN QUERY PLAN {listing.select_keyed()}", (*listing.params, 100)
            ).fetchall()
            details = " | ".join(row[3] for row in plan)
            assert "USING INDEX campaign_events_by_seq" in details, details
            assert "TEMP B-TREE" not in details, details
    finally:
        conn.close()


def test_one_statement_per_page_whatever_its_size(sample_db: Path) -> None:
    conn = sqlite3.connect(sample_db, isolation_level=None)
    counts = []
    for limit in (1, 1000):
        statements: list[str] = []
        conn.set_trace_callback(statements.append)
        read_window(conn, feed_listing(1, FeedFilters(), START), limit)
        conn.set_trace_callback(None)
        counts.append(len(statements))
    conn.close()
    assert counts[0] == counts[1] <= 4  # BEGIN, data token, the page, COMMIT
