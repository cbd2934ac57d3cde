"""Campaign events and employee events (reporting-api.md 2.1, 2.2, 4.1, 4.2)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .listings import (
    Listing,
    Paging,
    RecordNotFound,
    Rows,
    begin,
    finish,
    list_rows,
    placeholders,
)

# JSON of one record, keys in the order of reporting-api.md 2.1 and 2.2.
CAMPAIGN_EVENT_JSON = """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'victim', json_object('id', e.id, 'first_name', e.first_name,
        'last_name', e.last_name, 'email', e.email, 'department', e.department))"""

EMPLOYEE_EVENT_JSON = """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'campaign', json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date))"""


def campaign_listing(
    company_id: int, campaign_id: int, types: Sequence[str] = (), without_captcha: bool = False
) -> Listing:
    """A campaign's events, filtered, by timestamp then id."""
    # The company check on the employee is redundant with the loader's checks; it is
    # there so that no join can ever reach another tenant's row.
    where = ["ev.campaign_id = ?", "e.company_id = ?"]
    params: list[object] = [campaign_id, company_id]
    if types:
        where.append(f"ev.type IN ({placeholders(list(types))})")
        params.extend(types)
    if without_captcha:
        where.append("ev.with_captcha = 0")
    rows_from = (
        "FROM campaign_events ev JOIN employees e ON e.id = ev.employee_id"
        f" WHERE {' AND '.join(where)}"
    )
    return Listing(CAMPAIGN_EVENT_JSON, rows_from, rows_from, "ev.timestamp, ev.id", params)


def employee_listing(company_id: int, employee_id: int) -> Listing:
    """An employee's events with their campaigns, by timestamp then id."""
    rows_from = (
        "FROM campaign_events ev JOIN campaigns c ON c.id = ev.campaign_id"
        " WHERE ev.employee_id = ? AND c.company_id = ?"
    )
    params: list[object] = [employee_id, company_id]
    return Listing(EMPLOYEE_EVENT_JSON, rows_from, rows_from, "ev.timestamp, ev.id", params)


def require_owned(conn: sqlite3.Connection, sql: str, record_id: int, company_id: int) -> None:
    """Raise RecordNotFound, ending the read, unless the company owns the record.

    Another company's id and a free id take the same path: nobody can tell them apart.
    """
    if conn.execute(sql, (record_id, company_id)).fetchone() is None:
        finish(conn)
        raise RecordNotFound(str(record_id))


def campaign_events(
    conn: sqlite3.Connection,
    company_id: int,
    campaign_id: int,
    *,
    types: Sequence[str] = (),
    without_captcha: bool = False,
    paging: Paging | None = None,
    probe: int = 0,
) -> Rows:
    """Events of one of the company's campaigns (404 when it is not the company's)."""
    token = begin(conn)
    require_owned(
        conn, "SELECT 1 FROM campaigns WHERE id = ? AND company_id = ?", campaign_id, company_id
    )
    listing = campaign_listing(company_id, campaign_id, types, without_captcha)
    return list_rows(conn, token, listing, paging, probe)


def employee_events(
    conn: sqlite3.Connection,
    company_id: int,
    employee_id: int,
    *,
    paging: Paging | None = None,
    probe: int = 0,
) -> Rows:
    """Events of one of the company's employees (404 when not the company's)."""
    token = begin(conn)
    require_owned(
        conn, "SELECT 1 FROM employees WHERE id = ? AND company_id = ?", employee_id, company_id
    )
    return list_rows(conn, token, employee_listing(company_id, employee_id), paging, probe)
