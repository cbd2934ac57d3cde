"""contract.md 16 (importing from GoPhish) through the real loader, database and API.

Pins: one command loads a GoPhish export into a company, all or nothing; employees are
matched by email within the company (keeping their id and fields); importing the same
export twice changes nothing; a later export of the same campaign adds only what is new;
two sources with the same GoPhish campaign id do not collide; the people CSV fills
department and country; a refused import leaves the database file byte for byte as it
was and says why in a few lines with exit code 1; and the imported campaign, people and
events are served by the API: the two events endpoints, and the event feed with each
event's ip and user agent (contract.md 10 and 13). Every id the API serves after an import
fits in 53 bits; a database holding an earlier import's wider ids is upgraded in place by
the next import, on both stores; an import with nothing to write keeps the data version.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sqlite3
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from app.config import Config
from app.data import stats_summary, summaries
from app.data.pg import summaries as pg_summaries
from app.data.pg.stats_summary import refresh as pg_refresh_stats
from app.data.schema import fill_summaries
from app.main import create_app
from app.tools.gophish import import_export
from app.tools.gophish import main as import_main
from app.tools.gophish_format import EVENT_OF_MESSAGE, GoInstant, browser_of
from app.tools.gophish_ids import MAX_SAFE_ID
from app.tools.gophish_mapping import stable_id
from app.tools.loader import LoadError

from .support.clients import MakeClient, ProblemTestServer
from .support.docs import blocks, section
from .support.factories import (
    API,
    KEY_2,
    assert_problem,
    by_id,
    dump_tables,
    get,
    make_sample_db,
    query,
)
from .support.servers import run_python
from .support.stores import run_apart

EXPORT = Path(__file__).parent / "data" / "gophish_export.json"
TABLES = ("companies", "employees", "campaigns", "campaign_targets", "campaign_events")
EVENT_COLUMNS = "id, campaign_id, employee_id, type, timestamp, with_captcha, ip, user_agent"
JOSE = 7  # José Núñez, an employee of company 1 in the sample


def export() -> list[dict[str, Any]]:
    """The fixture export, parsed afresh, with one result that is a sample employee."""
    document: list[dict[str, Any]] = json.loads(EXPORT.read_text(encoding="utf-8"))
    jose = by_id("employees")[JOSE]
    shouting = jose["email"].upper()
    document[1]["results"].append(
        {"id": "Jn7", "email": shouting, "first_name": "J", "last_name": "N", "status": ""}
    )
    document[1]["timeline"] += [
        {"email": shouting, "time": "2025-04-01T11:30:07Z", "message": "Email Sent"},
        {"email": shouting, "time": "2025-04-01T11:45:00.5Z", "message": "Email Reported"},
    ]
    return document


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def fingerprint(db: Path) -> dict[str, str]:
    """SHA-256 of the database file and of its WAL, if any."""
    files = [db, Path(f"{db}-wal")]
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


def state(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The rows an import writes, events without their place in the feed (``seq``)."""
    tables = dump_tables(db, TABLES, without=("seq",))  # employees' place in their feed too
    tables["campaign_events"] = query(
        db, f"SELECT {EVENT_COLUMNS} FROM campaign_events ORDER BY id"
    )
    return tables


def feed_places(db: Path) -> dict[int, int]:
    """Each event's place in the feed."""
    return dict(query(db, "SELECT id, seq FROM campaign_events"))


def campaign_id(gophish_id: int, source: str = "gophish", company: int = 1) -> int:
    return stable_id("campaign", company, source, gophish_id)


def test_an_export_loads_and_loading_it_again_changes_nothing(
    sample_db: Path, tmp_path: Path
) -> None:
    path = write(tmp_path / "export.json", export())
    before = state(sample_db)
    summary = import_export(sample_db, path, 1)
    after = state(sample_db)
    source = export()
    mapped = [e for c in source for e in c["timeline"] if e["message"] in EVENT_OF_MESSAGE]
    assert len(after["campaign_events"]) - len(before["campaign_events"]) == len(mapped)
    assert summary.events == len(mapped)
    assert len(after["campaigns"]) - len(before["campaigns"]) == len(source)
    # The sample employee was matched (upper-case email): five new people, José unchanged.
    assert len(after["employees"]) - len(before["employees"]) == 5
    assert [r for r in after["employees"] if r[0] == JOSE] == [
        r for r in before["employees"] if r[0] == JOSE
    ]
    reported = query(
        sample_db,
        "SELECT type, timestamp FROM campaign_events WHERE employee_id = ? AND campaign_id = ?",
        JOSE,
        campaign_id(4),
    )
    assert reported == [("report", "2025-04-01T11:45:00Z")]
    places = feed_places(sample_db)
    import_export(sample_db, path, 1)
    assert state(sample_db) == after
    assert feed_places(sample_db) == places  # nothing moved in the event feed either


