"""PostgreSQL's JSON for each record, keyed by the SQLite expression it stands in for.

Everything else of a listing (FROM, WHERE, ORDER BY, parameters) is shared SQL; only
the JSON differs. ``row_to_json`` writes keys in column order with no spaces (unlike
``json_build_object``), ``array_to_json(array_agg(... ORDER BY ...))`` writes arrays
without spaces, and text, integers and ``numeric`` print as SQLite prints them: the
bytes are the same (tests/test_pg_identity.py compares every listing).
"""

from __future__ import annotations

from .. import events, feed, inscriptions


def _array(row: str, source: str, order: str) -> str:
    """A compact JSON array of ``row`` values (``[]`` when there are none)."""
    return (
        f"(SELECT coalesce(array_to_json(array_agg((SELECT x FROM (SELECT {row}) x)"
        f" ORDER BY {order})), '[]') {source})"
    )


CAMPAIGN_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    (SELECT row_to_json(v) FROM (SELECT e.id, e.first_name, e.last_name, e.email,
        e.department) v) AS victim) r)"""

EMPLOYEE_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    (SELECT row_to_json(v) FROM (SELECT c.id, c.title, c.launch_date) v) AS campaign) r)"""

FEED_EVENT = """(SELECT row_to_json(r) FROM (SELECT ev.id, ev.type, ev.timestamp,
    ev.with_captcha = 1 AS with_captcha, ev.ip, ev.user_agent,
    (SELECT row_to_json(x) FROM (SELECT c.id, c.title, c.launch_date) x) AS campaign,
    (SELECT row_to_json(v) FROM (SELECT e.id, e.first_name, e.last_name, e.email,
        e.department) v) AS victim) r)"""

GROUPS = _array(
    "t.name",
    "FROM team_members tm JOIN teams t ON t.id = tm.team_id WHERE tm.employee_id = e.id",
    "t.name, t.id",
)
SECTIONS = _array(
    "s.title, s.section_type, r.completed_at, r.result, r.status",
    "FROM course_sections s LEFT JOIN section_results r"
    " ON r.section_id = s.id AND r.inscription_id = i.id WHERE s.course_id = i.course_id",
    "s.position, s.id",
)
INSCRIPTION = f"""(SELECT row_to_json(r) FROM (SELECT
    e.first_name || ' ' || e.last_name AS victim_name, e.department AS victim_department,
    c.title AS course_title, i.start_date, i.due_date, i.status, e.email AS victim_email,
    {GROUPS} AS groups, e.country AS victim_country, {SECTIONS} AS events) r)"""

RECORDS: dict[str, str] = {
    events.CAMPAIGN_EVENT_JSON: CAMPAIGN_EVENT,
    events.EMPLOYEE_EVENT_JSON: EMPLOYEE_EVENT,
    inscriptions.INSCRIPTION_JSON: INSCRIPTION,
    feed.FEED_EVENT_JSON: FEED_EVENT,
}
