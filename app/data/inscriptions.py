"""Course inscriptions with their sections (reporting-api.md 2.3, 2.4, 4.3)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .listings import Listing, Record, placeholders

# The teams of employee ``e``, by name: the ``groups`` of an inscription or an employee.
GROUPS_JSON = """(SELECT json_group_array(json_object('name', name)) FROM (
        SELECT t.name AS name FROM team_members tm JOIN teams t ON t.id = tm.team_id
        WHERE tm.employee_id = e.id ORDER BY t.name, t.id))"""

# JSON of one inscription, keys in the order of reporting-api.md 2.3; teams by name,
# sections in course order (2.4).
INSCRIPTION = Record(
    "inscription",
    f"""json_object(
    'victim_name', e.first_name || ' ' || e.last_name,
    'victim_department', e.department,
    'course_title', c.title,
    'start_date', i.start_date,
    'due_date', i.due_date,
    'status', i.status,
    'victim_email', e.email,
    'groups', {GROUPS_JSON},
    'victim_country', e.country,
    'events', (SELECT json_group_array(json_object('title', title,
            'section_type', section_type, 'completed_at', completed_at,
            'result', result, 'status', status)) FROM (
        SELECT s.title, s.section_type, r.completed_at, r.result, r.status
        FROM course_sections s
        LEFT JOIN section_results r ON r.section_id = s.id AND r.inscription_id = i.id
        WHERE s.course_id = i.course_id ORDER BY s.position, s.id)))""",
)

# An inscription as exported rows: the record and the ids of the inscription, its employee
# and its course, so that exports can be merged and deduplicated.
INSCRIPTION_ROW = Record(
    "inscription_row",
    f"json_set({INSCRIPTION.json}, '$.id', i.id, '$.victim_id', e.id, '$.course_id', c.id)",
)

# Employee columns matched by the person filters, in their case-folded form (the sixth
# person filter, ``teams``, looks at the employee's teams).
EMPLOYEE_FILTERS = {
    "name": "first_name_key",
    "last_name": "last_name_key",
    "email": "email_key",
    "department": "department_key",
    "country": "country_key",
}


@dataclass(frozen=True)
class InscriptionFilters:
    """The endpoint's filters; list values are already case-folded."""

    lists: Mapping[str, Sequence[str]] = field(default_factory=dict)
    from_inscription_date: dt.date | None = None
    to_inscription_date: dt.date | None = None
    from_due_date: dt.date | None = None
    to_due_date: dt.date | None = None


def person_conditions(
    lists: Mapping[str, Sequence[str]], employee_id: str, company_id: int, alias: str = "e"
) -> tuple[list[str], list[object]]:
    """The six person filters on employee ``alias`` (whose id is ``employee_id``), with
    params.

    Whole case-folded values; values of one filter OR-ed, filters AND-ed (contract.md 3).
    Shared by the inscriptions endpoint and the employee directory. The members of the
    named teams are listed once (not looked up for each row), so a count may start from
    them: a team is a few people, a company's inscriptions many.
    """
    where: list[str] = []
    params: list[object] = []
    for name, column in EMPLOYEE_FILTERS.items():
        values = list(lists.get(name, ()))
        if values:
            where.append(f"{alias}.{column} IN ({placeholders(values)})")
            params.extend(values)
    teams = list(lists.get("teams", ()))
    if teams:
        where.append(
            f"{employee_id} IN (SELECT tm.employee_id FROM teams t"
            " JOIN team_members tm ON tm.team_id = t.id"
            f" WHERE t.company_id = ? AND t.name_key IN ({placeholders(teams)}))"
        )
        params.extend([company_id, *teams])
    return where, params


# Filters that pick a few people of a company: their set is read once (chosen_people), and
# a count seeks their inscriptions by employee. An e-mail picks one person and a team a
# few of the company's: a page of theirs is sought so too, and sorted, at the cost of
# what they hold (walking a large company's inscriptions by date for a team of 55 took
# 18 ms). A page by name walks the company's inscriptions by date, each checked against
# the set from its own index entry: a first name may pick hundreds of people, whose
# inscriptions would all be built as records before a sort. (SQLite alone would walk
# by date; PostgreSQL, which drops the index hint, plans its own.)
FEW_PEOPLE = ("name", "last_name", "email", "teams")
SOUGHT_PAGES = ("email", "teams")
BY_EMPLOYEE = " INDEXED BY inscriptions_by_employee"


def sought_by_employee(filters: InscriptionFilters, kinds: Sequence[str]) -> str:
    """The index hint when a filter of ``kinds`` is given, else ''."""
    return BY_EMPLOYEE if any(filters.lists.get(name) for name in kinds) else ""


def chosen_people(
    lists: Mapping[str, Sequence[str]], company_id: int
) -> tuple[list[str], list[object]]:
    """The person filters' conditions on an inscription ``i`` of the company.

    A department or a country picks many people: their conditions look at the
    inscription's employee ``e``, so a page walking the inscriptions by date stops soon
    after its rows. A name, an e-mail or a team picks a few (:data:`FEW_PEOPLE`): then
    every person filter is one set of the company's employees, read once from the
    employees' indexes.
    """
    if not any(lists.get(name) for name in FEW_PEOPLE):
        return person_conditions(lists, "i.employee_id", company_id)
    where, params = person_conditions(lists, "picked.id", company_id, alias="picked")
    people = " AND ".join(["picked.company_id = ?", *where])
    return [f"i.employee_id IN (SELECT picked.id FROM employees picked WHERE {people})"], [
        company_id,
        *params,
    ]


