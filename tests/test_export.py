"""contract.md 9 (the data tools): a database, or one company of it, exported as a fixture
loads back to the same rows and the same answers, and the generator adds a data set after
the data a database holds without one id in common. Every tool runs as a command.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from app.config import Config
from app.main import create_app

from .support.factories import API, DATA_TABLES, KEY_1, dump_tables, query, sample
from .support.servers import run_python

pytestmark = pytest.mark.system  # the tools run as processes

SIZES = ("--companies", "2", "--employees", "20", "--campaigns", "3", "--events-per-campaign",
         "6", "--courses", "2", "--inscriptions", "8", "--sections", "3")  # fmt: skip
OWNED = ("employees", "teams", "campaigns", "courses", "inscriptions")
ROWS = tuple(t for t in DATA_TABLES if t != "api_keys")  # keys are stored hashed, not exported


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_python(f"scripts/{script}", *args)
    assert done.returncode == 0, done.stderr
    return done


def export(db: Path, out: Path, *flags: str) -> dict[str, Any]:
    run("export_fixtures.py", str(out), "--db", str(db), *flags)
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


def keys_only(tmp_path: Path) -> Path:
    """The sample's API keys (their plain text is nowhere in a database)."""
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"api_keys": sample()["api_keys"]}), encoding="utf-8")
    return path


async def answers(aiohttp_client: Any, db: Path) -> list[Any]:
    """What company 1 is told about its campaigns, people and courses."""
    client = await aiohttp_client(create_app(Config(db=str(db), rate_burst=1000)))
    found = []
    for path in ("campaigns", "victimsapi?per_page=100", "courses", "course-inscriptions",
                 "campaigns/1", "campaigns/1/events", "events"):  # fmt: skip
        response = await client.get(f"{API}/{path}", headers={"X-API-Key": KEY_1})
        assert response.status == 200, path
        found.append(await response.json())
    return found


async def test_an_export_loads_back_to_the_same_rows_and_answers(
    tmp_path: Path, sample_db: Path, aiohttp_client: Any
) -> None:
    fixture = tmp_path / "all.json"
    document = export(sample_db, fixture)
    assert document["api_keys"] == []  # stored hashed: the key tool makes new ones
    copy = tmp_path / "copy.sqlite3"
    run("load_fixtures.py", str(fixture), str(keys_only(tmp_path)), "--db", str(copy))
    assert dump_tables(copy, ROWS) == dump_tables(sample_db, ROWS)
    assert await answers(aiohttp_client, copy) == await answers(aiohttp_client, sample_db)


