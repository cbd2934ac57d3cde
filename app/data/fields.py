"""Strict marshmallow fields shared by the query parameters and the fixture format.

marshmallow's own Date, Integer and Boolean fields are generous (``2026-1-2``, ``+1``,
``1_000``, ``yes``); the contract wants exactly one spelling, so these fields check it.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from marshmallow import ValidationError, fields

MAX_ID = 2**63 - 1  # the largest id a request may name (SQLite's and PostgreSQL's bigint)
MAX_SAFE_ID = 2**53 - 1  # the largest id stored: every id a client sees is exact in JavaScript
MAX_LIST_VALUES = 100
MAX_LABEL = 500  # characters of a key's or a subscription's label, as a fixture's may have
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

# ASCII digits only: a bare \d takes other scripts' digits too (a fullwidth "２025-01-01"
# is then "not a real calendar date" instead of not written YYYY-MM-DD).
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)
_DIGITS = re.compile(r"[0-9]{1,19}")
# A list value may hold any character the data may (a department with a line break or a
# tab), but NUL, which no stored text holds; the OpenAPI document's list item pattern
# (LIST_ITEM in app/web/openapi.py) states this rule, with the rest of the grammar.
NUL_MESSAGE = "The NUL character (U+0000) is not allowed in values."
EMPTY_MESSAGE = "Empty values are not allowed."
# One element of a comma list and what ends it: a "quoted" value ("" for a quote) or a
# bare one without quotes, spaces around either, then a comma or the end. Possessive (*+):
# spaces both around and in a bare value would otherwise be tried every way they split
# (the cost grew with the cube of their number: hours of the event loop for a query
# string of spaces ending in a quote); giving one back never turns a failure into a match.
_ELEMENT = re.compile(r'\s*+(?:"((?:[^"]|"")*+)"|([^,"]*+))\s*+(,|\Z)')


def one_line_label(label: str) -> bool:
    """Whether a (trimmed) label is one line of at most MAX_LABEL printable characters:
    the tools' lists show each on one."""
    return len(label) <= MAX_LABEL and label.isprintable()


class StrictDate(fields.Date):
    """A real calendar date written exactly ``YYYY-MM-DD``."""

    # marshmallow types Date._deserialize as returning a datetime; it returns a date.
    def _deserialize(  # type: ignore[override]
        self, value: Any, attr: str | None, data: Any, **kwargs: Any
    ) -> dt.date:
        if not isinstance(value, str) or not _DATE.fullmatch(value):
            raise ValidationError("Not a date in the form YYYY-MM-DD.")
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            raise ValidationError(f"{value} is not a real calendar date.") from None


class UtcTimestamp(fields.DateTime):
    """A UTC instant written exactly ``YYYY-MM-DDTHH:MM:SSZ``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(format=TIMESTAMP_FORMAT, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dt.datetime:
        if not isinstance(value, str) or not _TIMESTAMP.fullmatch(value):
            raise ValidationError("Not a UTC timestamp in the form YYYY-MM-DDTHH:MM:SSZ.")
        try:
            return dt.datetime.strptime(value, TIMESTAMP_FORMAT)
        except ValueError:
            raise ValidationError(f"{value} is not a real date and time.") from None


class DecimalId(fields.Integer):
    """An identifier written as decimal digits, 1 to 2^63-1 (path ids, ``page``...).

    ``minimum=0`` makes it a count (``filter[min_failed]``).
    """

    def __init__(self, *, minimum: int = 1, maximum: int = MAX_ID, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)
        self.minimum = minimum
        self.maximum = maximum

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise ValidationError("Not an integer.")
        wrong = f"Not a whole number from {self.minimum} to {self.maximum}."
        if isinstance(value, str):
            if not _DIGITS.fullmatch(value):
                raise ValidationError(wrong)
            value = int(value)
        if not isinstance(value, int) or not self.minimum <= value <= self.maximum:
            raise ValidationError(wrong)
        return value


class StrictBool(fields.Boolean):
    """``true`` or ``false`` in any letter case; nothing else."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValidationError("Must be true or false.")


class CommaList(fields.Field):
    """Comma-separated values; a bare one is trimmed, a double-quoted one is taken exactly
    (a comma, spaces around it, or nothing: the empty value).

    The raw input is a list of strings (the parameter may be repeated; values merge).
    A list of ``choices`` is of fixed words without spaces: its values are trimmed, quoted
    or not, and none is empty.
    """

    def __init__(self, *, choices: tuple[str, ...] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.choices = choices

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:
        raw = value if isinstance(value, list) else [value]
        values: list[str] = []
        for text in raw:
            values.extend(_split(text))
        if len(values) > MAX_LIST_VALUES:
            raise ValidationError(f"At most {MAX_LIST_VALUES} values are allowed.")
        if self.choices is not None:
            values = [v.strip().lower() for v in values]
            if "" in values:
                raise ValidationError(EMPTY_MESSAGE)
            bad = sorted({v for v in values if v not in self.choices})
            if bad:
                allowed = ", ".join(self.choices)
                raise ValidationError(f"Unknown value(s) {', '.join(bad)}; allowed: {allowed}.")
        return values


def _split(text: Any) -> list[str]:
    """Split one comma list, honouring double quotes; refuse empty bare elements.

    Spaces around an element are trimmed, around its quotes too: ``"a, b" ,c`` is two.
    Inside the quotes nothing is, so that a filter names a stored value with spaces at
    its ends (`` Sales``) or the empty one (``""``), as a department may be.
    """
    if not isinstance(text, str):
        raise ValidationError("Not a string.")
    if "\x00" in text:
        raise ValidationError(NUL_MESSAGE)
    elements: list[str] = []
    at = 0
    while True:
        element = _ELEMENT.match(text, at)
        if element is None:
            raise ValidationError('Double quotes must enclose a whole value, as in "Smith, Jr.".')
        quoted, bare, comma = element.groups()
        if quoted is not None:
            elements.append(quoted.replace('""', '"'))
        elif bare.strip():
            elements.append(bare.strip())
        else:
            raise ValidationError(f'{EMPTY_MESSAGE} The empty value itself is written "".')
        if not comma:
            return elements
        at = element.end()
