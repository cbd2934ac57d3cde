"""CSV lines the database builds itself (contract.md 14), for the long exports.

Parsing each record's JSON back and writing it through Python's csv module cost more
than reading the JSON did; the database writes the same line from the columns for
little more than the JSON costs. The cells follow the rules :mod:`app.web.csv_layout`
applies to the JSON, to the byte: null is an empty cell; a text that a spreadsheet would
run as a formula (starting with ``= + - @``, tab or carriage return) gets a leading
``'``; a text holding a comma, a double quote, CR or LF is quoted, its quotes doubled
(Python's ``csv.QUOTE_MINIMAL``). Columns the loader holds to digits, an instant or one
of a few words (ids, timestamps, event types) need none of this and are written as
they are. tests/test_csv_lines.py holds both ways to the same bytes on both stores.

The cells of a campaign and of an employee are the same in every row that names them,
so each row keeps its own in a ``csv_cells`` column, written whenever the row is
(SQLite: triggers; PostgreSQL: a stored generated column); an event's line is then its
own three cells and the two it reads.
"""

from __future__ import annotations

from dataclasses import dataclass

# The first characters of a formula, as code points: = + - @ tab CR.
FORMULA_CODES = "61, 43, 45, 64, 9, 13"


@dataclass(frozen=True)
class Dialect:
    """What differs between SQLite and PostgreSQL, as templates of one value ``{v}``."""

    id_text: str  # the row's id as text
    first_code: str  # the code point of the text's first character
    needs_quotes: str  # true when the text holds a comma, a double quote, CR or LF
    crlf: str

    def text_cell(self, value: str) -> str:
        """The CSV cell of a text column (``value`` is read a few times: name a column)."""
        first = self.first_code.format(v=value)
        guarded = f"CASE WHEN {first} IN ({FORMULA_CODES}) THEN '''' || {value} ELSE {value} END"
        quoted = f"'\"' || replace({guarded}, '\"', '\"\"') || '\"'"
        special = self.needs_quotes.format(v=value)
        return f"coalesce(CASE WHEN {special} THEN {quoted} ELSE {guarded} END, '')"

    def row(self, cells: list[str]) -> str:
        """A whole CSV row: the cells, then CRLF."""
        return f"{joined(cells)} || {self.crlf}"


SQLITE = Dialect("id", "unicode({v})", "{v} GLOB '*[,\"' || char(10, 13) || ']*'", "char(13, 10)")
POSTGRESQL = Dialect("id::text", "ascii({v})", "{v} ~ '[,\"\\r\\n]'", "chr(13) || chr(10)")


def joined(cells: list[str]) -> str:
    """Cells (or runs of cells) joined by commas."""
    return " || ',' || ".join(cells)


# Each table's exported cells, its id first, as its ``csv_cells`` keeps them: what a
# campaign and an employee put in an event's exported row.
PERSON_TEXTS = ("first_name", "last_name", "email", "department")
KEPT_TEXTS = {"campaigns": ("title",), "employees": PERSON_TEXTS}
KEPT_AFTER = {"campaigns": ("launch_date",), "employees": ()}  # needing no quotes


def kept_cells(table: str, sql: Dialect) -> str:
    """The ``csv_cells`` of a row of ``table`` (campaigns or employees), from its columns."""
    texts = [sql.text_cell(column) for column in KEPT_TEXTS[table]]
    return joined([sql.id_text, *texts, *KEPT_AFTER[table]])


def kept_columns(table: str) -> tuple[str, ...]:
    """The columns ``csv_cells`` is made of (their writes make it again)."""
    return (*KEPT_TEXTS[table], *KEPT_AFTER[table])
