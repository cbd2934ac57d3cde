"""The reports' query plans (contract.md 11, 12; issue 13 item 6): indexes, no early sort.

A page of reports is fast when SQLite walks the list in its order (before a sort it
reads the company's whole list, and whether it builds every record first depends on
its version and plan) and reads each record's figures from the writers' summaries or
covering indexes, never scanning a table of events, inscriptions, results or summaries.
Checked with EXPLAIN QUERY PLAN on the schema's own indexes; speed itself is measured
by make bench, not here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from app.data import campaigns, courses, employees, events, inscriptions
from app.data.listings import Listing
from app.data.schema import upgrade_if_older
from app.data.summaries import MEDIAN_KINDS

TODAY = dt.date(2025, 9, 1)
BIG_TABLES = ("campaign_events", "inscriptions", "section_results", "campaign_targets")
SUMMARIES = ("campaign_funnels", "campaign_first_instants", "campaign_first_hours")
SUMMARIES += ("campaign_medians", "employee_phishing", "send_firsts")
BIG_TABLES += SUMMARIES
LISTINGS = {
    "campaigns": campaigns.campaigns_listing(1, campaigns.CampaignFilters()),
    "campaigns without captcha": campaigns.campaigns_listing(
        1, campaigns.CampaignFilters(titles=["x"], without_captcha=True)
    ),
    "campaign report": campaigns.campaign_report(1, 1, without_captcha=False),
    "employees": employees.employees_listing(1, employees.EmployeeFilters(), TODAY),
    "repeat offenders": employees.employees_listing(
        1, employees.EmployeeFilters(lists={"teams": ["blue team"]}, min_failed=2), TODAY
    ),
    "employee report": employees.employee_report(1, 7, TODAY),
    "courses": courses.courses_listing(1, ["password hygiene"], TODAY),
    # filter[automation]: one more dimension of the summaries.
    "campaigns, human only": campaigns.campaigns_listing(
        1, campaigns.CampaignFilters(automation="exclude_suspected")
    ),
    "campaign report, no automated": campaigns.campaign_report(1, 1, False, "exclude_automated"),
    "repeat offenders, human only": employees.employees_listing(
        1, employees.EmployeeFilters(min_failed=2, automation="exclude_suspected"), TODAY
    ),
}
EXPECTED_INDEXES = {
    "campaigns": {"campaigns_by_company"},
    "employees": {"employees_by_company"},
    "repeat offenders": {"inscriptions_by_employee"},
    # A course's figures are its training summaries' rows (their primary keys).
    "courses": {"courses_by_company", "course_sections_by_course"},
    "campaigns, human only": {"campaigns_by_company"},
}
ALIASES = {"ev": "campaign_events", "i": "inscriptions", "r": "section_results"}
ALIASES |= {"t": "campaign_targets", "f": "campaign_funnels", "h": "campaign_first_instants"}
ALIASES |= {"p": "employee_phishing", "b": "campaign_first_hours", "md": "campaign_medians"}


def plan(conn: sqlite3.Connection, listing: Listing) -> list[tuple[int, str]]:
    """(parent, detail) of each step of the page statement's plan."""
    sql = f"EXPLAIN QUERY PLAN {listing.select()} LIMIT ? OFFSET ?"
    return [(row[1], row[3]) for row in conn.execute(sql, (*listing.select_params, 25, 0))]


@pytest.mark.parametrize("name", list(LISTINGS))
def test_pages_are_cut_before_records_are_built(conn: sqlite3.Connection, name: str) -> None:
    """The outer query walks an index in the list's order: no sort of its own."""
    steps = plan(conn, LISTINGS[name])
    assert not [d for parent, d in steps if parent == 0 and "TEMP B-TREE" in d], steps


@pytest.mark.parametrize("name", list(LISTINGS))
def test_figures_come_from_indexes(conn: sqlite3.Connection, name: str) -> None:
    """No full scan of a big table; the indexes made for the reports are used."""
    details = [d for _, d in plan(conn, LISTINGS[name])]
    scans = [d for d in details if d.startswith("SCAN ")]
    for detail in scans:
        table = detail.split()[1]
        assert ALIASES.get(table, table) not in BIG_TABLES, details
    used = {d.split(" INDEX ")[1].split()[0] for d in details if " INDEX " in d}
    assert EXPECTED_INDEXES.get(name, set()) <= used, details


