"""contract.md 9 for any input: bad files get a clear answer and lose nothing.

Whatever bytes a fixture holds (not JSON, JSON of the wrong shape, nested values where
records should be flat, numbers beyond any range), the streaming loader either loads it
or refuses it with problems naming the file; it never fails otherwise, and a refused load
leaves every table as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.tools.loader import LoadError, load_files

from .support.factories import dump_tables, make_sample_db

DOCUMENTS = {
    "a table that is no array": ('{"companies": 5}', "companies: Not a valid list."),
    "a record that is no object": ('{"companies": [5]}', "companies[0]: Invalid input type."),
    "a nested value": (
        '{"companies": [{"id": {"x": [1, [2]]}, "name": "a"}]}',
        "companies[0].id: Not a valid integer.",
    ),
    "an unknown table": ('{"planets": [{"id": 1}]}', "planets: Unknown field."),
    "an unknown table, empty": ('{"companies": [], "planets": []}', "planets: Unknown field."),
    "an unknown field": (
        '{"companies": [{"id": 9, "name": "a", "size": 3}]}',
        "companies[0].size: Unknown field.",
    ),
    "trailing garbage": ('{"companies": []} {"more": 1}', "not valid JSON"),
    "a number beyond floats": ('{"companies": [{"id": 1e400, "name": "a"}]}', "not valid JSON"),
    "an id of 0": (
        '{"companies": [{"id": 0, "name": "a"}]}',
        "companies[0].id: Must be from 1 to 9007199254740991.",
    ),
    "an id beyond 2^53-1": (
        '{"companies": [{"id": 9007199254740992, "name": "a"}]}',
        "companies[0].id: Must be from 1 to 9007199254740991.",
    ),
    "an integer beyond 2^63-1": (
        '{"companies": [{"id": 9223372036854775808, "name": "a"}]}',
        "not valid JSON at line 1, column 42: parse error: integer overflow, near:",
    ),
    "NaN": ('{"section_results": [{"result": NaN}]}', "not valid JSON"),
    "a byte order mark": ('\ufeff{"companies": []}', "not valid JSON"),
    "a byte that is no UTF-8 (Latin-1's é)": (
        '{"companies": [{"id": 1, "name": "Jos\udce9"}]}',  # the byte 0xE9 (written below)
        "not valid JSON at line 1, column 39: lexical error: invalid bytes in UTF8 string",
    ),
    "an empty file": ("", "the file is empty: a fixture is a JSON object of tables"),
    "a NUL character (PostgreSQL's text has none)": (
        '{"companies": [{"id": 1, "name": "North\\u0000wind"}]}',
        "companies[0].name: Contains a NUL character (\\u0000).",
    ),
    "a lone surrogate": (
        '{"companies": [{"id": 1, "name": "ok"},\n {"id": 2, "name": "Jos\\ud800"}]}',
        "line 2: \\ud800 is half a character (a lone surrogate)",
    ),
    "a lone low surrogate": (
        '{"companies": [{"id": 1, "name": "\\udc00"}]}',
        "line 1: \\udc00 is half a character (a lone surrogate)",
    ),
    "a fullwidth digit in an instant": (
        '{"campaigns": [{"id": 1, "company_id": 1, "title": "t",'
        ' "launch_date": "2025-01-01T00:00:0\uff15Z"}]}',
        "campaigns[0].launch_date: Not a UTC timestamp in the form YYYY-MM-DDTHH:MM:SSZ.",
    ),
    "a member named twice in a record (JSON keeps the last, silently)": (
        '{"companies": [{"id": 1, "name": "a"}, {"id": 2, "name": "b", "name": "c"}]}',
        "companies[1]: 'name' is given twice",
    ),
    "a table named twice (JSON keeps the last, silently)": (
        '{"companies": [{"id": 1, "name": "a"}], "partners": [],'
        ' "companies": [{"id": 2, "name": "b"}]}',
        "companies: the table is given twice",
    ),
    **{
        f"a result of {small}, which the two stores print apart": (
            '{"section_results": [{"inscription_id": 1, "section_id": 24,'
            f' "completed_at": "2025-04-18", "result": {small}, "status": "APPROVED"}}]}}',
            "section_results[0].result: Must be 0 or from 0.0001 to 100.",
        )
        for small in ("1e-05", "0.0000999", "5e-324")
    },
    "deep nesting": ('{"companies": [{"id": ' + "[" * 5000 + "]" * 5000 + "}]}", "companies[0].id"),
}


@pytest.mark.parametrize("case", list(DOCUMENTS))
def test_a_malformed_document_is_refused_with_its_cause(
    case: str, tmp_path: Path, sample_db: Path
) -> None:
    text, cause = DOCUMENTS[case]
    bad = tmp_path / "bad.json"
    bad.write_bytes(text.encode("utf-8", "surrogateescape"))
    before = dump_tables(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [bad])
    problems = caught.value.problems
    assert any(p.startswith(f"{bad}: ") and cause in p for p in problems), problems
    assert all("\n" not in p for p in problems), "each problem is one line"
    assert dump_tables(sample_db) == before


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
TABLE_NAMES = st.sampled_from(["companies", "employees", "campaign_events", "campaign_targets",
                               "section_results", "other"])  # fmt: skip
DOCUMENT = st.one_of(
    JSON,
    st.dictionaries(TABLE_NAMES, st.lists(st.dictionaries(st.sampled_from(
        ["id", "company_id", "campaign_id", "employee_id", "name", "sent_at", "ip"]), JSON,
        max_size=4), max_size=3), max_size=3),
)  # fmt: skip


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=DOCUMENT)
def test_any_json_is_loaded_or_refused_cleanly(document: Any, tmp_path: Path) -> None:
    db = tmp_path / "fuzz.sqlite3"
    if not db.exists():
        make_sample_db(tmp_path).rename(db)
    fixture = tmp_path / "any.json"
    fixture.write_text(json.dumps(document), encoding="utf-8")
    before = dump_tables(db)
    try:
        load_files(db, [fixture])
    except LoadError as exc:
        assert exc.problems and all(
            p.startswith(f"{fixture}: ") or p.startswith("... and") for p in exc.problems
        )
        assert dump_tables(db) == before


def test_a_file_that_cannot_be_read_is_a_problem_like_any_other(
    tmp_path: Path, sample_db: Path
) -> None:
    missing, folder = tmp_path / "missing.json", tmp_path
    before = dump_tables(sample_db)
    with pytest.raises(LoadError) as caught:
        load_files(sample_db, [missing, folder])
    assert caught.value.problems == [
        f"{missing}: cannot read: No such file or directory",
        f"{folder}: cannot read: Is a directory",
    ]
    assert dump_tables(sample_db) == before
