"""The writes of a load: each table's clean staged rows upserted into the database.

Run inside the load's write transaction, right after the table's checks
(``load_checks``); a row with a problem, a row whose parent was refused, and a row
superseded by a later file of the same load are never written.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ..data.schema import DERIVE_COMPLETED_AT, DERIVED_COMPLETION, KEPT_COMPLETION
from .staging import EVENT_COLUMNS, INSCRIPTION_COLUMNS, PERSON

BULK = 50_000  # rows into an empty table from which its indexes are built after the insert
ADVANCE_SEQ = "UPDATE main.meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'change_seq'"


@contextmanager
def indexes_set_aside(conn: sqlite3.Connection, table: str, rows: int) -> Iterator[None]:
    """Into an empty table, many rows go in faster with its indexes built once afterwards
    (the generator does the same); inside the transaction, so all or nothing still holds."""
    empty = not conn.execute(f"SELECT EXISTS (SELECT 1 FROM main.{table})").fetchone()[0]
    found = conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ?"
        " AND sql IS NOT NULL",
        (table,),
    ).fetchall() if empty and rows >= BULK else []  # fmt: skip
    for name, _ in found:
        conn.execute(f'DROP INDEX main."{name}"')
    yield
    for _, sql in found:
        conn.execute(sql)


def _clean(table: str, key: tuple[str, ...]) -> str:
    """A staged row is written when valid, without a problem, and the last of its key.

    Two files of one load may give the same record: the later file wins, as if they were
    loaded one after the other (within one file a repeated key is a problem).
    """
    same = " AND ".join(f"x.{k} = s.{k}" for k in key)
    return (
        "s.valid AND NOT EXISTS (SELECT 1 FROM temp.load_problems AS p WHERE p.pos = s.pos)"
        f" AND NOT EXISTS (SELECT 1 FROM temp.stage_{table} AS x WHERE {same} AND x.pos > s.pos)"
    )


def _parents(*refs: tuple[str, str]) -> str:
    return "".join(f" AND EXISTS (SELECT 1 FROM main.{t} WHERE id = s.{c})" for c, t in refs)


def _upsert(
    table: str,
    columns: tuple[str, ...],
    *,
    key: tuple[str, ...] = ("id",),
    parents: str = "",
    select: dict[str, str] | None = None,
    update: tuple[str, ...] | None = None,
    order: str | None = None,
) -> str:
    """``INSERT ... SELECT`` of the clean staged rows in key order, upserting on the key.

    ``select`` gives the expression of a column that is not copied as staged; ``update``
    the columns an existing row takes (default: every column outside the key). Its row
    count is the rows inserted or changed.
    """
    values = ", ".join((select or {}).get(c, f"s.{c}") for c in columns)
    changed = update if update is not None else tuple(c for c in columns if c not in key)
    # A stored row that the load gives again as it is stays as it is: not written, so it
    # fires no trigger and counts in no change (an unchanged load moves no data version).
    differs = " OR ".join(f"{c} IS NOT excluded.{c}" for c in changed if c != "seq")
    action = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in changed)
    action += f" WHERE {differs}"
    keys = ", ".join(key)
    where = _clean(table, key) + parents
    return (
        f"INSERT INTO main.{table} ({', '.join(columns)}) SELECT {values}"
        f" FROM temp.stage_{table} AS s WHERE {where} ORDER BY {order or keys}"
        f" ON CONFLICT ({keys}) {action if changed else 'DO NOTHING'}"
    )


OF_COMPANY = _parents(("company_id", "companies"))
# An event written by a load takes the next places of the change sequence (contract.md 13),
# in id order; an event that is already stored exactly as given is not written at all.
EVENT = EVENT_COLUMNS
SAME = " AND ".join(f"e.{c} IS s.{c}" for c in EVENT[1:])
MERGES: dict[str, str] = {
    "companies": _upsert("companies", ("id", "name", "name_key")),
    "partners": _upsert("partners", ("id", "name")),
    "partner_companies": _upsert(
        "partner_companies",
        ("partner_id", "company_id"),
        key=("partner_id", "company_id"),
        parents=_parents(("partner_id", "partners"), ("company_id", "companies")),
    ),
    "api_keys": _upsert(
        "api_keys",
        ("company_id", "partner_id", "scopes", "key_hash", "prefix", "label", "created_at"),
        key=("key_hash",),
        parents=" AND (EXISTS (SELECT 1 FROM main.companies WHERE id = s.company_id)"
        " OR EXISTS (SELECT 1 FROM main.partners WHERE id = s.partner_id))",
        select={"created_at": "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"},
        update=("label", "scopes"),
        order="s.pos",
    ),
    "employees": _upsert(
        "employees",
        ("id", "company_id", *PERSON, *(f"{c}_key" for c in PERSON)),
        parents=OF_COMPANY,
    ),
    "teams": _upsert("teams", ("id", "company_id", "name", "name_key"), parents=OF_COMPANY),
    "team_members": _upsert(
        "team_members",
        ("employee_id", "team_id"),
        key=("employee_id", "team_id"),
        parents=_parents(("employee_id", "employees"), ("team_id", "teams")),
    ),
    "campaigns": _upsert(
        "campaigns", ("id", "company_id", "title", "launch_date", "title_key"), parents=OF_COMPANY
    ),
    "campaign_targets": _upsert(
        "campaign_targets",
        ("campaign_id", "employee_id", "sent_at"),
        key=("campaign_id", "employee_id"),
        parents=_parents(("campaign_id", "campaigns"), ("employee_id", "employees")),
    ),
    "campaign_events": _upsert(
        "campaign_events",
        (*EVENT, "seq"),
        parents=_parents(("campaign_id", "campaigns"), ("employee_id", "employees"))
        + f" AND NOT EXISTS (SELECT 1 FROM main.campaign_events AS e WHERE e.id = s.id AND {SAME})",
        select={
            "seq": "(SELECT CAST(value AS INTEGER) FROM main.meta WHERE key = 'change_seq')"
            " + row_number() OVER (ORDER BY s.id)"
        },
    ),
    "courses": _upsert("courses", ("id", "company_id", "title", "title_key"), parents=OF_COMPANY),
    "course_sections": _upsert(
        "course_sections",
        ("id", "course_id", "title", "section_type", "position"),
        parents=_parents(("course_id", "courses")),
    ),
    "inscriptions": _upsert(
        "inscriptions",
        (*INSCRIPTION_COLUMNS, "company_id", "completed_at"),
        parents=_parents(("employee_id", "employees"), ("course_id", "courses")),
        select={
            "company_id": "(SELECT company_id FROM main.employees WHERE id = s.employee_id)",
            "completed_at": KEPT_COMPLETION.format("main.inscriptions"),
        },
    ),
    "section_results": _upsert(
        "section_results",
        ("inscription_id", "section_id", "completed_at", "result", "status"),
        key=("inscription_id", "section_id"),
        parents=_parents(("inscription_id", "inscriptions"), ("section_id", "course_sections")),
    ),
}
# An event implies that its employee was a target of its campaign (contract.md 10); a
# target row given in a fixture (with its sent_at) is kept as it is.
IMPLIED_TARGETS = (
    "INSERT OR IGNORE INTO main.campaign_targets (campaign_id, employee_id)"
    " SELECT DISTINCT campaign_id, employee_id FROM temp.stage_campaign_events AS s"
    f" WHERE {_clean('campaign_events', ('id',))}"
)

# The completion date of each inscription the load gave without one: derived once its
# section results are written (the last table of a load).
DERIVED_COMPLETIONS = (
    f"{DERIVE_COMPLETED_AT.replace('UPDATE inscriptions', 'UPDATE main.inscriptions')}"
    " WHERE id IN (SELECT s.id FROM temp.stage_inscriptions AS s"
    f" WHERE {_clean('inscriptions', ('id',))} AND NOT s.completed_at_given)"
    f" AND completed_at IS NOT {DERIVED_COMPLETION}"
)
