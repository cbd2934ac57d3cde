"""The reference and tenancy checks of a load, as SQL over the staged rows.

They run inside the write transaction, table by table in dependency order, each table
checked just before it is written: parents written earlier in the same load are already
in the main tables, so every check reads one consistent state that no other load can
change underneath (the write lock is held). A problem row names the file, the record's
path and the cause; the load is refused if any exists, after every check has run.

An id is known if the database holds it or the load stages it (even a record refused for
its format, so that its children are not reported again); companies are compared only
between rows of the main tables.
"""

from __future__ import annotations

import sqlite3

NOUNS = {
    "companies": "company",
    "partners": "partner",
    "employees": "employee",
    "teams": "team",
    "campaigns": "campaign",
    "courses": "course",
    "course_sections": "section",
    "inscriptions": "inscription",
}
OWNED = ("employees", "teams", "campaigns", "courses")


def _report(table: str, detail: str, where: str, joins: str = "") -> str:
    """One check: a problem row for every staged row of ``table`` matching ``where``."""
    return (
        "INSERT INTO temp.load_problems (pos, line)"
        f" SELECT s.pos, src.name || ': ' || {detail} FROM temp.stage_{table} AS s {joins}"
        f" JOIN temp.load_sources AS src ON src.src = s.src WHERE {where}"
    )


def _at(table: str, field: str, message: str, *values: str) -> str:
    """``printf`` of ``table[idx].field: message`` (message may hold %d / %s)."""
    args = ", ".join(("s.idx", *values))
    text = f"{table}[%d]{field}: {message}".replace("'", "''")
    return f"printf('{text}', {args})"


def duplicate(table: str, key: tuple[str, ...], shown: str | None = None) -> str:
    """A record repeats the key of an earlier record of the same file."""
    cols = ", ".join(("src", *key))
    same = " AND ".join(f"s.{k} = d.{k}" for k in ("src", *key))
    text = shown or ", ".join(f"{k}=%s" for k in key)
    values = () if shown else tuple(f"s.{k}" for k in key)
    detail = (
        _at(table, f".{key[-1]}", f"duplicate {text} (first at ", *values)
        + f" || printf('{table}[%d])', f.idx)"
    )
    joins = (
        f"JOIN (SELECT {cols}, min(pos) AS pos FROM temp.stage_{table}"
        f" GROUP BY {cols} HAVING count(*) > 1) AS d ON {same} AND s.pos > d.pos"
        f" JOIN temp.stage_{table} AS f ON f.pos = d.pos"
    )
    return _report(table, detail, "true", joins)


def unknown(table: str, column: str, parent: str) -> str:
    """A reference to an id that neither the database nor the load has."""
    where = (
        f"s.valid AND s.{column} IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM main.{parent} WHERE id = s.{column})"
        f" AND NOT EXISTS (SELECT 1 FROM temp.stage_{parent} WHERE id = s.{column})"
    )
    return _report(
        table, _at(table, f".{column}", f"unknown {NOUNS[parent]} %d", f"s.{column}"), where
    )


def _company(parent: str, column: str) -> str:
    return f"(SELECT company_id FROM main.{parent} WHERE id = s.{column})"


def crossed(table: str, a: tuple[str, str], b: tuple[str, str]) -> str:
    """Two references of one record that belong to different companies."""
    where = f"s.valid AND {_company(a[1], a[0])} != {_company(b[1], b[0])}"
    message = f"{a[0]} and {b[0]} belong to different companies"
    return _report(table, _at(table, "", message), where)


def moved(table: str, before: str, after: str) -> str:
    """An upsert that would give an existing row to another company: never done by a load."""
    where = f"s.valid AND {before} != {after}"
    return _report(table, _at(table, ".id", "%d belongs to another company", "s.id"), where)


def keeps_its_course(table: str, results_column: str) -> str:
    """A section or inscription with stored results may not move to another course: its
    results would join one course's inscription to another course's section."""
    where = (
        f"s.valid AND s.course_id != (SELECT course_id FROM main.{table} WHERE id = s.id)"
        f" AND EXISTS (SELECT 1 FROM main.section_results r WHERE r.{results_column} = s.id)"
    )
    message = f"{NOUNS[table]} %d has results: it cannot move to another course"
    return _report(table, _at(table, ".course_id", message, "s.id"), where)


def _owned(table: str) -> list[str]:
    return [
        duplicate(table, ("id",)),
        unknown(table, "company_id", "companies"),
        moved(table, f"(SELECT company_id FROM main.{table} WHERE id = s.id)", "s.company_id"),
    ]


