"""CSV of a listing (contract.md 14): the columns come from its response schema, the cells
from the JSON records SQLite built.

Nested objects become dotted columns (``victim.email``); a list of strings or of
one-field objects one cell of those values joined by ``; `` (``automation.reasons``,
``groups``); a list of objects with more fields one
row per element, the record's other columns repeated (an inscription's sections; a record
whose list is empty gives one row with those cells empty). Null is an empty cell and a
cell that a spreadsheet would run as a formula gets a leading ``'``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, reduce
from operator import itemgetter
from typing import Any

import orjson
from marshmallow import Schema, fields

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# How such a cell begins inside SQLite's JSON text, which has no whitespace: a string
# (SQLite escapes tab and carriage return as \t and \r) or a negative number (as an
# object's value: no schema has a list of bare numbers). A chunk without any of these
# needs no look at its cells; one with a mark (perhaps inside a string) gets the exact check.
FORMULA_MARKS = (b'"=', b'"+', b'"-', b'"@', b'"\\', b":-")
# The second bytes of the marks after a quote all become NUL (which JSON text never holds
# raw), so that one search of the translated chunk finds any of them.
_MARKED = bytes.maketrans(b"=+-@\\", b"\0\0\0\0\0")
BOOL_TEXT = {True: "true", False: "false", None: None}
KeyPath = tuple[str, ...]  # keys from a record (or an element) down to an object
JOINER = "; "


Cells = Callable[[Any], tuple[Any, ...]]


@dataclass(frozen=True)
class Segment:
    """Consecutive columns read from one object: the record's, or the current element's."""

    in_element: bool
    read: Cells  # the record (or element) -> the cells of the object at the segment's path


def _reader(path: KeyPath, cells: Cells, width: int) -> Cells:
    """Follow ``path`` to the object and read its cells; empty cells where it is missing.

    Built once per column group: the common cases cost one call, no loop.
    """
    empty = (None,) * width
    if not path:
        return lambda source: empty if source is None else cells(source)
    if len(path) == 1:
        key = path[0]
        return lambda source: empty if source is None or source[key] is None else cells(source[key])

    def read(source: Any) -> tuple[Any, ...]:
        for key in path:
            if source is None:
                break
            source = source[key]
        return empty if source is None else cells(source)

    return read


@dataclass(frozen=True)
class Column:
    name: str
    in_element: bool
    path: KeyPath
    key: str
    kind: str  # "value", "bool" or "joined"


class CsvLayout:
    """The columns of one response schema, and the rows of its records."""

    def __init__(self, schema: Schema) -> None:
        self.element_path: KeyPath | None = None
        columns: list[Column] = []
        self._walk(schema, (), "", False, columns)
        self.columns = [column.name for column in columns]
        self._segments = _segments(columns)
        self._record_row = _concatenated([segment.read for segment in self._segments])

    def _walk(
        self, schema: Schema, path: KeyPath, prefix: str, in_element: bool, out: list[Column]
    ) -> None:
        for name, field in schema.fields.items():
            key = field.data_key or name
            inner = field.inner if isinstance(field, fields.List) else None
            if isinstance(field, fields.Nested) and not field.many:
                self._walk(_schema(field), (*path, key), f"{prefix}{key}.", in_element, out)
            elif isinstance(inner, fields.Nested) and len(_schema(inner).fields) > 1:
                if in_element or self.element_path is not None:
                    raise ValueError(f"CSV takes one list of objects a record ({prefix}{key})")
                self.element_path = (*path, key)
                self._walk(_schema(inner), (), f"{prefix}{key}.", True, out)
            else:
                out.append(Column(f"{prefix}{key}", in_element, path, key, _kind(field)))

    def header(self) -> bytes:
        return _write([self.columns])

    def rows(self, record: dict[str, Any]) -> list[list[Any]]:
        """The CSV rows of one record (several when it holds a list of objects)."""
        if self.element_path is None:
            return [self._row(record, None)]
        elements = _reader(self.element_path, lambda items: (items,), 1)(record)[0] or [None]
        return [self._row(record, element) for element in elements]

    def _row(self, record: Any, element: Any) -> list[Any]:
        row: list[Any] = []
        for segment in self._segments:
            row += segment.read(element if segment.in_element else record)
        return row

    def encode(self, texts: list[bytes], first: bool) -> bytes:
        """A chunk of records as CSV rows (the header row is the body's opening).

        The chunk is parsed as one JSON array by orjson (twice as fast as the standard
        library's parser on these records), a record without a list of objects is read in
        one call, and the formula guard looks at cells only in a chunk whose text holds
        one of the marks.
        """
        if not texts:
            return b""
        chunk = b"[" + b",".join(texts) + b"]"
        records = orjson.loads(chunk)
        rows: list[tuple[Any, ...]] | list[list[Any]]
        if self.element_path is None:  # a row a record: the common, long listings
            rows = [self._record_row(record) for record in records]
        else:
            rows = [row for record in records for row in self.rows(record)]
        if has_formula_mark(chunk):
            rows = [[neutralise(cell) for cell in row] for row in rows]
        return _write(rows)


def has_formula_mark(chunk: bytes) -> bool:
    """Whether JSON text holds any of FORMULA_MARKS (perhaps inside a string)."""
    return b":-" in chunk or b'"\0' in chunk.translate(_MARKED)


def neutralise(cell: Any) -> Any:
    """A leading ``'`` on a cell a spreadsheet would take for a formula."""
    if isinstance(cell, str):
        return "'" + cell if cell.startswith(FORMULA_STARTS) else cell
    if isinstance(cell, int | float) and cell < 0:
        return f"'{cell}"
    return cell


@cache
def layout_of(schema: type[Schema]) -> CsvLayout:
    """The layout of a response schema, built once."""
    return CsvLayout(schema())


def _concatenated(reads: list[Cells]) -> Cells:
    """One call reading a whole row of the record: the segments' cells, concatenated."""
    if not reads:
        return lambda record: ()

    def joined(first: Cells, then: Cells) -> Cells:
        return lambda record: first(record) + then(record)

    return reduce(joined, reads)


def _kind(field: fields.Field) -> str:
    if isinstance(field, fields.List):
        return "joined"
    return "bool" if isinstance(field, fields.Boolean) else "value"


def _schema(field: fields.Field) -> Schema:
    assert isinstance(field, fields.Nested)
    schema = field.schema
    assert isinstance(schema, Schema)
    return schema


def _segments(columns: list[Column]) -> list[Segment]:
    """Group consecutive plain columns of one object so that one itemgetter reads them."""
    segments: list[Segment] = []
    group: list[Column] = []

    def flush() -> None:
        if group:
            getter = itemgetter(*(c.key for c in group))
            cells = getter if len(group) > 1 else lambda obj, get=getter: (get(obj),)
            read = _reader(group[0].path, cells, len(group))
            segments.append(Segment(group[0].in_element, read))
            group.clear()

    for column in columns:
        same = group and (group[0].in_element, group[0].path) == (column.in_element, column.path)
        if column.kind == "value" and (not group or same):
            group.append(column)
            continue
        flush()
        if column.kind == "value":
            group.append(column)
        else:
            cell = _bool_cell(column.key) if column.kind == "bool" else _joined_cell(column.key)
            segments.append(Segment(column.in_element, _reader(column.path, cell, 1)))
    flush()
    return segments


def _bool_cell(key: str) -> Callable[[Any], tuple[Any, ...]]:
    return lambda obj: (BOOL_TEXT[obj[key]],)


def _joined_cell(key: str) -> Callable[[Any], tuple[Any, ...]]:
    """Values of a list joined in one cell; objects give their one field's value."""

    def cell(obj: Any) -> tuple[Any, ...]:
        items = obj[key]
        if items is None:
            return (None,)
        values = [next(iter(item.values())) if isinstance(item, dict) else item for item in items]
        return (JOINER.join(str(value) for value in values),)

    return cell


def _write(rows: list[tuple[Any, ...]] | list[list[Any]]) -> bytes:
    """RFC 4180: comma, double quotes doubled, CRLF after every row, UTF-8."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")
