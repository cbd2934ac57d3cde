"""What every listing query shares: one snapshot, the data token, paging, streaming.

Query functions are plain synchronous functions over a ``sqlite3.Connection``; the
read pool runs each one in its connection's thread in a single hop. SQLite builds the
JSON of every record (``json_object``), so Python only joins finished texts.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

CHUNK_ROWS = 2000


class RecordNotFound(Exception):
    """The campaign or employee does not exist for this company."""


@dataclass(frozen=True, slots=True)
class Paging:
    """A requested page; ``total`` is a count already known for this data token."""

    page: int
    per_page: int
    known_token: str | None = None
    known_total: int | None = None

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


@dataclass(slots=True)
class Rows:
    """UTF-8 JSON of the records read so far, from one consistent snapshot.

    ``cursor`` is open (and the read transaction with it) while more rows may follow;
    :func:`next_rows` reads them and ends the transaction after the last one.
    """

    token: str
    texts: list[bytes]
    total: int | None = None
    cursor: sqlite3.Cursor | None = None


def begin(conn: sqlite3.Connection) -> str:
    """Open a read transaction and return the data token it sees."""
    conn.execute("BEGIN")
    return data_token(conn)


def data_token(conn: sqlite3.Connection) -> str:
    """The token that changes with every committed load (ETags are made from it)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'data_token'").fetchone()
    return str(row[0]) if row else ""


def finish(conn: sqlite3.Connection) -> None:
    """End the read transaction, if one is open."""
    if conn.in_transaction:
        conn.execute("COMMIT")


@dataclass(frozen=True, slots=True)
class Listing:
    """One listing query: the JSON of a record, where rows come from, and their order.

    ``counted_from`` is the cheapest FROM/WHERE that counts the same rows (it joins only
    what the filters need and builds no JSON).
    """

    record_json: str
    rows_from: str
    counted_from: str
    order_by: str
    params: list[Any]

    def select(self) -> str:
        """One record's UTF-8 JSON a row, in the contract's order.

        As a BLOB the text reaches Python as bytes, ready to send: no decoding and
        encoding again of every record.
        """
        return f"SELECT CAST({self.record_json} AS BLOB) {self.rows_from} ORDER BY {self.order_by}"

    def whole_array(self, limit: bool = False, joined: bool = False) -> str:
        """The array (or its first ``?`` records) built by SQLite in one value.

        This is the benchmark's floor: the least work any server could do for it. By
        default each record goes through ``json_group_array(json(...))``; ``joined``
        concatenates the records' texts instead, the same bytes without re-parsing.
        """
        page = " LIMIT ?" if limit else ""
        array = (
            "'[' || coalesce(group_concat(j, ','), '') || ']'"
            if joined
            else ("json_group_array(json(j))")
        )
        return (
            f"SELECT {array} FROM (SELECT {self.record_json} AS j"
            f" {self.rows_from} ORDER BY {self.order_by}{page})"
        )


class TooLargeForInline(Exception):
    """The result is longer than a probe allows; read it again on a pool thread."""


def list_rows(
    conn: sqlite3.Connection, token: str, listing: Listing, paging: Paging | None, probe: int = 0
) -> Rows:
    """Read a listing: a whole page with its total, or the first chunk of a stream.

    With ``probe``, refuse (TooLargeForInline) an unpaginated result of ``probe`` rows
    or more, so small answers can be read without leaving the event loop.
    Must run inside :func:`begin`.
    """
    params = listing.params
    if paging is not None:
        if paging.known_token == token and paging.known_total is not None:
            total = paging.known_total
        else:
            count_sql = f"SELECT count(*) {listing.counted_from}"
            total = conn.execute(count_sql, params).fetchone()[0]
        texts: list[bytes] = []
        if paging.offset < total:
            page_sql = f"{listing.select()} LIMIT ? OFFSET ?"
            page_params = [*params, paging.per_page, paging.offset]
            texts = [r[0] for r in conn.execute(page_sql, page_params)]
        finish(conn)
        return Rows(token, texts, total)
    cursor = conn.execute(listing.select(), params)
    texts = [r[0] for r in cursor.fetchmany(probe or CHUNK_ROWS)]
    if probe and len(texts) >= probe:
        cursor.close()
        finish(conn)
        raise TooLargeForInline
    if len(texts) < CHUNK_ROWS:
        cursor.close()
        finish(conn)
        return Rows(token, texts)
    return Rows(token, texts, cursor=cursor)


def next_rows(conn: sqlite3.Connection, rows: Rows) -> list[bytes]:
    """The next chunk of a stream; closes the cursor and transaction after the last."""
    assert rows.cursor is not None
    texts = [r[0] for r in rows.cursor.fetchmany(CHUNK_ROWS)]
    if len(texts) < CHUNK_ROWS:
        rows.cursor.close()
        rows.cursor = None
        finish(conn)
    return texts


def next_chunk(conn: sqlite3.Connection, rows: Rows) -> bytes:
    """The next chunk as the bytes to send (``,{...},{...}``), built off the event loop."""
    texts = next_rows(conn, rows)
    return b"," + b",".join(texts) if texts else b""


def placeholders(values: list[Any]) -> str:
    """``?, ?, ?`` for an IN list of bound parameters."""
    return ", ".join("?" for _ in values)


def close_rows(conn: sqlite3.Connection, rows: Rows) -> None:
    """Abandon a stream early (the client went away): close the cursor, end the read."""
    if rows.cursor is not None:
        rows.cursor.close()
        rows.cursor = None
    finish(conn)