@pytest.mark.parametrize("company", [[], ["--company", "2"]], ids=["all", "one company"])
def test_both_stores_export_the_same_document(
    company: list[str], tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    from_sqlite = export(sample_db, tmp_path / "sqlite.json", *company)
    run("export_fixtures.py", str(tmp_path / "pg.json"), "--database-url", pg_database, *company)
    assert json.loads((tmp_path / "pg.json").read_text(encoding="utf-8")) == from_sqlite


# Text, decimals, instants and nulls each store could write its own way, with the sample.
AWKWARD = {
    "companies": [{"id": 9, "name": 'Ünïcode "quoted" \\ 😀 /'}],  # one printable line
    "employees": [{"id": 900, "company_id": 9, "first_name": "", "last_name": "Núñez",
                   "email": "jose@awkward.example", "department": "", "country": "España"}],
    "campaigns": [{"id": 90, "company_id": 9, "title": "Ça «marche»? tab\t line\n \u2028 \x1f \x7f",
                   "launch_date": "2025-02-11T09:00:00Z"}],
    "campaign_targets": [{"campaign_id": 90, "employee_id": 900, "sent_at": None}],
    "campaign_events": [{"id": 9000, "campaign_id": 90, "employee_id": 900, "type": "click",
                         "timestamp": "2025-02-13T01:21:41Z", "with_captcha": True,
                         "ip": None, "user_agent": "Mozilla/5.0 \"x\" \\ 你好"}],
    "courses": [{"id": 90, "company_id": 9, "title": "Cours n°1"}],
    "course_sections": [
        {"id": 900 + n, "course_id": 90, "title": f"Part {n}", "section_type": "quiz",
         "position": n} for n in range(1, 6)
    ],
    "inscriptions": [{"id": 900, "employee_id": 900, "course_id": 90, "start_date": "2025-03-01",
                      "due_date": None, "status": "in_progress"}],
    "section_results": [
        {"inscription_id": 900, "section_id": 900 + n, "completed_at": "2025-03-02",
         "result": result, "status": "APPROVED"}
        for n, result in enumerate((87.5, 100, 33.333333333333336, 0.1), 1)
    ] + [{"inscription_id": 900, "section_id": 905, "completed_at": None, "result": None,
          "status": None}],
}  # fmt: skip


def test_both_stores_export_the_same_bytes(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    fixture = tmp_path / "awkward.json"
    fixture.write_text(json.dumps(AWKWARD), encoding="utf-8")
    for store in (["--db", str(sample_db)], ["--database-url", pg_database]):
        run("load_fixtures.py", str(fixture), *store, "--no-progress")
    run("export_fixtures.py", str(tmp_path / "sqlite.json"), "--db", str(sample_db))
    run("export_fixtures.py", str(tmp_path / "pg.json"), "--database-url", pg_database)
    from_sqlite = (tmp_path / "sqlite.json").read_bytes()
    assert '"name":"Ünïcode \\"quoted\\"'.encode() in from_sqlite
    assert (tmp_path / "pg.json").read_bytes() == from_sqlite


def test_a_derived_completion_date_before_the_start_loads_back(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    """A load derives a completion date from the section results, which may precede the
    start date; a given date may not, so the export leaves the derived one out."""
    early = {
        "id": 901,
        "employee_id": 900,
        "course_id": 90,
        "start_date": "2025-03-05",
        "due_date": None,
        "status": "completed",
    }  # its one result: 2025-03-02
    result = {"inscription_id": 901, "section_id": 901, "completed_at": "2025-03-02",
              "result": None, "status": None}  # fmt: skip
    data = {**AWKWARD, "inscriptions": [*AWKWARD["inscriptions"], early],
            "section_results": [*AWKWARD["section_results"], result]}  # fmt: skip
    fixture = tmp_path / "early.json"
    fixture.write_text(json.dumps(data), encoding="utf-8")
    for store in (["--db", str(sample_db)], ["--database-url", pg_database]):
        run("load_fixtures.py", str(fixture), *store, "--no-progress")
    assert query(sample_db, "SELECT completed_at FROM inscriptions WHERE id = 901") == [
        ("2025-03-02",)
    ]
    run("export_fixtures.py", str(tmp_path / "sqlite.json"), "--db", str(sample_db))
    run("export_fixtures.py", str(tmp_path / "pg.json"), "--database-url", pg_database)
    assert (tmp_path / "pg.json").read_bytes() == (tmp_path / "sqlite.json").read_bytes()
    copy = tmp_path / "copy.sqlite3"
    run("load_fixtures.py", str(tmp_path / "sqlite.json"), "--db", str(copy), "--no-progress")
    dates = "SELECT id, completed_at FROM inscriptions ORDER BY id"
    assert query(copy, dates) == query(sample_db, dates)


def test_one_company_only(tmp_path: Path, sample_db: Path) -> None:
    document = export(sample_db, tmp_path / "two.json", "--company", "2")
    assert [c["id"] for c in document["companies"]] == [2]
    for table in OWNED:
        expected = sorted(r["id"] for r in sample()[table] if r.get("company_id", 2) == 2)
        if table == "inscriptions":
            people = {e["id"] for e in sample()["employees"] if e["company_id"] == 2}
            expected = sorted(r["id"] for r in sample()[table] if r["employee_id"] in people)
        assert sorted(r["id"] for r in document[table]) == expected, table
    campaigns = {c["id"] for c in document["campaigns"]}
    assert {e["campaign_id"] for e in document["campaign_events"]} <= campaigns
    assert len(document["campaign_events"]) == sum(
        e["campaign_id"] in campaigns for e in sample()["campaign_events"]
    )
    fresh = tmp_path / "fresh.sqlite3"
    run("load_fixtures.py", str(tmp_path / "two.json"), "--db", str(fresh))
    assert query(fresh, "SELECT DISTINCT company_id FROM employees") == [(2,)]


def test_an_unknown_company_or_database_is_one_line_and_writes_nothing(
    tmp_path: Path, sample_db: Path, pg_database: str
) -> None:
    out = tmp_path / "none.json"
    for flags, cause in (
        (["--db", str(sample_db), "--company", "9"], f"no company 9 in {sample_db}"),
        (["--database-url", pg_database, "--company", "9"], "no company 9 in the database"),
        (["--db", str(tmp_path / "missing.sqlite3")], "no database at"),
    ):
        done = run_python("scripts/export_fixtures.py", str(out), *flags)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith(f"export refused, nothing written: {cause}"), done.stderr
        assert done.stderr.count("\n") == 1
        assert list(tmp_path.glob("none.json*")) == []
    # What is no regular file (a device such as /dev/full, here a pipe; a folder), which
    # the rename would replace: refused, from either store.
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for given in (pipe, tmp_path):
        for store in (["--db", str(sample_db)], ["--database-url", pg_database]):
            done = run_python("scripts/export_fixtures.py", str(given), *store)
            assert done.returncode == 1 and "is not a regular file" in done.stderr, done.stderr
    assert pipe.is_fifo()
    # The database itself (or its WAL) as the output: refused, the database as it was.
    before = sample_db.read_bytes()
    for given in (sample_db, Path(f"{sample_db}-wal")):
        done = run_python("scripts/export_fixtures.py", str(given), "--db", str(sample_db))
        assert done.returncode == 1 and "is the database itself" in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    assert sample_db.read_bytes() == before


def test_the_generator_appends_after_the_sample_without_collisions(
    tmp_path: Path, sample_db: Path
) -> None:
    before = dump_tables(sample_db, DATA_TABLES)
    done = run("generate_fixtures.py", "--db", str(sample_db), "--append", *SIZES,
               "--seed", "4", "--no-progress")  # fmt: skip
    assert "company 3 key: " in done.stdout and "company 4 key: " in done.stdout
    after = dump_tables(sample_db, DATA_TABLES)
    for table in DATA_TABLES:  # the sample's rows are all still there, unchanged
        assert set(before[table]) <= set(after[table]), table
    assert query(sample_db, "SELECT id FROM companies ORDER BY id") == [(1,), (2,), (3,), (4,)]
    for table in (*OWNED, "course_sections"):
        first_new = max(r["id"] for r in sample()[table]) + 1
        new = query(sample_db, f"SELECT min(id), count(*) FROM {table} WHERE id >= ?", first_new)
        assert new[0][0] == first_new and new[0][1] > 0, table
    for table in OWNED:
        companies = query(
            sample_db, f"SELECT DISTINCT company_id FROM {table} WHERE id > ?",
            max(r["id"] for r in sample()[table]),
        )  # fmt: skip
        assert sorted(companies) == [(3,), (4,)], table
    # The change sequence is shared by the events and the change feeds' rows: each place
    # once, none skipped.
    seqs = query(
        sample_db,
        "SELECT seq FROM campaign_events UNION ALL SELECT seq FROM inscriptions"
        " UNION ALL SELECT seq FROM employees ORDER BY seq",
    )
    assert [s for (s,) in seqs] == list(range(1, len(seqs) + 1))
    assert query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'") == [
        (str(len(seqs)),)
    ]
    # The whole database, sample and generated, exports and loads back as it is.
    fixture = tmp_path / "both.json"
    export(sample_db, fixture)
    copy = tmp_path / "copy.sqlite3"
    run("load_fixtures.py", str(fixture), "--db", str(copy), "--no-progress")
    # (The load gives the change sequence's places in its own order.)
    assert dump_tables(copy, ROWS, ("seq",)) == dump_tables(sample_db, ROWS, ("seq",))


def test_an_append_past_the_largest_safe_id_is_refused(tmp_path: Path, sample_db: Path) -> None:
    """Ids a client reads exactly stop at 2^53-1: an append that would pass them writes
    nothing (it wrote them, and its export did not load back)."""
    top = tmp_path / "top.json"
    company = {"id": 2**53 - 1, "name": "Top Co"}
    employee = {"id": 2**53 - 2, "company_id": 1, "first_name": "A", "last_name": "B",
                "email": "top@x.example", "department": "", "country": ""}  # fmt: skip
    top.write_text(json.dumps({"companies": [company], "employees": [employee]}))
    run("load_fixtures.py", str(top), "--db", str(sample_db), "--no-progress")
    before = dump_tables(sample_db, DATA_TABLES)
    done = run_python(
        "scripts/generate_fixtures.py", "--db", str(sample_db), "--append", *SIZES,
        "--seed", "4", "--no-progress",
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("generation refused, database unchanged: companies would take")
    assert dump_tables(sample_db, DATA_TABLES) == before
