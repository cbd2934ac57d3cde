"""The reports' query plans (contract.md 11, 12; issue 13 item 6): indexes, no early sort.

A page of reports is fast when SQLite walks the list in its order (before a sort it
reads the company's whole list, and whether it builds every record first depends on
its version and plan) and reads each record's figures from covering indexes, never
scanning a table of events, inscriptions or results.
Checked with EXPLAIN QUERY PLAN on the schema's own indexes; speed itself is measured
by make bench, not here.
"""

from __future__ import annotations

import datetime as dt
import sqlite3

import pytest

from app.data import campaigns, courses, employees
from app.data.aggregates import COUNT_NAMES
from app.data.listings import Listing

TODAY = dt.date(2025, 9, 1)
BIG_TABLES = ("campaign_events", "inscriptions", "section_results", "campaign_targets")
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
    # filter[automation]: the verdict is in the campaigns' covering index; an employee's
    # few events are looked up (their index holds no verdict).
    "campaigns, human only": campaigns.campaigns_listing(
        1, campaigns.CampaignFilters(automation="exclude_suspected")
    ),
    "campaign report, no automated": campaigns.campaign_report(1, 1, False, "exclude_automated"),
    "repeat offenders, human only": employees.employees_listing(
        1, employees.EmployeeFilters(min_failed=2, automation="exclude_suspected"), TODAY
    ),
}
EXPECTED_INDEXES = {
    "campaigns": {"campaigns_by_company", "campaign_events_by_type"},
    "campaign report": {"campaign_events_by_type"},
    "employees": {"employees_by_company", "campaign_events_by_employee_type"},
    "repeat offenders": {"campaign_events_by_employee_type", "inscriptions_by_employee"},
    # A course's figures are its training summaries' rows (their primary keys).
    "courses": {"courses_by_company", "course_sections_by_course"},
    "campaigns, human only": {"campaigns_by_company", "campaign_events_by_type"},
    "campaign report, no automated": {"campaign_events_by_type"},
    "repeat offenders, human only": {"campaign_events_by_employee_type"},
}
ALIASES = {"ev": "campaign_events", "i": "inscriptions", "r": "section_results"}
ALIASES |= {"t": "campaign_targets"}


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


@pytest.mark.parametrize(
    "name", ["campaigns", "campaigns without captcha", "campaigns, human only"]
)
def test_campaign_events_are_walked_once_a_type_from_the_covering_index(
    conn: sqlite3.Connection, name: str
) -> None:
    """The people of each type and the events of each verdict (automated_events,
    suspected_events) come from one walk of the type's range, the medians from one
    more each: no lookup of an event's row, no walk for the verdicts alone."""
    details = [d for _, d in plan(conn, LISTINGS[name]) if d.startswith("SEARCH ev ")]
    assert len(details) == len(COUNT_NAMES) + 2, details
    assert all("USING COVERING INDEX campaign_events_by_type " in d for d in details), details
