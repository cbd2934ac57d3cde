"""PostgreSQL's JSON for each record, by the record's name (``Listing.record.name``).

Everything else of a listing (FROM, WHERE, ORDER BY, parameters) is shared SQL; only
the JSON differs, and the bytes are the same (tests/test_pg_identity.py compares every
listing). The objects and arrays are written as :mod:`.objects` says; the reports'
records are in :mod:`.reports`.
"""

from __future__ import annotations

from ..csv_lines import POSTGRESQL
from ..employees import PERSON_COLUMNS
from ..events import event_line
from . import reports
from .objects import GROUPS, array

CAMPAIGN_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    (SELECT row_to_json(v) FROM (SELECT e.id, e.first_name, e.last_name, e.email,
        e.department) v) AS victim) r)"""

EMPLOYEE_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    (SELECT row_to_json(v) FROM (SELECT c.id, c.title, c.launch_date) v) AS campaign) r)"""

FEED_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    ev.with_captcha = 1 AS with_captcha, ev.ip, ev.user_agent,
    (SELECT row_to_json(x) FROM (SELECT c.id, c.title, c.launch_date) x) AS campaign,
    (SELECT row_to_json(v) FROM (SELECT e.id, e.first_name, e.last_name, e.email,
        e.department) v) AS victim,
    (SELECT row_to_json(a) FROM (SELECT ev.verdict, ev.reasons::json AS reasons) a)
        AS automation) r)"""

EVENT_ROW = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    (SELECT row_to_json(x) FROM (SELECT c.id, c.title, c.launch_date) x) AS campaign,
    (SELECT row_to_json(v) FROM (SELECT e.id, e.first_name, e.last_name, e.email,
        e.department) v) AS victim) r)"""

SECTIONS = array(
    [
        ("title", "s.title"),
        ("section_type", "s.section_type"),
        ("completed_at", "r.completed_at"),
        ("result", "r.result"),
        ("status", "r.status"),
    ],
    "FROM course_sections s LEFT JOIN section_results r"
    " ON r.section_id = s.id AND r.inscription_id = i.id WHERE s.course_id = i.course_id",
    "s.position, s.id",
)
INSCRIPTION_COLUMNS = f"""e.first_name || ' ' || e.last_name AS victim_name,
    e.department AS victim_department, c.title AS course_title, i.start_date, i.due_date,
    i.status, e.email AS victim_email, {GROUPS} AS groups, e.country AS victim_country,
    {SECTIONS} AS events"""
INSCRIPTION = f"(SELECT row_to_json(r) FROM (SELECT {INSCRIPTION_COLUMNS}) r)"
INSCRIPTION_ROW = f"""(SELECT row_to_json(r) FROM (SELECT {INSCRIPTION_COLUMNS},
    i.id, e.id AS victim_id, c.id AS course_id) r)"""

INSCRIPTION_CHANGE = f"""(SELECT row_to_json(r) FROM (SELECT {INSCRIPTION_COLUMNS},
    i.id, i.employee_id, i.course_id, i.completed_at) r)"""
EMPLOYEE_CHANGE = f"""(SELECT row_to_json(r) FROM (SELECT
    {", ".join(f"e.{c}" for c in PERSON_COLUMNS)}, {GROUPS} AS groups) r)"""

WEBHOOK = """(SELECT row_to_json(r) FROM (SELECT w.id, w.label, w.url_host,
    array_to_json(string_to_array(w.event_types, ',')) AS event_types, w.status,
    w.last_success_at, w.last_failure_at, w.consecutive_failures) r)"""
WEBHOOK_DELIVERY = """(SELECT row_to_json(r) FROM (SELECT d.id, d.message_id, d.event_id,
    d.attempt, d.attempted_at, d.status, d.response_status, d.error) r)"""

RECORDS: dict[str, str] = {
    "campaign_event": CAMPAIGN_EVENT,
    "employee_event": EMPLOYEE_EVENT,
    "inscription": INSCRIPTION,
    "event_row": EVENT_ROW,
    "event_line": event_line(POSTGRESQL),
    "inscription_row": INSCRIPTION_ROW,
    "feed_event": FEED_EVENT,
    "inscription_change": INSCRIPTION_CHANGE,
    "employee_change": EMPLOYEE_CHANGE,
    "webhook": WEBHOOK,
    "webhook_delivery": WEBHOOK_DELIVERY,
    **reports.CAMPAIGNS,
    **reports.EMPLOYEES,
    "course": reports.COURSE,
    "partner_company": reports.PARTNER_COMPANY,
    **reports.STATS,
}
