"""Listings as values, and the synchronous reads that turn one into records.

A :class:`Listing` carries everything a query needs: its record, named (SQLite builds
the record's JSON, so Python only joins finished texts; PostgreSQL keeps its own JSON
by the record's name), where rows come from, their order, the bound parameters and the
ownership guard. Each read below sees one snapshot, so a response never mixes data
from two loads: a page or a short listing is one statement, a window or a stream opens
a read transaction (a stream closes it in :func:`close_stream`). The pool
(:mod:`app.data.pool`) decides where a read runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .schema import TOKEN, data_token

MAX_OFFSET = 2**63 - 1

CHUNK_ROWS = 2000
# A heavy listing whose records are each a few rows of the writers' summaries (campaigns,
# courses) still reads a page of at most this many on the event loop: in-process, about
# 32 µs a campaign and 120 µs a course with 20,000 or 200,000 employees, so at most about
# 3 and 12 ms, what a page of 1,000 inscriptions takes.
SUMMARY_RECORDS_INLINE = 100

Params = tuple[Any, ...]
# Turns a chunk of record texts into the bytes to send; ``first`` tells the first chunk.
ChunkEncoder = Callable[[list[bytes], bool], bytes]


class RecordNotFound(Exception):
    """The campaign or employee does not exist for this company."""


@dataclass(frozen=True, slots=True)
class Guard:
    """The ownership check: a query that returns a row only when the company owns the record.

    Another company's id and a free id take the same path: nobody can tell them apart.
    """

    sql: str
    params: Params


def owned(table: str, record_id: int, company_id: int) -> Guard:
    """The guard of a campaign or employee id: found only when the company owns it."""
    return Guard(f"SELECT 1 FROM {table} WHERE id = ? AND company_id = ?", (record_id, company_id))


@dataclass(frozen=True, slots=True)
class Record:
    """What a listing's rows are: a record's name (``"campaign_event"``) and the JSON
    SQLite builds for one. Each store keeps its JSON by the name (PostgreSQL's:
    app/data/pg/records.py)."""

    name: str
    json: str


@dataclass(frozen=True, slots=True)
class Listing:
    """One listing query: its record, where rows come from, their order.

    ``counted_from`` is the cheapest FROM/WHERE that counts the same rows (it joins only
    what the filters need and builds no JSON). ``params`` belong to the FROM/WHERE (both
    of them); ``record_params`` to the record's JSON (today's date, for a report that
    depends on it), bound before them in the statements that build records. A
    ``heavy`` listing may take long even for a few records: each aggregates many rows
    (the reports), or they may lie far apart among the rows it walks (a feed: another
    company's rows, or rows its filters leave out). ``export`` is the record of a flat
    export (CSV), when it differs: the JSON record and the ids that tell its rows apart
    once files are merged; ``lines`` the same rows as CSV lines the database writes
    (:mod:`.csv_lines`).
    ``summed`` is a statement that reads the total from a summary the writers keep
    (with its own ``summed_params``), when the filters allow one: then no count runs.
    ``export_from`` is the FROM/WHERE of the exported records and lines, when their
    plan differs (same rows, same parameters). A heavy listing's page of at most
    ``inline_records`` records is still a short read (its records cost a bounded amount
    each: the writers' summaries); 0 for none.
    """

    record: Record
    rows_from: str
    counted_from: str
    order_by: str
    params: Params
    guard: Guard | None = None
    record_params: Params = ()
    heavy: bool = False
    # The columns of a record's position, for keyset paging (the event feed).
    key: str = ""
    export: Record | None = None
    lines: Record | None = None
    summed: str = ""
    summed_params: Params = ()
    export_from: str = ""
    inline_records: int = 0

    def exported(self) -> Listing:
        """The same rows with the records of a flat export (itself when they are the same)."""
        if self.export is None:
            return self
        return replace(self, record=self.export, export=None, rows_from=self._export_from())

    def csv_lines(self) -> Listing | None:
        """The exported rows as the CSV lines the database builds, when the record has them."""
        if self.lines is None:
            return None
        return replace(self, record=self.lines, export=None, rows_from=self._export_from())

    def _export_from(self) -> str:
        return self.export_from or self.rows_from

    @property
    def select_params(self) -> Params:
        """The parameters of :meth:`select` (then ``LIMIT ?``, ``OFFSET ?``)."""
        return (*self.record_params, *self.params)

    def select(self) -> str:
        """One record's UTF-8 JSON a row, in the contract's order.

        As a BLOB the text reaches Python as bytes, ready to send: no decoding and
        encoding again of every record.
        """
        return f"SELECT CAST({self.record.json} AS BLOB) {self.rows_from} ORDER BY {self.order_by}"

    def select_keyed(self) -> str:
        """The first ``?`` records, each with its position after its JSON."""
        record = f"CAST({self.record.json} AS BLOB), {self.key}"
        return f"SELECT {record} {self.rows_from} ORDER BY {self.order_by} LIMIT ?"

    def light(self, records: int) -> bool:
        """Whether ``records`` of its records are a short read wherever they lie: not
        heavy, or few enough of a heavy listing's bounded ones (``inline_records``)."""
        return not self.heavy or records <= self.inline_records

    def ownership(self) -> str:
        """A short read's check that the company owns the record (true without a guard)."""
        return f"EXISTS ({self.guard.sql})" if self.guard is not None else "true"

    @property
    def guard_params(self) -> Params:
        """The guard's parameters (none without a guard)."""
        return self.guard.params if self.guard is not None else ()

    def short_params(self, count: bool) -> Params:
        """The parameters of SQLite's short read (:func:`_short`), in its text's order:
        the guard's, the count's (if counted), the records' (their bounds follow)."""
        return (*self.guard_params, *(self.count_params if count else ()), *self.select_params)

    def count(self) -> str:
        """The number of records, without building any JSON (from a summary if it can)."""
        return self.summed or f"SELECT count(*) {self.counted_from}"

    @property
    def count_params(self) -> Params:
        """The parameters of :meth:`count`."""
        return self.summed_params if self.summed else self.params


@dataclass(frozen=True, slots=True)
class Paging:
    """A requested page."""

    page: int
    per_page: int

    @property
    def offset(self) -> int:
        """Rows before the page, at most 2^63-1 (SQL's widest integer): no listing holds
        that many, so a page beyond it is past the end and empty, as any page past it."""
        return min((self.page - 1) * self.per_page, MAX_OFFSET)


@dataclass(frozen=True, slots=True)
class Records:
    """A short listing read whole from one snapshot."""

    token: str
    texts: list[bytes]


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing and the listing's total, from one snapshot."""

    token: str
    texts: list[bytes]
    total: int


@dataclass(frozen=True, slots=True)
class Window:
    """Records after a position, from one snapshot, and the position of the last one."""

    token: str
    texts: list[bytes]
    last: tuple[int, ...] | None


@dataclass(slots=True)
class StreamState:
    """An open read of a long listing: its snapshot's token and cursor."""

    token: str
    cursor: sqlite3.Cursor | None
    first: list[bytes] = field(default_factory=list)


def check_guard(conn: sqlite3.Connection, guard: Guard | None) -> None:
    """Raise RecordNotFound unless the company owns the record (no guard: nothing to own)."""
    if guard is not None and conn.execute(guard.sql, guard.params).fetchone() is None:
        raise RecordNotFound


def _begin(conn: sqlite3.Connection, guard: Guard | None) -> str:
    """Open a read transaction, check ownership, and return the snapshot's data token."""
    conn.execute("BEGIN")
    try:
        token = data_token(conn)
        check_guard(conn, guard)
    except BaseException:
        _finish(conn)
        raise
    return token


def _finish(conn: sqlite3.Connection) -> None:
    """End the read transaction, if one is open."""
    if conn.in_transaction:
        conn.execute("COMMIT")


def _short(
    conn: sqlite3.Connection, listing: Listing, count: bool, window: str, *bounds: int
) -> tuple[str, int | None, list[bytes]]:
    """Token, total (if ``count``) and the records in ``window`` (``LIMIT ?`` or
    ``LIMIT ? OFFSET ?``, ``bounds`` their values); RecordNotFound unless owned.

    One statement (after the guard's, for a record of the company's own): its first row
    holds the token, the ownership and the total, the records follow. SQLite reads a
    statement from one snapshot, so a short read needs no BEGIN and COMMIT around it
    (PostgreSQL's twin: ``sql.one_statement``).
    """
    # Another company's id is refused before the statement, in one of its own: the
    # statement reads its count and records whatever the guard says, so it would walk
    # every row of that record (every event of another company's campaign, none kept)
    # and its 404 would take as long as the record is large, where a free id's takes no
    # time: the time would tell them apart (contract.md 1). The statement checks the
    # guard again, in its own snapshot.
    check_guard(conn, listing.guard)
    total = f"({listing.count()})" if count else "NULL"
    statement = (
        f"SELECT ({TOKEN}), {listing.ownership()}, {total} UNION ALL"
        f" SELECT *, NULL, NULL FROM ({listing.select()} {window})"
    )
    params = (*listing.short_params(count), *bounds)
    (token, is_owned, found), *rows = conn.execute(statement, params).fetchall()
    if not is_owned:
        raise RecordNotFound
    return token or "", found, [row[0] for row in rows]


def read_page(
    conn: sqlite3.Connection, listing: Listing, paging: Paging, known: tuple[str, int] | None
) -> Page:
    """One page and the total: a count unless ``known`` holds this snapshot's total (a
    load that came in between makes it read again, with the count)."""
    bounds = (paging.per_page, paging.offset)
    if known is not None:
        token, _, texts = _short(conn, listing, False, "LIMIT ? OFFSET ?", *bounds)
        if token == known[0]:
            return Page(token, texts, known[1])
    token, total, texts = _short(conn, listing, True, "LIMIT ? OFFSET ?", *bounds)
    return Page(token, texts, int(total or 0))


def read_window(conn: sqlite3.Connection, listing: Listing, limit: int) -> Window:
    """Up to ``limit`` records in one statement (the listing holds the position condition)."""
    token = _begin(conn, listing.guard)
    try:
        rows = conn.execute(listing.select_keyed(), (*listing.select_params, limit)).fetchall()
        return Window(token, [row[0] for row in rows], tuple(rows[-1][1:]) if rows else None)
    finally:
        _finish(conn)


def read_small(conn: sqlite3.Connection, listing: Listing, below: int) -> Records | None:
    """The whole result when it holds fewer than ``below`` records, else None.

    Reading stops at ``below`` records, so finding out costs no more than that.
    """
    token, _, texts = _short(conn, listing, False, "LIMIT ?", below)
    return Records(token, texts) if len(texts) < below else None


def read_one(conn: sqlite3.Connection, listing: Listing) -> Records:
    """The single record of a listing; RecordNotFound when the guard or the query finds none."""
    records = read_small(conn, listing, 2)
    if records is None or len(records.texts) != 1:
        raise RecordNotFound
    return records


def open_stream(conn: sqlite3.Connection, listing: Listing) -> StreamState:
    """Start reading a long listing: the snapshot stays open until the last chunk."""
    token = _begin(conn, listing.guard)
    try:
        cursor = conn.execute(listing.select(), listing.select_params)
        state = StreamState(token, cursor)
        state.first = next_records(conn, state)
        return state
    except BaseException:
        _finish(conn)
        raise


def next_records(conn: sqlite3.Connection, state: StreamState) -> list[bytes]:
    """The next chunk of records; the cursor and the snapshot close after the last."""
    if state.cursor is None:
        return []
    texts = [row[0] for row in state.cursor.fetchmany(CHUNK_ROWS)]
    if len(texts) < CHUNK_ROWS:
        close_stream(conn, state)
    return texts


def close_stream(conn: sqlite3.Connection, state: StreamState) -> None:
    """End a stream (done, or abandoned because the client went away)."""
    if state.cursor is not None:
        state.cursor.close()
        state.cursor = None
    _finish(conn)


def placeholders(values: list[Any] | tuple[Any, ...]) -> str:
    """``?, ?, ?`` for an IN list of bound parameters."""
    return ", ".join("?" for _ in values)