def build_where(company_id: int, filters: InscriptionFilters) -> tuple[list[str], list[object]]:
    """The filters' conditions (the company's comes before them) and their bound
    parameters. Values are only ever bound parameters, never part of the SQL text."""
    where, params = chosen_people(filters.lists, company_id)
    courses = list(filters.lists.get("courses", ()))
    if courses:
        where.append(f"c.title_key IN ({placeholders(courses)})")
        params.extend(courses)
    for value, condition in (
        (filters.from_inscription_date, "i.start_date >= ?"),
        (filters.to_inscription_date, "i.start_date <= ?"),
        (filters.from_due_date, "i.due_date >= ?"),
        (filters.to_due_date, "i.due_date <= ?"),
    ):
        if value is not None:
            where.append(condition)
            params.append(value.isoformat())
    return where, params


JOIN_EMPLOYEES = "JOIN employees e ON e.id = i.employee_id"
JOIN_COURSES = "JOIN courses c ON c.id = i.course_id"
JOINS = f"{JOIN_EMPLOYEES} {JOIN_COURSES}"


def inscriptions_listing(company_id: int, filters: InscriptionFilters) -> Listing:
    """The company's inscriptions matching the filters, by start date then id."""
    conditions, params = build_where(company_id, filters)
    where = " AND ".join(["i.company_id = ?", *conditions])
    hint = sought_by_employee(filters, SOUGHT_PAGES)
    rows_from = f"FROM inscriptions i{hint} {JOINS} WHERE {where}"
    order = "i.start_date, i.id"
    summed, summed_params = summed_total(company_id, filters)
    return Listing(
        INSCRIPTION, rows_from, counted_from(filters, conditions), order,
        (company_id, *params), export=INSCRIPTION_ROW, summed=summed, summed_params=summed_params,
    )  # fmt: skip


def counted_from(filters: InscriptionFilters, conditions: list[str]) -> str:
    """The cheapest FROM/WHERE counting the listing's rows, its parameters the listing's
    in their order (the company's first).

    Every inscription has its employee and course (foreign keys), so a count joins only
    what a filter looks at: the courses, and the employees for a department or a
    country alone (other person filters are a set of employees: :func:`chosen_people`).
    """
    lists = filters.lists
    courses = JOIN_COURSES if lists.get("courses") else ""
    few = sought_by_employee(filters, FEW_PEOPLE)
    people = JOIN_EMPLOYEES if not few and any(lists.get(n) for n in EMPLOYEE_FILTERS) else ""
    where = " AND ".join(["i.company_id = ?", *conditions])
    return f"FROM inscriptions i{few} {people} {courses} WHERE {where}"


# The summaries that hold the totals of each kind of date filter: table, its count, the
# date column, and the filter's bounds.
_DATED = (
    ("training_starts", "n", "start_date", "from_inscription_date", "to_inscription_date"),
    ("training_due", "inscriptions", "due_date", "from_due_date", "to_due_date"),
)


# The person filters a summary holds (training_people): department and country.
SUMMED_PEOPLE = ("department", "country")


def summed_total(company_id: int, filters: InscriptionFilters) -> tuple[str, tuple[object, ...]]:
    """The total read from the training summaries (:mod:`app.data.training`) when the
    filters are the common ones: the courses, the people's departments and countries, and
    the start dates, or the due dates without a person filter; ``("", ())`` for any
    other filter (a person's name, e-mail or teams, both kinds of dates, a person filter
    with due dates), which are counted."""
    person = {name: list(filters.lists.get(name, ())) for name in (*EMPLOYEE_FILTERS, "teams")}
    if any(values for name, values in person.items() if name not in SUMMED_PEOPLE):
        return "", ()
    titles = list(filters.lists.get("courses", ()))
    only = f" AND c.title_key IN ({placeholders(titles)})" if titles else ""
    where = [f"s.course_id IN (SELECT c.id FROM courses c WHERE c.company_id = ?{only})"]
    params: list[object] = [company_id, *titles]
    table, count = "training_courses", "inscriptions"
    if any(person[name] for name in SUMMED_PEOPLE):
        by_start = filters.from_inscription_date or filters.to_inscription_date
        table, count = ("training_people" if by_start else "training_people_totals"), "n"
        for name in SUMMED_PEOPLE:
            if person[name]:
                where.append(f"s.{name}_key IN ({placeholders(person[name])})")
                params.extend(person[name])
    for summary, counted, column, low, high in _DATED:
        bounds = [(getattr(filters, low), ">="), (getattr(filters, high), "<=")]
        given = [(value, sign) for value, sign in bounds if value is not None]
        if not given:
            continue
        if table == "training_courses":
            table, count = summary, counted
        elif not (table == "training_people" and column == "start_date"):
            return "", ()  # both kinds of dates, or a person filter with due dates
        where.extend(f"s.{column} {sign} ?" for _, sign in given)
        params.extend(value.isoformat() for value, _ in given)
    total = f"SELECT coalesce(sum(s.{count}), 0) FROM {table} s WHERE {' AND '.join(where)}"
    return total, tuple(params)
