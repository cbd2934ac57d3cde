"""Read a fixture document record by record, in constant memory.

A fixture is one JSON object of tables, each an array of flat records. ijson parses the
bytes incrementally (its C backend); this module turns its events into records of every
table in one pass, which ijson's ``items`` (one prefix per pass) cannot do. Flat records
are assembled here directly, which is the common case and the fast one; any nested value
is built by ijson's own ``ObjectBuilder`` and left for the schema to refuse.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

import ijson

# A surrogate escape (unless an odd run of backslashes precedes it: then it is plain text),
# and the low half that must follow a high one. A literal prefix keeps the search fast.
_SURROGATE = re.compile(rb"\\u[dD]([89a-fA-F])[0-9a-fA-F]{2}")
_LOW_HALF = re.compile(rb"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_OPEN = frozenset(("start_map", "start_array"))
_CLOSE = frozenset(("end_map", "end_array"))


class NotAFixture(Exception):
    """The bytes are not JSON, or not a JSON object of tables."""


class _NotJson(NotAFixture):
    """The bytes do not parse as JSON (placed by line and column for the user)."""


class Item(NamedTuple):
    """One element of a table's array, or (position None) a table whose value is no array
    or an empty one (``[]``): a table named is seen, even without records."""

    table: str
    position: int | None  # in the table's array
    value: Any


class _Tracked:
    """A binary stream that counts the bytes it hands the parser, to place a parse error.

    From ``slow_from`` on it hands them one at a time, so that the parser fails on the
    very byte that is wrong (read once more only when a document has failed to parse).
    """

    def __init__(self, stream: IO[bytes] | _WholeCharacters, slow_from: int | None = None) -> None:
        self.stream = stream
        self.slow_from = slow_from
        self.before = self.handed = 0  # bytes handed before the last read, and in all
        self.blank = True  # nothing but whitespace so far

    def read(self, size: int = -1) -> bytes:
        """The next bytes for the parser (one at a time from ``slow_from``)."""
        if size == 0:  # ijson asks for nothing to learn whether the stream gives bytes
            return b""
        if self.slow_from is not None:
            ahead = self.slow_from - self.handed
            size = 1 if ahead <= 0 else min(size, ahead)
        data = self.stream.read(size)
        self.before, self.handed = self.handed, self.handed + len(data)
        self.blank = self.blank and not data.strip()
        return data


def read_items(stream: IO[bytes]) -> Iterator[Item]:
    """Yield every record of every table in document order; raise NotAFixture.

    A document that does not parse is named by the line and column where parsing failed
    (when the stream can be read again: a file).
    """
    tracked = _Tracked(_WholeCharacters(stream))
    try:
        yield from _items(tracked)
    except _NotJson as exc:
        if tracked.blank:
            raise NotAFixture("the file is empty: a fixture is a JSON object of tables") from None
        raise NotAFixture(f"not valid JSON{_place(stream, tracked.before)}: {exc}") from None


def _items(stream: IO[bytes] | _Tracked) -> Iterator[Item]:
    events = ijson.basic_parse(stream, use_float=True)
    try:
        first = next(events, None)
        if first is None or first[0] != "start_map":
            raise NotAFixture("the document must be a JSON object of tables")
        tables: set[str] = set()
        for event, table in events:
            if event == "end_map":
                break
            if table in tables:  # JSON would keep the last silently: the first is lost
                raise NotAFixture(f"{table}: the table is given twice")
            tables.add(table)
            event, value = next(events)
            if event != "start_array":
                yield Item(table, None, _build(event, value, events))
                continue
            yield from _array(table, events)
        for _ in events:  # anything after the object is an error for the parser to raise
            pass
    except (ijson.JSONError, ValueError, OverflowError) as exc:  # also: a number too large
        raise _NotJson(_one_line(_text_of(exc))) from None


def _text_of(exc: Exception) -> str:
    """The parser's message: yajl gives its own as bytes, which str() would quote whole."""
    given = exc.args[0] if exc.args else None
    return given.decode("utf-8", "replace") if isinstance(given, bytes) else str(exc)


def _place(stream: IO[bytes], chunk_start: int) -> str:
    """`` at line L, column C``: the byte the parser failed on ('' if unseekable).

    The document is parsed again up to the chunk that failed, then byte by byte.
    """
    if not stream.seekable():
        return ""
    stream.seek(0)
    tracked = _Tracked(stream, slow_from=chunk_start)
    with contextlib.suppress(_NotJson):
        for _ in _items(tracked):
            pass
    failed = tracked.before if tracked.handed > tracked.before else tracked.handed
    stream.seek(0)
    line, column, left = 1, 1, failed
    while left and (chunk := stream.read(min(left, 1 << 16))):
        left -= len(chunk)
        newlines = chunk.count(b"\n")
        if newlines:
            line += newlines
            chunk = chunk[chunk.rindex(b"\n") + 1 :]
            column = 1
        column += sum(1 for byte in chunk if byte & 0xC0 != 0x80)  # characters, not bytes
    return f" at line {line}, column {column}"


class _WholeCharacters:
    """The bytes of a fixture as they are, refusing a lone surrogate escape (``\\ud800``
    alone is no character): yajl would turn it into ``?`` without a word."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.held, self.line = stream, b"", 1

    def read(self, size: int = -1) -> bytes:
        """The next bytes whose every escape is known whole (b"" only at the end)."""
        while True:
            data = self.stream.read(size)
            text, end = self.held + data, self._checked(self.held + data, bool(data))
            self.line += text.count(b"\n", 0, end)
            self.held = text[end:]
            if end or not data:
                return text[:end]

    def _checked(self, text: bytes, more: bool) -> int:
        """How much of ``text`` holds no lone surrogate; raise NotAFixture at one."""
        end = max(0, len(text) - 12) if more else len(text)
        while end and text[end - 1 : end] == b"\\":  # a run of backslashes stays whole
            end -= 1
        after = 0  # the end of a pair already checked: its low half is not lone
        for found in _SURROGATE.finditer(text):
            start = found.start()
            if start < after:
                continue
            run = start
            while run and text[run - 1] == 0x5C:  # the backslashes before this one
                run -= 1
            if start >= end or (more and found.end() + 6 > len(text)):
                end = run  # not known whole yet: checked with the next bytes
                break
            if (start - run) % 2:
                continue  # an escaped backslash, then the letter u: plain text
            low = _LOW_HALF.match(text, found.end()) if found[1] in b"89abAB" else None
            if low is None:
                line = self.line + text.count(b"\n", 0, start)
                escape = found[0].decode("ascii")
                raise NotAFixture(f"line {line}: {escape} is half a character (a lone surrogate)")
            after = low.end()
        return max(end, after)


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
            if index == 0:
                yield Item(table, None, [])
            return
        if event == "start_map":
            record: dict[str, Any] = {}
            for event, key in events:
                if event == "end_map":
                    break
                if key in record:  # JSON would keep the last silently: the first is lost
                    raise NotAFixture(f"{table}[{index}]: {key!r} is given twice")
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
