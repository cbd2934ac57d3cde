"""Courses with their training coverage (contract.md 12).

Each course's figures are computed by SQLite in the statement that reads the page,
from covering indexes on the course's inscriptions and their section results.
``overdue`` compares due dates with today's UTC date, which the caller passes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from .aggregates import rate, rounded_mean
from .listings import Listing, placeholders
from .schema import INSCRIPTION_STATUSES


def _coverage() -> str:
    """Course ``c``'s inscriptions by status and those overdue on the date ``?`` (one row)."""
    statuses = ", ".join(
        f"count(CASE WHEN i.status = '{status}' THEN 1 END) AS {status}"
        for status in INSCRIPTION_STATUSES
    )
    overdue = "count(CASE WHEN i.status <> 'completed' AND i.due_date < ? THEN 1 END)"
    return f"""SELECT count(*) AS inscriptions, {statuses}, {overdue} AS overdue
        FROM inscriptions i WHERE i.course_id = c.id"""


# Course ``c``'s section results that are not null: their sum and number (one row).
# Every result's section belongs to its inscription's course (the loader checks it),
# so the results are read by section: a few index ranges, not a seek per inscription.
RESULTS = """SELECT sum(r.result) AS total, count(r.result) AS n FROM course_sections s
    JOIN section_results r ON r.section_id = s.id WHERE s.course_id = c.id"""

# JSON of one course, keys in the order of contract.md 12; one ``?``: today's date.
COURSE_JSON = f"""(SELECT json_object('id', c.id, 'title', c.title,
        'sections', (SELECT count(*) FROM course_sections s WHERE s.course_id = c.id),
        'inscriptions', k.inscriptions,
        {", ".join(f"'{status}', k.{status}" for status in INSCRIPTION_STATUSES)},
        'overdue', k.overdue,
        'completion_rate', {rate("k.completed", "k.inscriptions")},
        'average_result', {rounded_mean("res.total", "res.n")})
    FROM ({_coverage()}) k, ({RESULTS}) res)"""


def courses_listing(company_id: int, titles: Sequence[str], today: dt.date) -> Listing:
    """The company's courses, by id; ``titles`` (case-folded) keeps only those titles."""
    where = ["c.company_id = ?"]
    params: list[object] = [company_id]
    if titles:
        where.append(f"c.title_key IN ({placeholders(list(titles))})")
        params.extend(titles)
    rows_from = f"FROM courses c WHERE {' AND '.join(where)}"
    today_param = (today.isoformat(),)
    return Listing(
        COURSE_JSON, rows_from, rows_from, "c.id", tuple(params), None, today_param, True
    )
