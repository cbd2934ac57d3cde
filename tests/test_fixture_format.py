"""contract.md 9: every record is validated by the fixture format's marshmallow schemas.

The loader first tries ``Record.quick_load`` (the same fields, without marshmallow's
per-record machinery) and falls back to ``load``. Pinned here: for any record, valid or
not, quick_load either gives exactly what ``load`` gives or declines (None), and it never
accepts a record that ``load`` refuses.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError

from app.tools.fixture_format import TABLES

from .support.factories import sample

# Values of every kind a JSON parser can hand over, plus near misses of the valid ones.
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=60),
    st.sampled_from(
        ["open", "click", "fail", "report", "lecture", "exam", "APPROVED", "completed",
         "2025-02-11T09:00:00Z", "2025-02-30T09:00:00Z", "2025-02-11T24:00:00Z", "2025-02-11",
         "2025-13-01", "a@b.example", "not an email", "", "x" * 46, "203.0.113.9", 0, 1, 100,
         100.5, -1, 2**63 - 1, 2**63, 1.0, True]
    ),
)  # fmt: skip
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=2),
    st.dictionaries(st.text(max_size=3), SCALARS, max_size=2),
)


@st.composite
def records(draw: st.DrawFn) -> tuple[str, Any]:
    """A sample record of some table with some fields replaced, removed or added."""
    table = draw(st.sampled_from([t for t in TABLES if sample().get(t)]))
    record = dict(draw(st.sampled_from(sample()[table])))
    for name in draw(st.lists(st.sampled_from(sorted(record)), max_size=3)):
        action = draw(st.sampled_from(["replace", "borrow", "remove"]))
        if action == "remove":
            record.pop(name, None)
        elif action == "borrow":  # the same field of another record: valid alone, maybe not here
            record[name] = draw(st.sampled_from([r.get(name) for r in sample()[table]]))
        else:
            record[name] = draw(VALUES)
    if draw(st.booleans()) and draw(st.booleans()):
        record[draw(st.sampled_from(["extra", "ip", "user_agent", "sent_at"]))] = draw(VALUES)
    return table, record if draw(st.integers(0, 20)) else draw(VALUES)


@settings(max_examples=1500, deadline=None)
@given(case=records())
def test_quick_load_agrees_with_load(case: tuple[str, Any]) -> None:
    agree(*case)


def test_quick_load_takes_every_sample_record() -> None:
    """The common case is the fast one: no plainly valid record falls back to load."""
    for table, schema_class in TABLES.items():
        schema = schema_class()
        for record in sample().get(table, []):
            assert schema.quick_load(record) == schema.load(record), (table, record)


def agree(table: str, record: Any) -> None:
    schema = TABLES[table]()
    quick = schema.quick_load(record)
    try:
        loaded = schema.load(record)
    except ValidationError:
        assert quick is None, (table, record, quick)
        return
    assert quick is None or quick == loaded, (table, record)


def test_quick_load_agrees_on_every_field_borrowed_from_every_record() -> None:
    """Each field of a few records takes every value the table has for it (and null):
    valid one by one, but not always together (a due date before the start date, a result
    without a status)."""
    for table in TABLES:
        rows = sample().get(table, [])
        for record in rows[:5]:
            for name in record:
                for value in {json_key(r.get(name)): r.get(name) for r in rows}.values():
                    agree(table, record | {name: value})
                agree(table, record | {name: None})


def json_key(value: Any) -> str:
    return json.dumps(value)


def test_a_company_or_partner_name_is_one_printable_line_not_blank() -> None:
    """As the importer's --company-name: the dashboard and the tools show it on one line."""
    for table in ("companies", "partners"):
        schema = TABLES[table]()
        assert schema.load({"id": 1, "name": " Acme Ltd "})["name"] == " Acme Ltd "
        for name in ("", "   ", "Acme\tLtd", "Acme\nLtd", "Acme\u2028Ltd"):
            try:
                schema.load({"id": 1, "name": name})
            except ValidationError as exc:
                assert "name" in exc.messages, (table, name)
            else:
                raise AssertionError(f"{table}: {name!r} was taken")
            assert schema.quick_load({"id": 1, "name": name}) is None
