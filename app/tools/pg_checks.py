"""The PostgreSQL loader's checks: staged records against what is stored, in SQL.

Each check selects the staged records (``pos``) it refuses, with the values its message
shows; the messages are the SQLite loader's, naming the file and the record's path.
Parents are merged before their children, so a reference is checked against the
stored rows and this load's rows at once; a parent the load refused (``stage_known``) is
known all the same, so that its one real problem is reported once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .load_checks import NOUNS

Message = Callable[[str, Any], str]
Check = tuple[str, Message]


def _unknown(table: str, column: str, parent: str) -> Check:
    sql = (
        f"SELECT s.pos, s.{column} AS value FROM stage_{table} s WHERE s.{column} IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM {parent} p WHERE p.id = s.{column})"
        f" AND NOT EXISTS (SELECT 1 FROM stage_known k WHERE k.tbl = '{parent}'"
        f" AND k.id = s.{column}) ORDER BY s.pos"
    )
    noun = NOUNS[parent]  # the SQLite loader's words: "companies" is not "companie"s
    return sql, lambda where, row: f"{where}.{column}: unknown {noun} {row['value']}"


def _company(parent: str, column: str) -> str:
    return f"(SELECT company_id FROM {parent} WHERE id = s.{column})"


def _moved(table: str, before: str, after: str) -> Check:
    """The SQLite loader's ``moved``: ``before`` the stored row's company, ``after`` the
    staged record's."""
    sql = (
        f"SELECT s.pos, s.id AS value FROM stage_{table} s WHERE {before} <> {after} ORDER BY s.pos"
    )
    return sql, lambda where, row: f"{where}.id: {row['value']} belongs to another company"


def _crossed(table: str, a: tuple[str, str], b: tuple[str, str]) -> Check:
    sql = (
        f"SELECT s.pos FROM stage_{table} s JOIN {a[1]} x ON x.id = s.{a[0]}"
        f" JOIN {b[1]} y ON y.id = s.{b[0]} WHERE x.company_id <> y.company_id ORDER BY s.pos"
    )
    return sql, lambda where, _: f"{where}: {a[0]} and {b[0]} belong to different companies"


def _keeps_its_course(table: str, results_column: str, noun: str) -> Check:
    """The SQLite loader's ``keeps_its_course``."""
    sql = (
        f"SELECT s.pos, s.id AS value FROM stage_{table} s JOIN {table} t ON t.id = s.id"
        f" WHERE t.course_id <> s.course_id AND EXISTS (SELECT 1 FROM section_results r"
        f" WHERE r.{results_column} = s.id) ORDER BY s.pos"
    )
    return (
        sql,
        lambda where, row: (
            f"{where}.course_id: {noun} {row['value']} has results:"
            " it cannot move to another course"
        ),
    )


def _owned(table: str) -> list[Check]:
    return [
        _unknown(table, "company_id", "companies"),
        _moved(table, _company(table, "id"), "s.company_id"),
    ]


def _pair(table: str, a: tuple[str, str], b: tuple[str, str]) -> list[Check]:
    return [_unknown(table, *a), _unknown(table, *b), _crossed(table, a, b)]


EVENT_REFS = (("campaign_id", "campaigns"), ("employee_id", "employees"))
WRONG_SECTION = (
    "SELECT s.pos, s.section_id AS value FROM stage_section_results s"
    " JOIN inscriptions i ON i.id = s.inscription_id"
    " JOIN course_sections c ON c.id = s.section_id WHERE c.course_id <> i.course_id"
    " ORDER BY s.pos"
)
# A key stored for another company or partner: an upsert would keep its owner silently.
KEY_TAKEN = (
    "SELECT s.pos FROM stage_api_keys s JOIN api_keys k ON k.key_hash = s.key_hash"
    " WHERE k.company_id IS DISTINCT FROM s.company_id"
    " OR k.partner_id IS DISTINCT FROM s.partner_id ORDER BY s.pos"
)
# A place of a course that a stored section holds: the UNIQUE constraint, told as SQLite's.
PLACE_TAKEN = (
    "SELECT s.pos, s.position, s.course_id, x.id AS value FROM stage_course_sections s"
    " JOIN course_sections x ON x.course_id = s.course_id AND x.position = s.position"
    " AND x.id <> s.id ORDER BY s.pos"
)