CHECKS: dict[str, list[str]] = {
    "companies": [duplicate("companies", ("id",))],
    "partners": [duplicate("partners", ("id",))],
    "partner_companies": [
        duplicate("partner_companies", ("partner_id", "company_id")),
        unknown("partner_companies", "partner_id", "partners"),
        unknown("partner_companies", "company_id", "companies"),
    ],
    "api_keys": [
        duplicate("api_keys", ("key_hash",), shown="key"),
        unknown("api_keys", "company_id", "companies"),
        unknown("api_keys", "partner_id", "partners"),
        _report(
            "api_keys",
            _at("api_keys", ".key", "this key belongs to another company or partner"),
            "s.valid AND EXISTS (SELECT 1 FROM main.api_keys k WHERE k.key_hash = s.key_hash"
            " AND (k.company_id IS NOT s.company_id OR k.partner_id IS NOT s.partner_id))",
        ),
    ],
    "employees": _owned("employees"),
    "teams": _owned("teams"),
    "team_members": [
        duplicate("team_members", ("employee_id", "team_id")),
        unknown("team_members", "employee_id", "employees"),
        unknown("team_members", "team_id", "teams"),
        crossed("team_members", ("employee_id", "employees"), ("team_id", "teams")),
    ],
    "campaigns": _owned("campaigns"),
    "campaign_targets": [
        duplicate("campaign_targets", ("campaign_id", "employee_id")),
        unknown("campaign_targets", "campaign_id", "campaigns"),
        unknown("campaign_targets", "employee_id", "employees"),
        crossed("campaign_targets", ("campaign_id", "campaigns"), ("employee_id", "employees")),
    ],
    "campaign_events": [
        duplicate("campaign_events", ("id",)),
        unknown("campaign_events", "campaign_id", "campaigns"),
        unknown("campaign_events", "employee_id", "employees"),
        crossed("campaign_events", ("campaign_id", "campaigns"), ("employee_id", "employees")),
        moved(
            "campaign_events",
            "(SELECT c.company_id FROM main.campaign_events AS e JOIN main.campaigns AS c"
            " ON c.id = e.campaign_id WHERE e.id = s.id)",
            _company("campaigns", "campaign_id"),
        ),
    ],
    "courses": _owned("courses"),
    "course_sections": [
        duplicate("course_sections", ("id",)),
        # Another section of the load (any file) at the same place: the UNIQUE constraint.
        _report(
            "course_sections",
            _at(
                "course_sections",
                ".position",
                "position %d of course %d is also given to section %d",
                "s.position",
                "s.course_id",
                "x.id",
            ),
            "s.valid",
            "JOIN temp.stage_course_sections AS x ON x.course_id = s.course_id"
            " AND x.position = s.position AND x.id != s.id AND x.pos < s.pos AND x.valid",
        ),
        unknown("course_sections", "course_id", "courses"),
        moved(
            "course_sections",
            "(SELECT c.company_id FROM main.course_sections AS x JOIN main.courses AS c"
            " ON c.id = x.course_id WHERE x.id = s.id)",
            _company("courses", "course_id"),
        ),
        _report(
            "course_sections",
            _at(
                "course_sections",
                ".position",
                "position %d of course %d is section %d's",
                "s.position",
                "s.course_id",
                "x.id",
            ),
            "s.valid",
            "JOIN main.course_sections AS x ON x.course_id = s.course_id"
            " AND x.position = s.position AND x.id != s.id",
        ),
        keeps_its_course("course_sections", "section_id"),
    ],
    "inscriptions": [
        duplicate("inscriptions", ("id",)),
        unknown("inscriptions", "employee_id", "employees"),
        unknown("inscriptions", "course_id", "courses"),
        crossed("inscriptions", ("employee_id", "employees"), ("course_id", "courses")),
        moved(
            "inscriptions",
            "(SELECT company_id FROM main.inscriptions WHERE id = s.id)",
            _company("employees", "employee_id"),
        ),
        keeps_its_course("inscriptions", "inscription_id"),
    ],
    "section_results": [
        duplicate("section_results", ("inscription_id", "section_id")),
        unknown("section_results", "inscription_id", "inscriptions"),
        unknown("section_results", "section_id", "course_sections"),
        _report(
            "section_results",
            _at(
                "section_results",
                ".section_id",
                "%d is not in the inscription's course",
                "s.section_id",
            ),
            "s.valid AND (SELECT course_id FROM main.course_sections WHERE id = s.section_id)"
            " != (SELECT course_id FROM main.inscriptions WHERE id = s.inscription_id)",
        ),
    ],
}


def check(conn: sqlite3.Connection, table: str) -> None:
    """Record every problem of the staged rows of ``table`` in ``temp.load_problems``."""
    for sql in CHECKS[table]:
        conn.execute(sql)
