"""The CSV lines the database writes are, to the byte, what the CSV layout makes of the JSON.

The events' exports are written as CSV by the database (app/data/csv_lines.py); every
other listing's CSV comes from its JSON through app/web/csv_layout.py. The two must
never differ: on both stores, a company whose names, titles and departments are drawn
from the characters CSV cares about (comma, quote, CR, LF, the formula starts, the
apostrophe, spaces, non-ASCII) is exported both ways and the bytes compared, and the
answer the API sends is the same bytes; again once the people and titles are renamed
(the cells each campaign and employee keeps follow every write), and after the upgrade
from schema version 9 that adds those cells.
"""

from __future__ import annotations

import csv
import io
import json
import random
import sqlite3
from pathlib import Path

import asyncpg
from aiohttp.test_utils import TestClient

from app.data import events
from app.data.csv_lines import KEPT_TEXTS
from app.data.listings import Listing, Records
from app.data.pg.schema import ensure_schema
from app.data.schema import SCHEMA_VERSION, upgrade_if_older
from app.keys import POOL
from app.web.csv_layout import layout_of
from app.web.formats import encode_json_chunk, join_lines
from app.web.schemas import CampaignEventSchema, EmployeeEventSchema, exported_rows

from .support.clients import MakeClient
from .support.factories import API, PG_UNDO_VERSION_11, UNDO_VERSION_11, get, query
from .support.stores import EACH_STORE, Store

ALPHABET = [",", '"', "\r", "\n", "=", "+", "-", "@", "\t", "'", " ", "a", "Z", "é", "\u2028"]
PEOPLE = 60


def tricky(rng: random.Random, least: int = 0) -> str:
    """A short string of the characters CSV quoting and the formula guard look at."""
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(least, 6)))


def campaign(seed: int, renamed: bool = False) -> dict[str, list[dict[str, object]]]:
    """Company 1's extra campaign 900 + seed and its people, each clicking once; renamed:
    the same rows with other names, titles and departments."""
    rng = random.Random(seed + 1000 * renamed)
    first = 1000 + 100 * seed
    people = [
        {"id": first + n, "company_id": 1, "first_name": "x" + tricky(rng)}
        | {"last_name": tricky(rng, 1), "email": f"p{seed}.{n}@example.com"}
        | {"department": tricky(rng), "country": tricky(rng, 1)}
        for n in range(PEOPLE)
    ]
    title = '=1,"x"\r\n' + tricky(rng)
    return {
        "employees": people,
        "campaigns": [
            {
                "id": 900 + seed,
                "company_id": 1,
                "title": title,
                "launch_date": "2026-03-01T08:00:00Z",
            }
        ],
        "campaign_events": [
            {"id": 90000 + first + n, "campaign_id": 900 + seed, "employee_id": p["id"]}
            | {"type": "click", "timestamp": "2026-03-02T09:00:00Z", "with_captcha": False}
            for n, p in enumerate(people)
        ],
    }


async def load_tricky(store: Store, directory: Path, renamed: bool = False) -> None:
    """Campaigns 900 to 902 and their people, loaded (again, renamed) into the store."""
    parts = [campaign(seed, renamed) for seed in range(3)]
    merged = {name: [row for part in parts for row in part[name]] for name in parts[0]}
    fixture = directory / f"tricky-{renamed}.json"
    fixture.write_text(json.dumps(merged), encoding="utf-8")
    await store.load([fixture])


async def exported(client: TestClient, listing: Listing, lines: bool) -> bytes:
    """The listing's exported rows: the database's CSV lines, or its JSON through the layout."""
    pool = client.app[POOL]
    if lines:
        chosen, encode = listing.csv_lines(), join_lines
        assert chosen is not None
    else:
        chosen, encode = listing.exported(), encode_json_chunk
    async with pool.whole(chosen, encode) as result:
        assert isinstance(result, Records)  # short: read whole
        texts = result.texts
    if lines:
        return b"".join(texts)
    return layout_of(exported_rows(CampaignEventSchema)).encode(list(texts), True)


async def assert_exports_agree(client: TestClient, campaigns: list[int]) -> None:
    """Each campaign's events, and some of its people's, exported both ways: the same
    bytes, and the API's CSV is them after the header."""
    header = layout_of(exported_rows(CampaignEventSchema)).header()
    assert header == layout_of(exported_rows(EmployeeEventSchema)).header()
    for campaign_id in campaigns:
        listing = events.campaign_listing(1, campaign_id)
        by_layout = await exported(client, listing, lines=False)
        assert by_layout, campaign_id
        checks = [(listing, f"{API}/campaigns/{campaign_id}/events", by_layout)]
        rows = list(csv.reader(io.StringIO(by_layout.decode(), newline="")))
        people = sorted({int(row[6]) for row in rows})
        assert people and all(len(row) == len(rows[0]) for row in rows)
        for person in people[:5]:
            mine = events.employee_listing(1, person)
            url = f"{API}/victimsapi/{person}/events"
            checks.append((mine, url, await exported(client, mine, lines=False)))
        for listing, url, want in checks:
            assert await exported(client, listing, lines=True) == want, url
            answer = await get(client, f"{url}?format=csv")
            assert await answer.read() == header + want, url


@EACH_STORE
async def test_the_databases_csv_lines_are_the_layouts_bytes(
    tmp_path: Path, store: Store, make_client: MakeClient
) -> None:
    await load_tricky(store, tmp_path)
    client = await make_client()
    await assert_exports_agree(client, [900, 901, 902])
    whole = await exported(client, events.campaign_listing(1, 900), lines=False)
    assert whole.count(b"\r\n") > PEOPLE  # quoted line breaks as well as the rows
    assert b'"\'=1,""x""\r\n' in whole  # the title: guarded and quoted
    await load_tricky(store, tmp_path, renamed=True)  # the kept cells follow every write
    assert await exported(client, events.campaign_listing(1, 900), lines=False) != whole
    await assert_exports_agree(client, [900, 901, 902])


@EACH_STORE
async def test_a_version_9_database_gets_the_cells_kept(
    tmp_path: Path, store: Store, make_client: MakeClient
) -> None:
    if store.url:
        conn = await asyncpg.connect(store.url)
        try:
            for table in KEPT_TEXTS:
                await conn.execute(f"ALTER TABLE {table} DROP COLUMN csv_cells")
            for statement in PG_UNDO_VERSION_11:
                await conn.execute(statement)
            await conn.execute("UPDATE meta SET value = '9' WHERE key = 'schema_version'")
            assert await ensure_schema(conn)
        finally:
            await conn.close()
    else:
        conn = sqlite3.connect(store.sqlite_path, isolation_level=None)
        for table in KEPT_TEXTS:
            conn.execute(f"DROP TRIGGER {table}_csv_cells")
            conn.execute(f"DROP TRIGGER {table}_csv_cells_again")
            conn.execute(f"ALTER TABLE {table} DROP COLUMN csv_cells")
        for statement in UNDO_VERSION_11:
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 9")
        conn.close()
        assert upgrade_if_older(store.sqlite_path)
        assert query(store.sqlite_path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    await load_tricky(store, tmp_path)  # written after the upgrade: the triggers keep them
    client = await make_client()
    await assert_exports_agree(client, [1, 2, 900])