def test_the_schema_has_the_report_indexes(conn: sqlite3.Connection) -> None:
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert set().union(*EXPECTED_INDEXES.values()) <= names


@pytest.mark.parametrize("name", [n for n in LISTINGS if n.startswith(("campaign", "employee"))])
def test_phishing_figures_are_read_from_the_summaries(conn: sqlite3.Connection, name: str) -> None:
    """No event or target is read: each campaign's figures are one search of its funnel
    rows (and one more for by_department) and one of the kept medians per median (no
    histogram), each employee's block one search of their summary row."""
    aliases = [d.split()[1] for _, d in plan(conn, LISTINGS[name]) if d.startswith("SEARCH ")]
    searched = [ALIASES.get(alias, alias) for alias in aliases]
    assert "campaign_events" not in searched, searched
    if name.startswith("campaign"):
        assert "campaign_targets" not in searched, searched
        funnels = 2 if "report" in name else 1
        assert Counter(searched)["campaign_funnels"] == funnels, searched
        assert Counter(searched)["campaign_medians"] == len(MEDIAN_KINDS), searched
        assert not {"campaign_first_hours", "campaign_first_instants"} & set(searched)
    else:
        assert "employee_phishing" in searched, searched


EVENT_LISTINGS = {
    "events": events.campaign_listing(1, 1),
    "events, filtered": events.campaign_listing(1, 1, ["click"], True, "exclude_suspected"),
}


@pytest.mark.parametrize("name", list(EVENT_LISTINGS))
@pytest.mark.parametrize("shape", ["json", "csv lines"])
def test_a_campaigns_events_are_read_from_their_index_alone(
    conn: sqlite3.Connection, name: str, shape: str
) -> None:
    """The events of a campaign, in every format and with every filter, come from the
    covering index of the campaign's events in its order: no lookup of each event's row,
    so a stream's cost per event does not grow with the table."""
    listing = EVENT_LISTINGS[name]
    if shape == "csv lines":
        listing = listing.csv_lines() or listing
    details = [d for _, d in plan(conn, listing)]
    assert any("COVERING INDEX campaign_events_by_campaign" in d for d in details), details
    assert not any("TEMP B-TREE" in d for d in details), details


@pytest.mark.parametrize(
    ("filters", "first"),
    [
        ({"teams": ["blue team"]}, "LIST SUBQUERY"),
        ({"email": ["someone@example.com"]}, "COVERING INDEX employees_by_email"),
        ({"last_name": ["silva"]}, "COVERING INDEX employees_by_last_name"),
        (
            {"name": ["ana"], "courses": ["password hygiene"]},
            "COVERING INDEX employees_by_first_name",
        ),
    ],
)
def test_a_count_by_person_starts_from_the_people(
    conn: sqlite3.Connection, filters: dict[str, list[str]], first: str
) -> None:
    """A counted total by team, name or e-mail starts from the few people picked (a
    team's members, the company's employees that match, from their own index) and seeks
    their inscriptions: walking the company's inscriptions by start date, SQLite's own
    choice, took 30 to 60 ms on the standard set against 1 to 8 ms."""
    listing = inscriptions.inscriptions_listing(
        1, inscriptions.InscriptionFilters(lists=filters, from_inscription_date=dt.date(2025, 1, 1))
    )
    steps = [
        row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {listing.count()}", listing.params)
    ]
    assert any(first in step for step in steps), steps
    assert any("inscriptions_by_employee (employee_id=?)" in step for step in steps), steps
    assert not any("inscriptions_by_company" in step for step in steps), steps


@pytest.mark.parametrize(
    ("filters", "people"),
    [
        ({"name": ["ana"]}, "COVERING INDEX employees_by_first_name"),
        ({"last_name": ["silva"], "department": ["sales"]}, "employees_by_last_name"),
    ],
)
def test_a_page_by_name_checks_each_inscription_against_the_people_read_once(
    conn: sqlite3.Connection, filters: dict[str, list[str]], people: str
) -> None:
    """A page by name walks the company's inscriptions by date, checking each
    one's employee (held by the index) against the set of people read once: no sort,
    and no employee row read for an inscription the page does not show."""
    listing = inscriptions.inscriptions_listing(1, inscriptions.InscriptionFilters(lists=filters))
    steps = plan(conn, listing)
    details = [d for _, d in steps]
    assert details[0].startswith("SEARCH i USING INDEX inscriptions_by_company"), details
    assert any(people in d for d in details), details
    assert not [d for parent, d in steps if parent == 0 and "TEMP B-TREE" in d], steps


