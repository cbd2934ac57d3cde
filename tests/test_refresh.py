"""Pages read again after a load (app/web/refresh.py), through the real app and loader.

After a load, each process reads the pages it served last again before they are asked
for: a total no summary holds is counted at the new data version, once, off the first
request's path, and only for the company that asked.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from app.data.listings import Paging
from app.keys import COUNTS, DATA_VERSION
from app.web.refresh import SLOW_SECONDS, WATCH_SECONDS, RecentPages

from .support.clients import traced
from .support.factories import API, KEY_1, KEY_2, query
from .support.stores import EACH_STORE, Store

TEAM = "Blue Team"
TEAM_PAGE = f"{API}/course-inscriptions?filter%5Bteams%5D=Blue+Team&per_page=2"  # counted


def an_inscription_for_the_team(db: Path) -> dict[str, Any]:
    """A new inscription of a member of company 1's TEAM, in a course they are not in."""
    (person,) = query(
        db,
        "SELECT m.employee_id FROM team_members m JOIN teams t ON t.id = m.team_id"
        " WHERE t.company_id = 1 AND t.name = ? ORDER BY 1 LIMIT 1",
        TEAM,
    )[0]
    (course,) = query(
        db,
        "SELECT id FROM courses WHERE company_id = 1 AND id NOT IN"
        " (SELECT course_id FROM inscriptions WHERE employee_id = ?) ORDER BY id LIMIT 1",
        person,
    )[0]
    (last,) = query(db, "SELECT max(id) FROM inscriptions")[0]
    return {"id": last + 1, "employee_id": person, "course_id": course} | {
        "start_date": "2025-05-05", "due_date": None, "status": "not_started"
    }  # fmt: skip


def counted_then_read(statements: list[str]) -> bool:
    """Whether the page was counted, then read again with its total known (no count):
    the total is in the count cache by then."""
    counted = [i for i, sql in enumerate(statements) if "count(" in sql]
    return bool(counted) and any(
        "LIMIT" in sql and "count(" not in sql for sql in statements[counted[0] + 1 :]
    )


async def total(client: Any, key: str) -> int:
    response = await client.get(TEAM_PAGE, headers={"X-API-KEY": key})
    assert response.status == 200
    return int(response.headers["X-Total-Count"])


async def load_one_more(store: Store, tmp_path: Path) -> None:
    """Load a new inscription of a TEAM member: company 1's team total grows by one."""
    fixture = tmp_path / "one.json"
    record = an_inscription_for_the_team(store.sqlite_path)  # the sample, in either store
    fixture.write_text(json.dumps({"inscriptions": [record]}))
    await store.load([fixture])


async def until(found: Any) -> None:
    """Wait for ``found()`` (the watcher looks every WATCH_SECONDS), 30 s at the most."""
    for _ in range(int(30 / WATCH_SECONDS) * 20):
        if found():
            return
        await asyncio.sleep(WATCH_SECONDS / 20)


@EACH_STORE
async def test_after_a_load_a_served_total_is_counted_at_the_new_version_unasked(
    make_client: Any, store: Store, tmp_path: Path
) -> None:
    client = await make_client()
    before = await total(client, KEY_1)
    assert await total(client, KEY_1) == before  # its total known: a quick read, remembered
    counts, token = client.app[COUNTS], client.app[DATA_VERSION].token
    await load_one_more(store, tmp_path)

    def newer() -> list[int]:  # the totals the cache holds at another version than token's
        return [value for at, value in counts._values.values() if at != token]

    await until(newer)
    assert newer() == [before + 1]  # no request came: the process counted it itself
    assert await total(client, KEY_1) == before + 1


async def test_the_first_request_after_a_load_counts_nothing_on_its_path(
    make_client: Any, store: Store, tmp_path: Path
) -> None:
    """On SQLite, traced: the process counts the total, then reads the page with it known;
    the first request after the load counts nothing; another company's, its own."""
    client = await make_client()
    before = await total(client, KEY_1)
    assert await total(client, KEY_1) == before
    statements = await traced(client)
    await load_one_more(store, tmp_path)
    await until(lambda: counted_then_read(statements))
    assert counted_then_read(statements)  # counted by the watcher, unasked, then read as known
    statements.clear()
    assert await total(client, KEY_1) == before + 1  # the new version's total
    assert not any("count(" in sql for sql in statements)  # not counted on this path
    # Another company asking the same URL gets its own total, counted for it.
    fresh = await make_client()
    assert await total(client, KEY_2) == await total(fresh, KEY_2)
    assert any("count(" in sql for sql in statements)


def test_the_most_recent_quick_pages_are_kept_in_the_order_they_were_served() -> None:
    """At most ``size`` pages, the most recent last; a page read slower than SLOW_SECONDS
    is not kept."""
    recent = RecentPages(size=2)
    listing: Any = object()  # only kept and handed back
    for page in (1, 2, 3, 2):
        recent.note((1, b"filters"), listing, Paging(page, 25), 0.001)
    assert [paging.page for _, _, paging in recent.pages()] == [3, 2]
    recent.note((1, b"filters"), listing, Paging(4, 25), SLOW_SECONDS * 2)
    assert [paging.page for _, _, paging in recent.pages()] == [3, 2]
