"""The CSV lines the database writes are, to the byte, what the CSV layout makes of the JSON.

The events' exports are written as CSV by the database (app/data/csv_lines.py); every
other listing's CSV comes from its JSON through app/web/csv_layout.py. The two must
never differ: on both stores, a company whose names, titles and departments are drawn
from the characters CSV cares about (comma, quote, CR, LF, the formula starts, the
apostrophe, spaces, non-ASCII) is exported both ways and the bytes compared, and the
answer the API sends is the same bytes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from aiohttp.test_utils import TestClient

from app.data import events
from app.data.listings import Listing, Records
from app.keys import POOL
from app.web.csv_layout import layout_of
from app.web.formats import encode_json_chunk, join_lines
from app.web.schemas import CampaignEventSchema, EmployeeEventSchema, exported_rows

from .support.clients import MakeClient
from .support.factories import API, get
from .support.stores import EACH_STORE, Store

ALPHABET = [",", '"', "\r", "\n", "=", "+", "-", "@", "\t", "'", " ", "a", "Z", "é", "\u2028"]
PEOPLE = 60


def tricky(rng: random.Random, least: int = 0) -> str:
    """A short string of the characters CSV quoting and the formula guard look at."""
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(least, 6)))


def campaign(seed: int) -> dict[str, list[dict[str, object]]]:
    """Company 1's extra campaign 900 + seed and its people, each clicking once."""
    rng = random.Random(seed)
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


@EACH_STORE
async def test_the_databases_csv_lines_are_the_layouts_bytes(
    tmp_path: Path, store: Store, make_client: MakeClient
) -> None:
    fixture = tmp_path / "tricky.json"
    parts = [campaign(seed) for seed in range(3)]
    merged = {name: [row for part in parts for row in part[name]] for name in parts[0]}
    fixture.write_text(json.dumps(merged), encoding="utf-8")
    await store.load([fixture])
    client = await make_client()
    header = layout_of(exported_rows(CampaignEventSchema)).header()
    assert header == layout_of(exported_rows(EmployeeEventSchema)).header()
    checks = []
    for seed in range(3):
        first = 1000 + 100 * seed
        checks.append(
            (events.campaign_listing(1, 900 + seed), f"{API}/campaigns/{900 + seed}/events")
        )
        checks += [(events.employee_listing(1, first + n), f"{API}/victimsapi/{first + n}/events")
                   for n in range(0, PEOPLE, 7)]  # fmt: skip
    for listing, url in checks:
        by_layout = await exported(client, listing, lines=False)
        assert await exported(client, listing, lines=True) == by_layout, url
        answer = await get(client, f"{url}?format=csv")
        assert await answer.read() == header + by_layout, url
    whole = await exported(client, checks[0][0], lines=False)
    assert whole.count(b"\r\n") > PEOPLE  # quoted line breaks as well as the rows
    assert b'"\'=1,""x""\r\n' in whole  # the title: guarded and quoted