@pytest.mark.parametrize(
    ("filters", "people"),
    [
        ({"email": ["someone@example.com"]}, "COVERING INDEX employees_by_email"),
        ({"teams": ["blue team"]}, "LIST SUBQUERY"),
    ],
)
def test_a_page_by_email_or_team_seeks_the_peoples_inscriptions(
    conn: sqlite3.Connection, filters: dict[str, list[str]], people: str
) -> None:
    """An e-mail picks one person, a team a few: their inscriptions are sought, not the
    company's walked."""
    listing = inscriptions.inscriptions_listing(1, inscriptions.InscriptionFilters(lists=filters))
    details = [d for _, d in plan(conn, listing)]
    assert any("inscriptions_by_employee (employee_id=?)" in d for d in details), details
    assert any(people in d for d in details), details
    assert not any("inscriptions_by_company" in d for d in details), details


INSCRIPTIONS_INDEX = "PRAGMA index_info(inscriptions_by_company)"
NEW_IN_13 = (
    "employees_by_first_name", "employees_by_last_name", "employees_by_email",
    "employees_victims",
)  # fmt: skip


def test_a_version_12_file_gets_the_people_indexes_on_upgrade(sample_db: Path) -> None:
    """The upgrade to version 13 makes the company's inscriptions index again with each
    one's employee, and adds the employees' indexes by name and e-mail and of the fields
    a campaign's events show."""
    old = sqlite3.connect(sample_db)
    for name in NEW_IN_13:
        old.execute(f"DROP INDEX {name}")
    old.execute("DROP INDEX inscriptions_by_company")
    old.execute("CREATE INDEX inscriptions_by_company ON inscriptions (company_id, start_date, id)")
    old.execute("PRAGMA user_version = 12")
    old.commit()
    assert [r[2] for r in old.execute(INSCRIPTIONS_INDEX)][-1] == "id"
    old.close()
    assert upgrade_if_older(sample_db)
    with contextlib.closing(sqlite3.connect(sample_db)) as new:
        columns = [r[2] for r in new.execute(INSCRIPTIONS_INDEX)]
        names = {r[0] for r in new.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert columns == ["company_id", "start_date", "id", "employee_id"]
    assert set(NEW_IN_13) <= names


def test_a_campaigns_events_show_their_employees_from_an_index_of_their_fields(
    conn: sqlite3.Connection,
) -> None:
    """The records read each event's employee from an index of the fields they show
    (a campaign's people's rows outgrow a page cache); the exports, which show the
    employee's CSV cells, read the row itself."""
    listing = events.campaign_listing(1, 1)
    shown = [d for _, d in plan(conn, listing)]
    assert any(d.startswith("SEARCH e USING COVERING INDEX employees_victims") for d in shown)
    for exported in (listing.exported(), listing.csv_lines()):
        assert exported is not None
        steps = [d for _, d in plan(conn, exported)]
        assert "SEARCH e USING INTEGER PRIMARY KEY (rowid=?)" in steps, steps


@pytest.mark.parametrize(
    "listing",
    [events.campaign_listing(1, 1), events.employee_listing(1, 7)],
    ids=["campaign", "employee"],
)
def test_an_export_joins_each_events_campaign_and_employee_once(
    conn: sqlite3.Connection, listing: Listing
) -> None:
    """An exported row and a CSV line read the event's campaign and employee from the
    statement's own joins, by primary key, never from a subquery run for every event."""
    for exported in (listing.exported(), listing.csv_lines()):
        assert exported is not None
        steps = [d for _, d in plan(conn, exported)]
        assert not any("SUBQUERY" in d for d in steps), steps
        for alias in ("c", "e"):
            assert f"SEARCH {alias} USING INTEGER PRIMARY KEY (rowid=?)" in steps, steps
