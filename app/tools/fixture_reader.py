"""Read a fixture document record by record, in constant memory.

A fixture is one JSON object of tables, each an array of flat records. ijson parses the
bytes incrementally (its C backend); this module turns its events into records of every
table in one pass, which ijson's ``items`` (one prefix per pass) cannot do. Flat records
are assembled here directly, which is the common case and the fast one; any nested value
is built by ijson's own ``ObjectBuilder`` and left for the schema to refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any, NamedTuple

import ijson

_OPEN = frozenset(("start_map", "start_array"))
_CLOSE = frozenset(("end_map", "end_array"))


class NotAFixture(Exception):
    """The bytes are not JSON, or not a JSON object of tables."""


class Item(NamedTuple):
    """One element of a table's array, or (position None) a table whose value is no array."""

    table: str
    position: int | None  # in the table's array
    value: Any


def read_items(stream: IO[bytes]) -> Iterator[Item]:
    """Yield every record of every table in document order; raise NotAFixture."""
    events = ijson.basic_parse(stream, use_float=True)
    try:
        first = next(events, None)
        if first is None or first[0] != "start_map":
            raise NotAFixture("the document must be a JSON object of tables")
        for event, table in events:
            if event == "end_map":
                break
            event, value = next(events)
            if event != "start_array":
                yield Item(table, None, _build(event, value, events))
                continue
            yield from _array(table, events)
        for _ in events:  # anything after the object is an error for the parser to raise
            pass
    except (ijson.JSONError, ValueError, OverflowError) as exc:  # also: a number too large
        raise NotAFixture(f"not valid JSON: {_one_line(str(exc))}") from None


def _one_line(message: str) -> str:
    """The parser's message on one line: its first line, and the text it points at."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if lines and "(right here)" in lines[-1]:
        lines.pop()
        if len(lines) == 2:
            near = "".join(c if c.isprintable() else "?" for c in lines.pop())[:40]
            lines[0] += f", near: {near}"
    return " ".join(lines)[:300]


def _array(table: str, events: Iterator[tuple[str, Any]]) -> Iterator[Item]:
    """The elements of one table's array, records assembled without a builder."""
    for index, (event, value) in enumerate(events):
        if event == "end_array":
            return
        if event == "start_map":
            record: dict[str, Any] = {}
            for event, key in events:
                if event == "end_map":
                    break
                event, value = next(events)
                record[key] = _build(event, value, events) if event in _OPEN else value
            yield Item(table, index, record)
        else:
            yield Item(table, index, _build(event, value, events))


def _build(event: str, value: Any, events: Iterator[tuple[str, Any]]) -> Any:
    """The whole value that starts with this event (a scalar, or a container built whole)."""
    if event not in _OPEN:
        return value
    builder = ijson.ObjectBuilder()
    builder.event(event, value)
    depth = 1
    for event, value in events:
        builder.event(event, value)
        depth += (event in _OPEN) - (event in _CLOSE)
        if depth == 0:
            break
    return builder.value
