"""The feed after a restored backup (contract.md 13), on SQLite and PostgreSQL.

A cursor given after the backup was taken points at events the restored database no
longer has: it is refused with a 400 that says to start again, whether or not loads
have written past its position since the restore (they would otherwise be skipped).
A cursor given before the backup keeps working.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support.clients import MakeClient
from .support.factories import API, assert_problem, get, sample
from .support.loads import write_fixture
from .support.stores import Store, database_copy, on_both_stores

store_kind = on_both_stores()
FEED = f"{API}/events?limit=1000"
Restore = Callable[[], Any]


def events(first_id: int, count: int) -> dict[str, Any]:
    """``count`` new click events of company 1's campaign 1, ids from ``first_id``."""
    person = next(e["id"] for e in sample()["employees"] if e["company_id"] == 1)
    return {
        "campaign_events": [
            {"id": first_id + n, "campaign_id": 1, "employee_id": person, "type": "click"}
            | {"timestamp": "2026-01-05T10:00:00Z", "with_captcha": False}
            for n in range(count)
        ]
    }


async def load(store: Store, tmp_path: Path, first_id: int, count: int) -> None:
    name = tmp_path / f"events_{first_id}.json"
    await store.load([write_fixture(name, events(first_id, count))])


async def caught_up(client: TestClient, cursor: str = "") -> tuple[str, list[int]]:
    """Follow the feed to its end: the last cursor, and the ids received on the way."""
    ids: list[int] = []
    while True:
        response = await get(client, FEED + (f"&cursor={cursor}" if cursor else ""))
        assert response.status == 200, await response.text()
        page = await response.json(content_type=None)
        cursor = response.headers["X-Next-Cursor"]
        ids += [e["id"] for e in page]
        if not page:
            return cursor, ids


@asynccontextmanager
async def backup(store: Store, tmp_path: Path) -> AsyncIterator[Restore]:
    """A copy of the store's database now; the function that restores it in place."""
    if not store.url:
        copy = tmp_path / "backup.sqlite3"
        with sqlite3.connect(store.sqlite_path) as source, sqlite3.connect(copy) as target:
            source.backup(target)

        def restore_file() -> None:
            with sqlite3.connect(copy) as source, sqlite3.connect(store.sqlite_path) as target:
                source.backup(target)

        yield restore_file
        return
    async with database_copy(store.url) as restore_database:
        yield restore_database


@pytest.mark.parametrize("loads_after_restore", [0, 3, 30])
async def test_a_cursor_from_after_the_backup_is_refused(
    store: Store, make_client: MakeClient, tmp_path: Path, loads_after_restore: int
) -> None:
    client = await make_client()
    before_backup, _ = await caught_up(client)
    await client.close()
    async with backup(store, tmp_path) as restore:
        await load(store, tmp_path, 700_000, 5)
        client = await make_client()
        after_backup, ids = await caught_up(client, before_backup)
        assert len(ids) == 5
        await client.close()
        restored = restore()
        if restored is not None:
            await restored
    if loads_after_restore:
        # The restored database writes the sequence again, past the cursor's position.
        await load(store, tmp_path, 800_000, loads_after_restore)
    client = await make_client()
    response = await get(client, f"{FEED}&cursor={after_backup}")
    body = await assert_problem(response, 400)
    assert "restored" in body["errors"]["cursor"][0]
    assert "Start again without a cursor" in body["errors"]["cursor"][0]
    # A collector that had not read past the backup goes on, and misses nothing.
    _, ids = await caught_up(client, before_backup)
    assert ids == list(range(800_000, 800_000 + loads_after_restore))