CHECKS: dict[str, list[Check]] = {
    "partner_companies": [
        _unknown("partner_companies", "partner_id", "partners"),
        _unknown("partner_companies", "company_id", "companies"),
    ],
    "api_keys": [
        _unknown("api_keys", "company_id", "companies"),
        _unknown("api_keys", "partner_id", "partners"),
        (
            KEY_TAKEN,
            lambda where, _: f"{where}.key: this key belongs to another company or partner",
        ),
    ],
    "employees": _owned("employees"),
    "teams": _owned("teams"),
    "campaigns": _owned("campaigns"),
    "courses": _owned("courses"),
    "team_members": _pair("team_members", ("employee_id", "employees"), ("team_id", "teams")),
    "campaign_targets": _pair("campaign_targets", *EVENT_REFS),
    "campaign_events": [
        *_pair("campaign_events", *EVENT_REFS),
        _moved(
            "campaign_events",
            "(SELECT c.company_id FROM campaign_events e JOIN campaigns c"
            " ON c.id = e.campaign_id WHERE e.id = s.id)",
            _company("campaigns", "campaign_id"),
        ),
    ],
    "course_sections": [
        _unknown("course_sections", "course_id", "courses"),
        _moved(
            "course_sections",
            "(SELECT c.company_id FROM course_sections x JOIN courses c"
            " ON c.id = x.course_id WHERE x.id = s.id)",
            _company("courses", "course_id"),
        ),
        (
            PLACE_TAKEN,
            lambda where, row: (
                f"{where}.position: position {row['position']} of course {row['course_id']}"
                f" is section {row['value']}'s"
            ),
        ),
        _keeps_its_course("course_sections", "section_id", "section"),
    ],
    "inscriptions": [
        *_pair("inscriptions", ("employee_id", "employees"), ("course_id", "courses")),
        _moved(
            "inscriptions", _company("inscriptions", "id"), _company("employees", "employee_id")
        ),
        _keeps_its_course("inscriptions", "inscription_id", "inscription"),
    ],
    "section_results": [
        _unknown("section_results", "inscription_id", "inscriptions"),
        _unknown("section_results", "section_id", "course_sections"),
        (
            WRONG_SECTION,
            lambda where, row: (
                f"{where}.section_id: {row['value']} is not in the inscription's course"
            ),
        ),
    ],
}


# What each parent table's rows point at. Once the load has a problem, a parent row whose
# own parent this load refused (known to the checks, never merged) is set aside too
# rather than merged: merging it would break a foreign key or a tenancy trigger, and the
# load would end on that database error instead of the refused record's own line (the
# SQLite loader reports only the latter).
PARENT_REFS: dict[str, tuple[tuple[str, str], ...]] = {
    "employees": (("company_id", "companies"),),
    "teams": (("company_id", "companies"),),
    "campaigns": (("company_id", "companies"),),
    "courses": (("company_id", "companies"),),
    "course_sections": (("course_id", "courses"),),
    "inscriptions": (("employee_id", "employees"), ("course_id", "courses")),
}


def orphans(table: str) -> str:
    """The staged rows of ``table`` (a parent) pointing at a row that is not stored."""
    missing = " OR ".join(
        f"NOT EXISTS (SELECT 1 FROM {parent} p WHERE p.id = s.{column})"
        for column, parent in PARENT_REFS.get(table, ())
    )
    return f"SELECT s.pos FROM stage_{table} s WHERE {missing or 'false'}"
