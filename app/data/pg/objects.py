"""Compact JSON objects and arrays built by PostgreSQL, byte for byte SQLite's.

``row_to_json`` writes a row's columns as keys, in order, with no spaces (unlike
``json_build_object``); ``array_to_json(array_agg(... ORDER BY ...))`` writes arrays
without spaces (unlike ``json_agg``). Text, integers, booleans and ``numeric`` print as
SQLite prints them.
"""

from __future__ import annotations

from ..aggregates import Fields


def columns(fields: Fields) -> str:
    """The select list whose row ``row_to_json`` writes as the object of ``fields``."""
    return ", ".join(f"{sql} AS {name}" for name, sql in fields)


def json_select(fields: Fields, source: str = "") -> str:
    """A query of the JSON object of ``fields`` over one row of ``source`` (if given)."""
    return f"SELECT row_to_json(r) FROM (SELECT {columns(fields)} {source}) r"


def json_object(fields: Fields, source: str = "") -> str:
    """The JSON object of ``fields`` as an expression (see :func:`json_select`)."""
    return f"({json_select(fields, source)})"


def array(fields: Fields, source: str, order: str) -> str:
    """A JSON array of the objects of ``fields``, one a row of ``source`` (``[]`` if none)."""
    return (
        f"(SELECT coalesce(array_to_json(array_agg((SELECT x FROM (SELECT {columns(fields)}) x)"
        f" ORDER BY {order})), '[]') {source})"
    )


# The teams of employee ``e``, by name: the ``groups`` of an inscription or an employee
# (SQLite's app.data.inscriptions.GROUPS_JSON).
GROUPS = array(
    [("name", "t.name")],
    "FROM team_members tm JOIN teams t ON t.id = tm.team_id WHERE tm.employee_id = e.id",
    "t.name, t.id",
)
