"""The data version only moves forward.

A read that waited for a pooled connection may show a load older than one the server
already knows; tokens have no order, so such a token makes the server read the
database's token again, never take it (it took it, and gave 304s for changed answers
until its next look). And a load committed while the token is read is noticed at the
next look, not a second later.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.data.schema import TOKEN
from app.data.version import DataVersion
from app.tools.loader import load_files
from app.web.responder import refresh_version

from .support.clients import MakeClient
from .support.clock import FakeClock
from .support.factories import make_sample_db
from .support.stores import Store, fetch_all, on_both_stores

store_kind = on_both_stores()


def renamed(directory: Path, name: str) -> Path:
    """A load that changes company 1's name: it moves the data version."""
    path = directory / f"{name}.json"
    path.write_text(json.dumps({"companies": [{"id": 1, "name": name}]}), encoding="utf-8")
    return path


async def token_of(store: Store) -> str:
    """The token the database holds now, read past the app."""
    if store.url:
        [row] = await fetch_all(store.url, TOKEN)
        return str(row[0])
    with sqlite3.connect(store.sqlite_path) as conn:
        [(token,)] = conn.execute(TOKEN).fetchall()
    conn.close()
    return str(token)


@pytest.mark.writes
async def test_a_token_an_older_snapshot_showed_never_moves_the_version_back(
    make_client: MakeClient, store: Store, tmp_path: Path
) -> None:
    client = await make_client()
    app = client.server.app
    await store.load([renamed(tmp_path, "First")])
    older = await token_of(store)
    await store.load([renamed(tmp_path, "Second")])
    newest = await token_of(store)
    assert older != newest
    assert await refresh_version(app, newest) == newest  # a read after both loads
    assert await refresh_version(app, older) == newest  # one that began between them
    assert await refresh_version(app) == newest


def test_a_load_committed_while_the_token_is_read_is_seen_at_the_next_look(
    tmp_path: Path,
) -> None:
    db = make_sample_db(tmp_path)
    clock = FakeClock()
    with sqlite3.connect(db) as conn:
        [(token,)] = conn.execute(TOKEN).fetchall()
    conn.close()
    version = DataVersion(db, token, clock)
    clock.advance(DataVersion.STAT_SECONDS * 2)
    assert not version.is_stale()  # a look: nothing changed
    load_files(db, [renamed(tmp_path, "Meanwhile")])  # commits after the token was read
    version.update(token)
    clock.advance(DataVersion.STAT_SECONDS * 2)
    assert version.is_stale()