def test_a_later_export_adds_only_what_is_new(sample_db: Path, tmp_path: Path) -> None:
    full = export()
    early = copy.deepcopy(full)
    early[0]["timeline"] = early[0]["timeline"][:6]
    early[1]["results"] = early[1]["results"][:1]
    early[1]["timeline"] = early[1]["timeline"][:2]
    import_export(sample_db, write(tmp_path / "early.json", early), 1)
    first, places = state(sample_db), feed_places(sample_db)
    import_export(sample_db, write(tmp_path / "full.json", full), 1)
    later = state(sample_db)
    # Events already there keep their place in the feed: only the new ones are written.
    assert {i: feed_places(sample_db)[i] for i in places} == places
    for table in ("employees", "campaigns", "campaign_events"):
        assert set(first[table]) <= set(later[table])
        assert (len(later[table]) > len(first[table])) == (table != "campaigns")
    # The same state as importing the full export alone.
    (tmp_path / "fresh").mkdir()
    alone = make_sample_db(tmp_path / "fresh")
    import_export(alone, write(tmp_path / "full.json", full), 1)
    assert state(alone) == later


def test_two_servers_with_the_same_campaign_ids_do_not_collide(
    sample_db: Path, tmp_path: Path
) -> None:
    path = write(tmp_path / "export.json", export())
    before = state(sample_db)
    import_export(sample_db, path, 1, source="gophish-eu")
    one = state(sample_db)
    import_export(sample_db, path, 1, source="gophish-us")
    two = state(sample_db)
    for table in ("campaigns", "campaign_targets", "campaign_events"):
        added = len(one[table]) - len(before[table])
        assert added > 0 and len(two[table]) - len(one[table]) == added
    assert two["employees"] == one["employees"]  # the same people, matched by email
    titles = query(sample_db, "SELECT id FROM campaigns WHERE title = 'Payroll update'")
    assert sorted(titles) == sorted(
        [(campaign_id(3, "gophish-eu"),), (campaign_id(3, "gophish-us"),)]
    )


def test_the_people_file_fills_department_and_country(sample_db: Path, tmp_path: Path) -> None:
    jose = by_id("employees")[JOSE]
    people = tmp_path / "people.csv"
    people.write_text(
        "email,department,country\r\n"
        "erin.novak@acme.example,Purchasing,Poland\r\n"
        f"{jose['email']},Treasury,\r\n",
        encoding="utf-8",
    )
    summary = import_export(sample_db, write(tmp_path / "e.json", export()), 1, people=people)
    rows = query(sample_db, "SELECT email, department, country, first_name FROM employees")
    found = {email: rest for email, *rest in rows}
    assert found["erin.novak@acme.example"] == ["Purchasing", "Poland", "Erin"]
    assert found[jose["email"]] == ["Treasury", jose["country"], jose["first_name"]]
    assert found["carol.white@acme.example"] == ["", "", ""]
    assert summary.updated_employees == 1


def test_a_missing_company_is_refused_unless_named(sample_db: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "export.json", export()[:1])
    before = fingerprint(sample_db)
    with pytest.raises(LoadError, match="no such company"):
        import_export(sample_db, path, 77)
    assert fingerprint(sample_db) == before
    import_export(sample_db, path, 77, company_name="Acme Freight")
    assert query(sample_db, "SELECT name FROM companies WHERE id = 77") == [("Acme Freight",)]
    assert query(sample_db, "SELECT count(*) FROM campaigns WHERE company_id = 77") == [(1,)]


def test_a_new_database_file_is_created(tmp_path: Path) -> None:
    db, document = tmp_path / "new.sqlite3", export()
    import_export(db, write(tmp_path / "e.json", document), 3, company_name="Acme")
    # Every result but the one GoPhish never sent to (Error Sending Email) is a target.
    targets = sum(len(c["results"]) for c in document) - 1
    assert query(db, "SELECT count(*) FROM campaign_targets") == [(targets,)]


