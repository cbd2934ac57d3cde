"""Courses with their training coverage (contract.md 12).

Each course's figures are read in the statement that reads the page, from the
training summaries the writers keep (:mod:`app.data.training`).
``overdue`` compares due dates with today's UTC date, which the caller passes. The
fragments and keys are shared with PostgreSQL's JSON (:mod:`app.data.pg.reports`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

from .aggregates import Fields, json_pairs, rate, rounded_mean
from .listings import SUMMARY_RECORDS_INLINE, Listing, Record, placeholders
from .vocabulary import INSCRIPTION_STATUSES

_STATUSES = ", ".join(
    f"coalesce(sum(t.{status}), 0) AS {status}" for status in INSCRIPTION_STATUSES
)
# Course ``c``'s inscriptions by status and those overdue on the date ``?`` (one row),
# from the training summaries (:mod:`app.data.training`): a row, and the course's due
# dates before today.
COVERAGE = f"""SELECT coalesce(sum(t.inscriptions), 0) AS inscriptions, {_STATUSES},
    (SELECT coalesce(sum(d.open), 0) FROM training_due d
        WHERE d.course_id = c.id AND d.due_date < ?) AS overdue
    FROM training_courses t WHERE t.course_id = c.id"""

# Course ``c``'s section results that are not null: their sum and number (one row).
# Every result's section belongs to its inscription's course (the loader checks it),
# so the results are read by section, from each section's results counted by value.
RESULTS = """SELECT sum(h.result * h.n) AS total, sum(h.n) AS n FROM course_sections s
    JOIN training_results h ON h.section_id = s.id WHERE s.course_id = c.id"""


def course_fields(rate: Callable[[str, str], str], mean: Callable[[str, str], str]) -> Fields:
    """Course ``c``'s keys in the order of contract.md 12, over ``k`` (COVERAGE) and
    ``res`` (RESULTS); ``rate`` and ``mean`` are the backend's rounding."""
    return [
        ("id", "c.id"),
        ("title", "c.title"),
        ("sections", "(SELECT count(*) FROM course_sections s WHERE s.course_id = c.id)"),
        ("inscriptions", "k.inscriptions"),
        *((status, f"k.{status}") for status in INSCRIPTION_STATUSES),
        ("overdue", "k.overdue"),
        ("completion_rate", rate("k.completed", "k.inscriptions")),
        ("average_result", mean("res.total", "res.n")),
    ]


# JSON of one course; one ``?``: today's date.
COURSE = Record(
    "course",
    f"""(SELECT json_object({json_pairs(course_fields(rate, rounded_mean))})
    FROM ({COVERAGE}) k, ({RESULTS}) res)""",
)


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
        COURSE, rows_from, rows_from, "c.id", tuple(params), None, today_param, True,
        inline_records=SUMMARY_RECORDS_INLINE,
    )  # fmt: skip
