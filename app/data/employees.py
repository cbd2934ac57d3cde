"""The employee directory with people risk: the list and one employee (contract.md 12).

Each employee's ``phishing`` block is read from the summary the writers keep
(``employee_phishing``, :mod:`app.data.summaries`), the ``training`` block from the
training summary of their inscriptions (:mod:`app.data.training`). ``overdue`` compares
due dates with today's UTC date, which the caller passes (a bound parameter of the
record, so the answer and its ETag agree). The blocks' keys and SQL are shared with
PostgreSQL's JSON (:mod:`app.data.pg.reports`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .aggregates import COUNT_NAMES, Fields, json_pairs
from .inscriptions import GROUPS_JSON, person_conditions
from .listings import Listing, Record, owned
from .vocabulary import AUTOMATION_FILTERS, INSCRIPTION_STATUSES


@dataclass(frozen=True)
class EmployeeFilters:
    """The directory's filters: the person filters (case-folded values) and the minimums."""

    lists: Mapping[str, Sequence[str]] = field(default_factory=dict)
    min_clicked: int = 0
    min_failed: int = 0
    automation: str = "include"  # filter[automation]


# Employee ``e``'s campaigns, distinct campaigns with each event type, latest event: one
# row of ``phishing_from`` (none for a person never targeted: zeros and null).
PHISHING: Fields = [
    *(
        (name, f"CAST(coalesce(max(p.{name}), 0) AS BIGINT)")
        for name in ("campaigns", *COUNT_NAMES.values())
    ),
    ("last_event_at", "max(p.last_event_at)"),
]


def phishing_from(automation: str) -> str:
    """Employee ``e``'s row of the summary ``employee_phishing`` under ``filter[automation]``."""
    return f"FROM employee_phishing p WHERE p.employee_id = e.id AND p.automation = '{automation}'"


# Employee ``e``'s inscriptions by status (their summary row, :mod:`app.data.training`),
# and those overdue on the date ``?`` (a short range of the person's own inscriptions):
# one row of ``TRAINING_FROM``.
TRAINING: Fields = [
    ("inscriptions", "coalesce(sum(t.inscriptions), 0)"),
    *((status, f"coalesce(sum(t.{status}), 0)") for status in INSCRIPTION_STATUSES),
    (
        "overdue",
        "(SELECT count(*) FROM inscriptions i WHERE i.employee_id = e.id"
        " AND i.status <> 'completed' AND i.due_date < ?)",
    ),
]
TRAINING_FROM = "FROM training_employees t WHERE t.employee_id = e.id"
PERSON_COLUMNS = ("id", "first_name", "last_name", "email", "department", "country")


def record_name(automation: str) -> str:
    """The name of an employee's record, without the events ``filter[automation]`` leaves out."""
    return "employee" if automation == "include" else f"employee_{automation}"


# JSON of one employee, keys in the order of contract.md 12; one ``?``: today's date.
# One variant a value of filter[automation].
EMPLOYEES = {
    automation: Record(
        record_name(automation),
        f"""json_object({json_pairs([(c, f"e.{c}") for c in PERSON_COLUMNS])},
    'groups', {GROUPS_JSON},
    'phishing', (SELECT json_object({json_pairs(PHISHING)}) {phishing_from(automation)}),
    'training', (SELECT json_object({json_pairs(TRAINING)}) {TRAINING_FROM}))""",
    )
    for automation in AUTOMATION_FILTERS
}


def _campaigns_with(kind: str, automation: str) -> str:
    """How many distinct campaigns employee ``e`` had an event of ``kind`` in."""
    return f"(SELECT coalesce(max(p.{COUNT_NAMES[kind]}), 0) {phishing_from(automation)})"


def employees_listing(company_id: int, filters: EmployeeFilters, today: dt.date) -> Listing:
    """The company's employees matching the filters, by id."""
    person, person_params = person_conditions(filters.lists, "e.id", company_id)
    where = ["e.company_id = ?", *person]
    params: list[object] = [company_id, *person_params]
    # A minimum of 0 holds for everybody: no condition to evaluate.
    for kind, minimum in (("click", filters.min_clicked), ("fail", filters.min_failed)):
        if minimum > 0:
            where.append(f"{_campaigns_with(kind, filters.automation)} >= ?")
            params.append(minimum)
    rows_from = f"FROM employees e WHERE {' AND '.join(where)}"
    # Not heavy: an employee's figures are a few short index ranges, so a page of them
    # is a short read, like a filtered page of inscriptions.
    today_param = (today.isoformat(),)
    record = EMPLOYEES[filters.automation]
    summed = ""  # the total is counted
    summed_params: tuple[object, ...] = ()
    if not person and (filters.min_clicked or filters.min_failed):  # a summary holds it
        summed = SUMMED_TOTAL
        summed_params = (company_id, filters.automation, filters.min_clicked, filters.min_failed)
    return Listing(
        record, rows_from, rows_from, "e.id", tuple(params), None, today_param,
        summed=summed, summed_params=summed_params,
    )  # fmt: skip


# The directory's total under filter[min_clicked] and filter[min_failed] alone (a minimum
# above 0 leaves out the people without a block): the summaries' people at those counts.
SUMMED_TOTAL = (
    "SELECT CAST(coalesce(sum(t.people), 0) AS BIGINT) FROM directory_totals t"
    " WHERE t.company_id = ? AND t.automation = ? AND t.clicked >= ? AND t.failed >= ?"
)


def employee_report(
    company_id: int, employee_id: int, today: dt.date, automation: str = "include"
) -> Listing:
    """One employee of the company; RecordNotFound unless theirs."""
    rows_from = "FROM employees e WHERE e.id = ? AND e.company_id = ?"
    params = (employee_id, company_id)
    guard = owned("employees", employee_id, company_id)
    today_param = (today.isoformat(),)
    return Listing(EMPLOYEES[automation], rows_from, rows_from, "e.id", params, guard, today_param)