HOSTILE: list[tuple[str, Any, str]] = [
    ("wrong type", [{"id": "three"}], "[0].id: Not a valid integer."),
    ("unknown message", "message", "[0].timeline[2].message: Must be one of"),
    ("event for a stranger", "stranger", "is not among the results"),
    ("a string", "all the campaigns", "not a GoPhish campaign object or a list of them"),
    ("lone surrogate", "surrogate", "[1].name: Not text: a lone surrogate (U+D800)."),
]


@pytest.mark.system
@pytest.mark.parametrize(("case", "document", "expected"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_refused_import_leaves_the_file_unchanged_and_says_why(
    sample_db: Path, tmp_path: Path, case: str, document: Any, expected: str
) -> None:
    if document == "message":
        document = export()
        document[0]["timeline"][2]["message"] = "Email Forwarded"
    elif document == "surrogate":
        document = export()
        document[1]["name"] = "Password \ud800expiry"
    elif document == "stranger":
        document = export()
        document[0]["timeline"][6]["email"] = "stranger@elsewhere.example"
    path = write(tmp_path / "export.json", document)
    before = fingerprint(sample_db)
    done = run_python(
        "scripts/import_gophish.py", str(path), "--company", "1", "--db", str(sample_db)
    )
    assert done.returncode == 1, done
    assert done.stdout == "" and "Traceback" not in done.stderr
    # One problem: one line after the prefix; several: one indented line each.
    assert done.stderr.startswith("import refused, database unchanged:")
    lines = done.stderr.removeprefix("import refused, database unchanged:").splitlines()
    assert any(line.strip().startswith(f"{path}: ") and expected in line for line in lines)
    assert (len(done.stderr.splitlines()) == 1) == (case != "wrong type")
    assert fingerprint(sample_db) == before


def test_an_export_and_a_people_file_list_at_most_20_problems_together(
    sample_db: Path, tmp_path: Path
) -> None:
    """15 strangers in the timeline and 15 bad rows of people: 20 lines and the note."""
    document = export()
    document[0]["timeline"] += [
        {"email": f"nobody{n}@elsewhere.example", "time": "2025-03-03T10:00:00Z",
         "message": "Email Opened"}
        for n in range(15)
    ]  # fmt: skip
    people = tmp_path / "people.csv"
    people.write_text(
        "email,department,country\r\n" + "".join(f"bad{n},x,y\r\n" for n in range(15)), "utf-8"
    )
    before = fingerprint(sample_db)
    with pytest.raises(LoadError) as refused:
        import_export(sample_db, write(tmp_path / "export.json", document), 1, people=people)
    assert len(refused.value.problems) == 21
    assert refused.value.problems[-1] == "(stopped after 20 problems)"
    assert fingerprint(sample_db) == before


@pytest.mark.system
def test_fifty_megabytes_of_junk_is_refused_in_a_few_lines(sample_db: Path, tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    with path.open("w") as out:
        out.write("[" + '{"id": true, "name": 5},' * 2_200_000 + "{}]")
    assert path.stat().st_size > 50_000_000
    before = fingerprint(sample_db)
    done = run_python(
        "-m", "app.tools.gophish", str(path), "--company", "1", "--db", str(sample_db)
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert 3 <= len(done.stderr.splitlines()) <= 22
    assert fingerprint(sample_db) == before


@pytest.mark.system
def test_the_command_prints_one_summary_line(sample_db: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "export.json", export())
    done = run_python(
        "scripts/import_gophish.py",
        str(path),
        "--company",
        "1",
        "--db",
        str(sample_db),
        "--source",
        "GoPhish-EU",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    assert done.stdout.startswith(f"imported {path} into company 1 (gophish-eu): 2 campaigns,")
    assert "skipped: 2 Campaign Created, 1 Error Sending Email, 1 Proxied request" in done.stdout


@pytest.mark.system
@pytest.mark.parametrize(
    "flags",
    [
        ["--company", "0"],
        ["--company", "one"],
        ["--company", "1", "--source", ""],
        ["--company", "1", "--source", "has space"],
    ],
)
def test_bad_flags_are_refused_by_the_parser(sample_db: Path, flags: list[str]) -> None:
    done = run_python("scripts/import_gophish.py", str(EXPORT), *flags, "--db", str(sample_db))
    assert done.returncode == 2 and "Traceback" not in done.stderr


async def test_the_api_serves_what_was_imported(
    sample_db: Path, tmp_path: Path, make_client: MakeClient
) -> None:
    source = export()
    import_export(sample_db, write(tmp_path / "export.json", source), 1)
    client = await make_client()
    payroll = campaign_id(3)
    response = await get(client, f"{API}/campaigns/{payroll}/events")
    assert response.status == 200
    events = await response.json()
    entries = [e for e in source[0]["timeline"] if e["message"] in EVENT_OF_MESSAGE]
    expected = sorted(
        (
            GoInstant().deserialize(e["time"]).utc.strftime("%Y-%m-%dT%H:%M:%SZ"),
            EVENT_OF_MESSAGE[e["message"]],
            e["email"].casefold(),
        )
        for e in entries
    )
    served = [(e["timestamp"], e["type"], e["victim"]["email"].casefold()) for e in events]
    assert served == expected
    assert {e["victim"]["department"] for e in events} == {""}
    # The sample employee's own events now include the imported report, with its campaign.
    response = await get(client, f"{API}/victimsapi/{JOSE}/events")
    mine = await response.json()
    imported = [e for e in mine if e["campaign"]["id"] == campaign_id(4)]
    assert [(e["type"], e["timestamp"]) for e in imported] == [("report", "2025-04-01T11:45:00Z")]
    assert imported[0]["campaign"]["title"] == "Password expiry"
    # The campaigns report finds an imported campaign by its title in any case.
    found = await get(client, f"{API}/campaigns?filter[title]=PASSWORD%20EXPIRY")
    assert [c["id"] for c in await found.json()] == [campaign_id(4)]
    # Another company's key sees nothing of it.
    await assert_problem(await get(client, f"{API}/campaigns/{payroll}/events", key=KEY_2), 404)


@pytest.mark.system
def test_the_readme_example_prints_what_the_readme_says(sample_db: Path, tmp_path: Path) -> None:
    block = blocks(section("Coming from GoPhish"), "sh")[1]
    command, shown = block.split("\n", 1)
    words = command.split()
    assert words[0] == "reporting-import-gophish"
    words = [str(EXPORT) if w == "export.json" else w for w in words[1:]]
    words = [str(sample_db) if w == "reporting.sqlite3" else w for w in words]
    # The installed console script (a Python file), run as a user's shell would run it.
    done = run_python(str(Path(sys.executable).parent / "reporting-import-gophish"), *words)
    assert done.returncode == 0, done.stderr
    said = " ".join(shown.split()).replace("export.json", str(EXPORT))
    assert " ".join(done.stdout.split()) == said


def served_row(event: dict[str, Any]) -> tuple[Any, ...]:
    """What the feed says of an event, comparable with :func:`expected_row`."""
    victim, campaign = event["victim"]["email"].casefold(), event["campaign"]["title"]
    when, ip, agent = event["timestamp"], event["ip"], event["user_agent"]
    return (campaign, victim, event["type"], when, ip, agent, event["with_captcha"])


def expected_row(title: str, entry: dict[str, Any]) -> tuple[Any, ...]:
    """What the feed must say of a GoPhish timeline entry."""
    when = GoInstant().deserialize(entry["time"]).utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    ip, agent = browser_of(entry.get("details"))
    kind = EVENT_OF_MESSAGE[entry["message"]]
    return (title, entry["email"].casefold(), kind, when, ip, agent, False)


async def test_the_event_feed_serves_addresses_and_user_agents(
    sample_db: Path, tmp_path: Path, make_client: MakeClient
) -> None:
    source = export()
    import_export(sample_db, write(tmp_path / "export.json", source), 1)
    client = await make_client()
    served: list[dict[str, Any]] = []
    url = f"{API}/events?limit=1000"
    while True:
        response = await get(client, url)
        assert response.status == 200, await response.text()
        page = await response.json()
        if not page:
            break
        served += page
        url = f"{API}/events?limit=1000&cursor={response.headers['X-Next-Cursor']}"
    ours = {campaign_id(c["id"]) for c in source}
    got = [served_row(e) for e in served if e["campaign"]["id"] in ours]
    expected = [
        expected_row(campaign["name"], entry)
        for campaign in source
        for entry in campaign["timeline"]
        if entry["message"] in EVENT_OF_MESSAGE
    ]
    assert sorted(got, key=str) == sorted(expected, key=str)
    assert {row[4] is None for row in got} == {True, False}  # with and without an address


# What an import into PostgreSQL must serve exactly as the same import into SQLite.
SERVED = (
    f"{API}/campaigns",
    f"{API}/campaigns/{campaign_id(3)}/events",
    f"{API}/victimsapi/{JOSE}/events",
    f"{API}/events?limit=1000",
)


async def pg_state(url: str) -> list[Any]:
    """The data token and the rows an import writes, of a PostgreSQL database."""
    conn = await asyncpg.connect(url)
    try:
        found = [await conn.fetchval("SELECT value FROM meta WHERE key = 'data_token'")]
        for table in TABLES:
            found.append(sorted(map(tuple, await conn.fetch(f"SELECT * FROM {table}"))))
        return found
    finally:
        await conn.close()


@pytest.mark.system
async def test_the_command_imports_into_postgresql_as_into_sqlite(
    sample_db: Path, pg_database: str, tmp_path: Path, aiohttp_client: Any
) -> None:
    """contract.md 15, 16: ``--database-url``; a refusal there changes nothing either."""
    path = write(tmp_path / "export.json", export())
    store = ["--db", str(sample_db)], ["--database-url", pg_database]
    for flags in store:
        done = run_python("scripts/import_gophish.py", str(path), "--company", "1", *flags)
        assert done.returncode == 0, done.stderr
    before = run_apart(pg_state(pg_database))
    bad = copy.deepcopy(export())
    bad[0]["timeline"][0]["time"] = "yesterday"
    refused = run_python(
        "scripts/import_gophish.py", str(write(tmp_path / "bad.json", bad)), "--company", "1",
        "--database-url", pg_database,
    )  # fmt: skip
    assert refused.returncode == 1 and "[0].timeline[0].time" in refused.stderr
    assert run_apart(pg_state(pg_database)) == before
    bodies = []
    for settings in ({"db": str(sample_db)}, {"db": str(sample_db), "database_url": pg_database}):
        app = create_app(Config(**settings, rate_burst=10**6, rate_per_second=1e6))
        client = await aiohttp_client(ProblemTestServer(app))
        bodies.append([await (await get(client, url)).read() for url in SERVED])
    assert bodies[0] == bodies[1]
    assert f'"id":{campaign_id(3)},'.encode() in bodies[1][0]  # the import is there
    assert bodies[1][1].startswith(b'[{"id":')


def data_token(db: Path) -> Any:
    return query(db, "SELECT value FROM meta WHERE key = 'data_token'")


def test_an_import_that_changes_nothing_keeps_the_data_version(
    sample_db: Path, tmp_path: Path
) -> None:
    """Every tenant's cached answers stay valid when an import has nothing to write."""
    before, token = fingerprint(sample_db), data_token(sample_db)
    summary = import_export(sample_db, write(tmp_path / "empty.json", []), 1)
    assert summary.campaigns == 0
    assert data_token(sample_db) == token and fingerprint(sample_db) == before


def test_the_same_export_imported_again_keeps_the_data_version(
    sample_db: Path, tmp_path: Path
) -> None:
    """contract.md 16: importing the same export twice changes nothing, ETags included."""
    path = write(tmp_path / "export.json", export())
    assert import_export(sample_db, path, 1).changed
    before, token = fingerprint(sample_db), data_token(sample_db)
    summary = import_export(sample_db, path, 1)
    assert summary.line().endswith(" Proxied request; nothing changed, data version kept")
    assert data_token(sample_db) == token and fingerprint(sample_db) == before


def integers(value: Any) -> list[int]:
    """Every integer anywhere in a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        return [n for v in value.values() for n in integers(v)]
    if isinstance(value, list):
        return [n for v in value for n in integers(v)]
    return []


async def test_every_id_the_api_serves_fits_in_53_bits(
    sample_db: Path, tmp_path: Path, make_client: MakeClient
) -> None:
    """JavaScript, jq and spreadsheets count exactly up to 2^53-1; imported ids stay there,
    and the same export gives the same ids however often it is imported."""
    path = write(tmp_path / "export.json", export())
    import_export(sample_db, path, 1)
    first = state(sample_db)
    client = await make_client()
    answers: list[Any] = []

    async def fetch(url: str) -> Any:
        response = await get(client, url)
        assert response.status == 200, url
        answers.append(await response.json())
        return answers[-1]

    for campaign in await fetch(f"{API}/campaigns?per_page=500"):
        await fetch(f"{API}/campaigns/{campaign['id']}")
        await fetch(f"{API}/campaigns/{campaign['id']}/events?per_page=500")
    for person in await fetch(f"{API}/victimsapi?per_page=500"):
        await fetch(f"{API}/victimsapi/{person['id']}")
        await fetch(f"{API}/victimsapi/{person['id']}/events?per_page=500")
    await fetch(f"{API}/course-inscriptions?per_page=500")
    await fetch(f"{API}/events?limit=1000")
    served = [n for answer in answers for n in integers(answer)]
    assert campaign_id(3) in served and max(served) <= MAX_SAFE_ID
    import_export(sample_db, path, 1)
    assert state(sample_db) == first


WIDEN = 1000 * MAX_SAFE_ID  # added to an id, it gives an id an earlier import could have made


def widen_statements() -> list[str]:
    """SQL that gives every imported employee, campaign and event the wide id an earlier
    import (ids up to 2^63-1) would have given it; the same on both stores."""
    imported = f"BETWEEN 1000000 AND {MAX_SAFE_ID}"  # the sample's own ids are small
    person = (
        "company_id, first_name, last_name, email, department, country,"
        " first_name_key, last_name_key, email_key, department_key, country_key"
    )
    statements = []
    for table, columns, children in (
        ("employees", person, ("campaign_targets", "campaign_events")),
        (
            "campaigns",
            "company_id, title, launch_date, title_key",
            ("campaign_targets", "campaign_events"),
        ),
    ):
        column = f"{table[:-1]}_id"
        statements += [
            f"INSERT INTO {table} (id, {columns}) SELECT id + {WIDEN}, {columns} FROM {table}"
            f" WHERE id {imported}",
            *(
                f"UPDATE {c} SET {column} = {column} + {WIDEN} WHERE {column} {imported}"
                for c in children
            ),
            f"DELETE FROM {table} WHERE id {imported}",
        ]
    return [*statements, f"UPDATE campaign_events SET id = id + {WIDEN} WHERE id {imported}"]


# Every summary the writers keep, rounded where a sum of results may differ in its last bits.
SUMMARIES = (*stats_summary.SUMMARIES, *summaries.SUMMARY_TABLES)


def summary_rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: sorted(
            tuple(round(v, 6) if isinstance(v, float) else v for v in row)
            for row in query(db, f"SELECT * FROM {table}")
        )
        for table in SUMMARIES
    }


@pytest.mark.system
def test_a_database_with_wide_ids_is_upgraded_in_place_by_the_next_import(
    sample_db: Path, tmp_path: Path
) -> None:
    path = write(tmp_path / "export.json", export())
    import_export(sample_db, path, 1)
    expected, expected_summaries = state(sample_db), summary_rows(sample_db)
    conn = sqlite3.connect(sample_db, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for statement in widen_statements():
            conn.execute(statement)
        # The summaries as the earlier version kept them: under the wide ids.
        summaries.rebuild(conn)
        fill_summaries(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()
    assert summary_rows(sample_db) != expected_summaries
    assert max(r[0] for r in query(sample_db, "SELECT id FROM campaign_events")) > MAX_SAFE_ID
    seq = query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0]
    # An import with nothing new brings every id under 2^53, each to what a fresh import gives.
    empty = write(tmp_path / "empty.json", [])
    done = run_python(
        "scripts/import_gophish.py", str(empty), "--company", "1", "--db", str(sample_db)
    )
    assert done.returncode == 0, done.stderr
    assert state(sample_db) == expected
    assert summary_rows(sample_db) == expected_summaries  # made again under the new ids
    # The renumbered events are changed ones: the feed sends them again, under their new ids.
    change_seq = query(sample_db, "SELECT value FROM meta WHERE key = 'change_seq'")[0][0]
    # (The change sequence counts the employees' feed too: renumbered people move there.)
    assert int(seq) < max(feed_places(sample_db).values()) <= int(change_seq)
    # Importing the export again changes nothing: the ids are those it derives.
    import_export(sample_db, path, 1)
    assert state(sample_db) == expected


async def pg_widen(url: str) -> None:
    """widen_statements(), the summaries kept under the wide ids as an earlier version did."""
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            for statement in widen_statements():
                await conn.execute(statement)
            await pg_summaries.rebuild(conn)
            await pg_refresh_stats(conn, 0, stats_summary.EVERYTHING)
    finally:
        await conn.close()


async def pg_summary_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    conn = await asyncpg.connect(url)
    try:
        return {
            table: sorted(
                tuple(round(float(v), 6) if is_sum_of_results(v) else v for v in row.values())
                for row in await conn.fetch(f"SELECT * FROM {table}")
            )
            for table in SUMMARIES
        }
    finally:
        await conn.close()


def is_sum_of_results(value: object) -> bool:
    """A sum of results, which PostgreSQL gives as a Decimal or a float."""
    return isinstance(value, (float, Decimal))


async def pg_rows(url: str) -> list[Any]:
    """The data token, then the rows an import writes (without their feed places, ``seq``)."""
    conn = await asyncpg.connect(url)
    try:
        found = [await conn.fetchval("SELECT value FROM meta WHERE key = 'data_token'")]
        for table in TABLES:
            columns = EVENT_COLUMNS if table == "campaign_events" else "*"
            rows = await conn.fetch(f"SELECT {columns} FROM {table}")
            found.append(sorted(tuple(v for k, v in r.items() if k != "seq") for r in rows))
        return found
    finally:
        await conn.close()


@pytest.mark.system
def test_postgresql_keeps_ids_in_53_bits_and_its_data_version_for_nothing_new(
    pg_database: str, tmp_path: Path
) -> None:
    """PostgreSQL as SQLite: an import with nothing to write keeps the data version, and
    the next import brings an earlier import's wide ids under 2^53 in place."""
    flags = ["--company", "1", "--database-url", pg_database]
    path, empty = write(tmp_path / "e.json", export()), write(tmp_path / "empty.json", [])
    assert run_python("scripts/import_gophish.py", str(path), *flags).returncode == 0
    imported = run_apart(pg_rows(pg_database))
    assert max(row[0] for rows in imported[2:4] + imported[5:] for row in rows) <= MAX_SAFE_ID
    done = run_python("scripts/import_gophish.py", str(empty), *flags)
    assert done.returncode == 0, done.stderr
    assert run_apart(pg_rows(pg_database)) == imported  # the data token too
    expected_summaries = run_apart(pg_summary_rows(pg_database))
    run_apart(pg_widen(pg_database))
    assert run_apart(pg_rows(pg_database))[5][-1][0] > MAX_SAFE_ID
    assert run_apart(pg_summary_rows(pg_database)) != expected_summaries
    done = run_python("scripts/import_gophish.py", str(empty), *flags)
    assert done.returncode == 0, done.stderr
    assert run_apart(pg_rows(pg_database))[1:] == imported[1:]
    assert run_apart(pg_summary_rows(pg_database)) == expected_summaries


def test_a_company_id_above_2_to_the_53_is_refused_in_one_line(
    sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No store holds such a company: one line says so, not one per mapped row."""
    path = write(tmp_path / "export.json", export())
    before = fingerprint(sample_db)
    argv = [str(path), "--company", str(MAX_SAFE_ID + 1), "--db", str(sample_db)]
    assert import_main([*argv, "--company-name", "Big"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--company" in err, err
    assert str(MAX_SAFE_ID) in err and fingerprint(sample_db) == before


@pytest.mark.parametrize("name", ["", "   ", "Acme\tFreight", "Acme\nFreight", "\x1b[31mAcme"])
def test_a_blank_company_name_or_one_with_a_control_character_is_refused(
    sample_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A company is shown by its name on one line: one that shows nothing, or breaks the
    line, is refused before anything is written."""
    path = write(tmp_path / "export.json", export()[:1])
    before = fingerprint(sample_db)
    argv = [str(path), "--company", "77", "--db", str(sample_db), "--company-name", name]
    assert import_main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "--company-name" in err, err
    assert fingerprint(sample_db) == before
