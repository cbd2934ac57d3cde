"""contract.md 9 (a load is all or nothing) and 7 (ETags, streamed arrays) under load.

A load committed while large responses of ``python -m app`` stream never mixes two
versions: each whole answer and each page comes entirely from the data before the load
or entirely from the data after it, answers already streaming finish on the old data,
every read that begins after the load sees the new data, and the ETag changes with the
version (the old one no longer revalidates).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.tools.loader import load_files

from .support.factories import API, KEY_1, generated_events, next_event_id, sample
from .support.servers import GUARD_SECONDS, UNLIMITED, Launcher
from .support.stores import Store, on_both_stores

pytestmark = pytest.mark.system  # starts server processes (make test-fast skips it)

STREAM_EVENTS = 30_000
ADDED_EVENTS = 1_000
PER_PAGE = 500
PAUSE_SECONDS = 0.1  # between a reader's reads: the load gets the CPU it needs too
EVENTS_URL = f"{API}/campaigns/1/events"


def campaign_1_records(events: list[dict[str, Any]], people: list[dict[str, Any]]) -> list[Any]:
    """What /campaigns/1/events must return for these events and employees."""
    victims = {
        p["id"]: {k: p[k] for k in ("id", "first_name", "last_name", "email", "department")}
        for p in people
    }
    rows = sorted(
        (e for e in events if e["campaign_id"] == 1), key=lambda e: (e["timestamp"], e["id"])
    )
    return [
        {k: e[k] for k in ("id", "type", "timestamp")} | {"victim": victims[e["employee_id"]]}
        for e in rows
    ]


@dataclass
class Versions:
    """Campaign 1's events before and after the change load, computed from the fixtures."""

    old: list[Any]
    new: list[Any]

    def which(self, records: list[Any], page: int | None = None, total: int | None = None) -> str:
        """'old' or 'new': the one version the whole response comes from."""
        for name, every in (("old", self.old), ("new", self.new)):
            part = every if page is None else every[(page - 1) * PER_PAGE : page * PER_PAGE]
            if records == part and total in (None, len(every)):
                return name
        old_ids = {json.dumps(r, sort_keys=True) for r in self.old}
        mixed = sum(json.dumps(r, sort_keys=True) in old_ids for r in records)
        raise AssertionError(
            f"page {page}: {mixed} of {len(records)} records are old, total {total}"
        )


store_kind = on_both_stores()  # the same guarantee from SQLite files and PostgreSQL


@pytest.fixture
def streaming(tmp_path: Path) -> tuple[Path, Path, Versions]:
    """A database whose campaign 1 holds ~30,000 events, and a load that changes each one."""
    first = next_event_id()
    events = sample()["campaign_events"] + generated_events(STREAM_EVENTS, [1], first)
    fixture = tmp_path / "big.json"
    fixture.write_text(json.dumps(sample() | {"campaign_events": events}))
    db = tmp_path / "stream.sqlite3"
    load_files(db, [fixture])
    # Renaming every employee of company 1 changes every record of campaign 1.
    renamed = [
        p | {"last_name": p["last_name"] + "-Renamed"}
        for p in sample()["employees"]
        if p["company_id"] == 1
    ]
    added = generated_events(ADDED_EVENTS, [1], first + STREAM_EVENTS)
    change = tmp_path / "change.json"
    change.write_text(json.dumps({"employees": renamed, "campaign_events": added}))
    people = {p["id"]: p for p in sample()["employees"]} | {p["id"]: p for p in renamed}
    versions = Versions(
        old=campaign_1_records(events, sample()["employees"]),
        new=campaign_1_records(events + added, list(people.values())),
    )
    return db, change, versions


async def read_version(
    session: aiohttp.ClientSession, versions: Versions, page: int | None
) -> tuple[str, str]:
    """Fetch campaign 1's events (whole or one page); return its version and ETag."""
    params = {} if page is None else {"page": str(page), "per_page": str(PER_PAGE)}
    async with session.get(EVENTS_URL, params=params) as resp:
        assert resp.status == 200, await resp.text()
        records = json.loads(await resp.read())
        total = resp.headers.get("X-Total-Count")
        version = versions.which(records, page, None if total is None else int(total))
        return version, resp.headers["ETag"]


Reading = tuple[int | None, str, str, bool]  # page, version, ETag, began after the load


async def keep_reading(
    session: aiohttp.ClientSession, versions: Versions, done: asyncio.Event, page: int | None
) -> list[Reading]:
    """Read until the load is done and one more read began after it (bounded)."""
    seen: list[Reading] = []
    for _ in range(200):
        began_after = done.is_set()
        seen.append((page, *await read_version(session, versions, page), began_after))
        if began_after:
            break
        await asyncio.sleep(PAUSE_SECONDS)
    return seen


async def test_load_committed_while_streaming(
    streaming: tuple[Path, Path, Versions], launcher: Launcher, store: Store, tmp_path: Path
) -> None:
    db, change, versions = streaming
    timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
    # Four streams of one company at once (two held mid-body, two readers): one more
    # connection than that, since streams always leave one for short reads.
    # The readers loop as fast as they can: rate limits out of reach (they are not tested here).
    flags = ["--streams-per-company", "4", "--read-connections", "5", *UNLIMITED]
    if store.url:  # the same data in PostgreSQL, served from there, changed by its loader
        await store.load([tmp_path / "big.json"])
        flags += ["--database-url", store.url]
    load = Store(store.kind, db, store.url).load
    server = launcher.serve(db, *flags)
    async with aiohttp.ClientSession(
        server.base, headers={"X-API-KEY": KEY_1}, timeout=timeout
    ) as session:
        old_version, old_etag = await read_version(session, versions, None)
        assert old_version == "old"
        # Two streams stop reading after their first bytes: the server is mid-body
        # (its snapshot taken) while the load commits.
        # Their guard spans the whole load, which a busy machine may make long.
        held_guard = aiohttp.ClientTimeout(total=4 * GUARD_SECONDS)
        held = [await session.get(EVENTS_URL, timeout=held_guard) for _ in range(2)]
        heads = [await resp.content.read(65536) for resp in held]
        done = asyncio.Event()
        pages: list[int | None] = [None, None, 1, 40]
        readers = [keep_reading(session, versions, done, page) for page in pages]
        tasks = [asyncio.create_task(reader) for reader in readers]
        await asyncio.sleep(0.3)
        await load([change])
        done.set()
        seen = [entry for task in tasks for entry in await task]
        for resp, head in zip(held, heads, strict=True):
            body = head + await resp.read()
            assert versions.which(json.loads(body)) == "old"
            assert resp.headers["ETag"] == old_etag
            resp.release()
        new_version, new_etag = await read_version(session, versions, None)
        statuses = []
        for etag in (old_etag, new_etag):
            async with session.get(EVENTS_URL, headers={"If-None-Match": etag}) as resp:
                statuses.append(resp.status)
    assert new_version == "new" and new_etag != old_etag
    assert statuses == [200, 304]
    assert all(version == "new" for _, version, _, after in seen if after)
    tags: dict[tuple[int | None, str], set[str]] = {}
    for page, version, etag, _ in seen:
        tags.setdefault((page, version), set()).add(etag)
    assert all(len(found) == 1 for found in tags.values()), tags
    for page in set(pages):
        if (page, "old") in tags and (page, "new") in tags:
            assert tags[page, "old"] != tags[page, "new"]
