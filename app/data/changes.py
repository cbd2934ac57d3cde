"""The change feeds of inscriptions and employees: the event feed's mechanism over two
more tables (the feed's positions, cursors and marks; :mod:`app.data.feed`).

A write that changes an inscription (or adds, changes or removes one of its section
results) leaves its ``seq`` empty, and so does a write that changes an employee, their
teams or a team's name (the schema's triggers). The same transaction then gives every
row left empty the next places of the change sequence, in id order
(:func:`app.data.schema.place_changes`), so a position ``(seq, id)`` splits each feed
for good, exactly as it splits the event feed. An unchanged row keeps its place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .employees import PERSON_COLUMNS
from .feed import Position
from .inscriptions import GROUPS_JSON, INSCRIPTION, person_conditions
from .listings import Listing, Record

# The inscription record and the ids of the inscription, its employee and its course,
# and its stored completion date (given by the fixture or derived by the writers:
# app.data.schema.DERIVE_COMPLETED_AT); keys after the record's, in this order.
INSCRIPTION_CHANGE = Record(
    "inscription_change",
    f"json_set({INSCRIPTION.json}, '$.id', i.id, '$.employee_id', i.employee_id,"
    " '$.course_id', i.course_id, '$.completed_at', i.completed_at)",
)

# An employee as the directory names them, with their teams (no figures: those change
# with events, which move nothing here).
EMPLOYEE_CHANGE = Record(
    "employee_change",
    "json_object("
    + ", ".join(f"'{c}', e.{c}" for c in PERSON_COLUMNS)
    + f", 'groups', {GROUPS_JSON})",
)


@dataclass(frozen=True, slots=True)
class ChangeFilters:
    """A change feed's person filters (case-folded values), normalised: each list sorted
    and each value once, so the same set always signs the same cursors."""

    lists: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, lists: Mapping[str, Sequence[str]]) -> ChangeFilters:
        return cls({name: tuple(sorted(set(v))) for name, v in sorted(lists.items()) if v})

    def scope(self, feed: str) -> str:
        """The text a cursor is bound to: the feed's name and the filters (an /events
        cursor, or one of the other feed, never opens here). A value's own ``%``, ``,``
        and ``;`` are escaped, so that one value never reads as two or as another filter;
        other values keep the text that cursors were always signed with."""
        given = ";".join(
            f"{name}={','.join(_escaped(v) for v in values)}" for name, values in self.lists.items()
        )
        return f"changes={feed};{given}"


def _escaped(value: str) -> str:
    """A filter value with the separators of :meth:`ChangeFilters.scope` percent-escaped."""
    return value.replace("%", "%25").replace(",", "%2C").replace(";", "%3B")


def _listing(
    record: Record, table: str, alias: str, joins: str, company_id: int, lists: ChangeFilters,
    after: Position, employee_id: str,
) -> Listing:  # fmt: skip
    person, params = person_conditions(lists.lists, employee_id, company_id)
    where = [f"{alias}.company_id = ?", f"({alias}.seq, {alias}.id) > (?, ?)", *person]
    rows_from = f"FROM {table} {alias} {joins} WHERE {' AND '.join(where)}"
    order = f"{alias}.seq, {alias}.id"
    # The company's own sequence index holds its rows only: unfiltered, a window reads
    # just its records. A person filter may pass over many before it finds them.
    return Listing(
        record, rows_from, rows_from, order, (company_id, *after, *params), key=order,
        heavy=bool(person),
    )  # fmt: skip


def inscription_changes(company_id: int, filters: ChangeFilters, after: Position) -> Listing:
    """The company's inscriptions placed after ``after``, by (seq, id)."""
    joins = "JOIN employees e ON e.id = i.employee_id JOIN courses c ON c.id = i.course_id"
    return _listing(
        INSCRIPTION_CHANGE, "inscriptions", "i", joins, company_id, filters, after, "i.employee_id"
    )


def employee_changes(company_id: int, filters: ChangeFilters, after: Position) -> Listing:
    """The company's employees placed after ``after``, by (seq, id)."""
    return _listing(EMPLOYEE_CHANGE, "employees", "e", "", company_id, filters, after, "e.id")
