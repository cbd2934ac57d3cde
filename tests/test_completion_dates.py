"""Inscriptions' completion dates (``completed_at``): given, derived, checked, upgraded.

A fixture may give an inscription's completion date; when it does not, a completed
inscription's date is its latest section completion, and any other's is null. Both
loaders, the generator, the export and the upgrade from schema version 6 write it the
same way; the inscription records the API sends are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.data.pg.schema import ensure_schema
from app.data.schema import SCHEMA_VERSION, upgrade_if_older
from app.tools.export import export_fixture
from app.tools.loader import LoadError, load_files
from app.tools.pg_loader import load_pg
from app.web.schemas import InscriptionSchema

from .support import stats as oracle
from .support.factories import API, get, query, sample, to_version_6, version_6_copy

DATES = "SELECT id, completed_at FROM inscriptions ORDER BY id"


def expected_dates(data: dict[str, Any]) -> list[tuple[int, str | None]]:
    return sorted((i["id"], oracle.completed_at(data, i)) for i in data["inscriptions"])


def test_the_sample_s_dates_are_derived(sample_db: Path) -> None:
    found = query(sample_db, DATES)
    assert found == expected_dates(sample())
    assert sum(1 for _, day in found if day is not None) > 20  # completed ones, dated


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def inscription(**changes: Any) -> dict[str, Any]:
    """Sample inscription 1 (completed, its sections done by 2025-04-18...) changed."""
    return next(i for i in sample()["inscriptions"] if i["id"] == 1) | changes


def test_a_given_date_is_kept_and_a_left_out_one_derived_again(
    sample_db: Path, tmp_path: Path
) -> None:
    derived = query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 1")[0][0]
    given = write(tmp_path / "a.json", {"inscriptions": [inscription(completed_at="2025-06-01")]})
    load_files(sample_db, [given])
    assert query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 1") == [
        ("2025-06-01",)
    ]
    left_out = write(tmp_path / "b.json", {"inscriptions": [inscription()]})
    load_files(sample_db, [left_out])
    assert query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 1") == [(derived,)]
    reopened = write(tmp_path / "c.json", {"inscriptions": [inscription(status="in_progress")]})
    load_files(sample_db, [reopened])
    assert query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 1") == [(None,)]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": "in_progress", "completed_at": "2025-06-01"}, "Only a completed"),
        ({"completed_at": "2025-01-01"}, "before the start date"),
        ({"completed_at": "2025-6-1"}, "completed_at"),
    ],
)
def test_a_bad_date_is_refused(
    sample_db: Path, tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    before = query(sample_db, DATES)
    with pytest.raises(LoadError) as caught:
        load_files(
            sample_db, [write(tmp_path / "bad.json", {"inscriptions": [inscription(**changes)]})]
        )
    assert message in str(caught.value)
    assert query(sample_db, DATES) == before


def two_files(tmp_path: Path) -> list[Path]:
    """Inscription 1 without a date, then in a later file its last section done later."""
    result = {"inscription_id": 1, "section_id": 28, "completed_at": "2025-05-10"}
    return [
        write(tmp_path / "a.json", {"inscriptions": [inscription()]}),
        write(
            tmp_path / "b.json", {"section_results": [{**result, "result": None, "status": None}]}
        ),
    ]


def test_a_date_is_derived_once_the_whole_load_is_written(sample_db: Path, tmp_path: Path) -> None:
    """One load of several files derives from the section results of all of them."""
    load_files(sample_db, two_files(tmp_path))
    assert query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 1") == [
        ("2025-05-10",)
    ]


async def test_postgresql_derives_once_the_whole_load_is_written(
    pg_database: str, tmp_path: Path
) -> None:
    await load_pg(pg_database, two_files(tmp_path))
    conn = await asyncpg.connect(pg_database)
    try:
        found = await conn.fetchval("SELECT completed_at FROM inscriptions WHERE id = 1")
    finally:
        await conn.close()
    assert found == "2025-05-10"


async def test_postgresql_derives_the_same_dates(pg_database: str, tmp_path: Path) -> None:
    given = write(tmp_path / "a.json", {"inscriptions": [inscription(completed_at="2025-06-01")]})
    await load_pg(pg_database, [given])
    conn = await asyncpg.connect(pg_database)
    try:
        found = [tuple(row) for row in await conn.fetch(DATES)]
    finally:
        await conn.close()
    assert found == [(1, "2025-06-01"), *expected_dates(sample())[1:]]


async def test_the_inscription_records_are_unchanged(client: Any) -> None:
    """The date is not part of the inscriptions endpoint's records."""
    body = await (await get(client, f"{API}/course-inscriptions?per_page=500")).json()
    assert body and all(list(r) == list(InscriptionSchema().fields) for r in body)


def test_an_export_keeps_the_dates(sample_db: Path, tmp_path: Path) -> None:
    given = write(tmp_path / "a.json", {"inscriptions": [inscription(completed_at="2025-06-01")]})
    load_files(sample_db, [given])
    exported = tmp_path / "export.json"
    export_fixture(sample_db, exported)
    again = tmp_path / "again.sqlite3"
    load_files(again, [exported])
    assert query(again, DATES) == query(sample_db, DATES)


def test_a_version_6_file_gets_its_dates(sample_db: Path, tmp_path: Path) -> None:
    old = version_6_copy(sample_db, tmp_path / "v6.sqlite3")
    assert upgrade_if_older(old)
    assert query(old, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert query(old, DATES) == expected_dates(sample())


async def test_a_version_6_postgresql_database_gets_its_dates(pg_database: str) -> None:
    conn = await asyncpg.connect(pg_database)
    try:
        await to_version_6(conn)
        assert await ensure_schema(conn)
        found = [tuple(row) for row in await conn.fetch(DATES)]
        assert await conn.fetchval("SELECT unixepoch('1970-01-02T00:00:00Z')") == 86400
    finally:
        await conn.close()
    assert found == expected_dates(sample())
