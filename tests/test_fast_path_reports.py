"""The reports' SQL-built JSON is marshmallow's dump, byte for byte (contract.md 11, 12, 5).

Every campaign (as listed, and as one report with by_department), every employee and
every course of the sample: the text SQLite builds on the serving path equals the
response schema's dump of the oracle's record (reports_oracle.py), so the schemas that
generate the OpenAPI document are the contract of the bytes sent. Also: a page of
reports is one statement, whatever its size.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from typing import Any

import pytest
from bench_floors import whole_array

from app.data import campaigns, courses, employees
from app.data.listings import Paging, read_one, read_page
from app.web.schemas import (
    CampaignReportSchema,
    CampaignSummarySchema,
    CourseSchema,
    EmployeeSchema,
)

from .support import reports as oracle
from .support.factories import sample

TODAY = dt.date(2025, 9, 1)


def compact(data: Any) -> str:
    """The JSON text SQLite's json_object produces: no spaces, UTF-8 kept as is."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def with_instants(record: dict[str, Any], *names: str) -> dict[str, Any]:
    """The record with its instants as datetimes, as the schemas take them."""
    return record | {n: None if record[n] is None else oracle.instant(record[n]) for n in names}


def page_texts(conn: sqlite3.Connection, listing: Any) -> list[str]:
    return [text.decode() for text in read_page(conn, listing, Paging(1, 500), None).texts]


@pytest.mark.parametrize("without_captcha", [False, True])
def test_every_campaign_equals_the_schema_dump(
    conn: sqlite3.Connection, without_captcha: bool
) -> None:
    listed, single = CampaignSummarySchema(), CampaignReportSchema()
    for company in (1, 2):
        filters = campaigns.CampaignFilters(without_captcha=without_captcha)
        expected = [
            compact(listed.dump(with_instants(c, "launch_date")))
            for c in oracle.campaigns(sample(), company, without_captcha)
        ]
        assert page_texts(conn, campaigns.campaigns_listing(company, filters)) == expected
        for campaign in oracle.campaigns(sample(), company):
            report = oracle.campaign_report(sample(), campaign["id"], without_captcha)
            listing = campaigns.campaign_report(company, campaign["id"], without_captcha)
            text = read_one(conn, listing).texts[0].decode()
            assert text == compact(single.dump(with_instants(report, "launch_date")))


def test_every_employee_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    schema = EmployeeSchema()
    for company in (1, 2):
        expected = []
        for person in oracle.employees(sample(), company, TODAY):
            phishing = with_instants(person["phishing"], "last_event_at")
            dumped = compact(schema.dump(person | {"phishing": phishing}))
            expected.append(dumped)
            single = employees.employee_report(company, person["id"], TODAY)
            assert read_one(conn, single).texts[0].decode() == dumped
        listing = employees.employees_listing(company, employees.EmployeeFilters(), TODAY)
        assert page_texts(conn, listing) == expected


def test_every_course_equals_the_schema_dump(conn: sqlite3.Connection) -> None:
    schema = CourseSchema()
    for company in (1, 2):
        expected = [compact(schema.dump(c)) for c in oracle.courses(sample(), company, TODAY)]
        assert page_texts(conn, courses.courses_listing(company, (), TODAY)) == expected


def test_a_page_of_reports_is_one_statement(conn: sqlite3.Connection) -> None:
    """BEGIN, token, count, page, COMMIT: the figures come with the page, not per record."""
    listings = [
        campaigns.campaigns_listing(1, campaigns.CampaignFilters()),
        employees.employees_listing(1, employees.EmployeeFilters(min_failed=1), TODAY),
        courses.courses_listing(1, (), TODAY),
    ]
    for listing in listings:
        counts = []
        for per_page in (1, 50):
            statements: list[str] = []
            conn.set_trace_callback(statements.append)
            page = read_page(conn, listing, Paging(1, per_page), None)
            conn.set_trace_callback(None)
            counts.append(len(statements))
            assert len(page.texts) == min(per_page, page.total)
        assert counts[0] == counts[1] <= 5, listing.rows_from


def test_the_floor_is_the_page(conn: sqlite3.Connection) -> None:
    """The benchmark's floor (whole_array) builds the very records of the page."""
    listing = employees.employees_listing(1, employees.EmployeeFilters(min_failed=2), TODAY)
    floor = conn.execute(whole_array(listing, limit=True), [*listing.select_params, 25])
    page = page_texts(conn, listing)[:25]
    assert json.loads(floor.fetchone()[0]) == [json.loads(text) for text in page]
