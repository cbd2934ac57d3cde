"""A listing's statements for PostgreSQL: its JSON from :mod:`.records`, ``$n`` parameters."""

from __future__ import annotations

import re

from ..listings import Guard, Listing
from ..schema import TOKEN
from ..store import NotAvailable
from .records import RECORDS

# SQLite's index hint (the feed's): PostgreSQL plans without it.
INDEXED_BY = re.compile(r" INDEXED BY \w+")


class NotPorted(NotAvailable):
    """A listing whose record JSON has no PostgreSQL counterpart (tests/test_pg_identity.py
    fails for any such record of app/data: this is a guard, not a plan)."""


def numbered(sql: str) -> str:
    """SQLite's ``?`` parameters as PostgreSQL's ``$1, $2, ...`` (quoted text left alone)."""
    out: list[str] = []
    quoted = False
    n = 0
    for char in sql:
        if char == "'":
            quoted = not quoted
        if char == "?" and not quoted:
            n += 1
            out.append(f"${n}")
        else:
            out.append(char)
    return "".join(out)


def record_json(listing: Listing) -> str:
    """The JSON of the listing's record for PostgreSQL; NotPorted when there is none."""
    if listing.record.name not in RECORDS:
        raise NotPorted("this listing has no PostgreSQL record JSON")
    return RECORDS[listing.record.name]


def rows_from(listing: Listing) -> str:
    """The listing's FROM/WHERE without SQLite's index hints."""
    return INDEXED_BY.sub("", listing.rows_from)


def select(listing: Listing) -> str:
    """One record's UTF-8 JSON a row (bytea reaches Python as bytes, ready to send)."""
    return numbered(
        f"SELECT convert_to(({record_json(listing)})::text, 'UTF8')"
        f" {rows_from(listing)} ORDER BY {listing.order_by}"
    )


def select_keyed(listing: Listing) -> str:
    """The first ``$n`` records, each with its position (``listing.key``) after its JSON."""
    return numbered(
        f"SELECT convert_to(({record_json(listing)})::text, 'UTF8'), {listing.key}"
        f" {rows_from(listing)} ORDER BY {listing.order_by} LIMIT ?"
    )


def page(listing: Listing) -> str:
    """:func:`select` and ``LIMIT``, ``OFFSET`` after ``listing.select_params``."""
    n = len(listing.select_params)
    return f"{select(listing)} LIMIT ${n + 1} OFFSET ${n + 2}"


def count(listing: Listing) -> str:
    return numbered(INDEXED_BY.sub("", listing.count()))


def guard(guard: Guard) -> str:
    return numbered(guard.sql)


def if_owned(listing: Listing, sql: str, otherwise: str) -> str:
    """``sql`` (a subquery) only when the company owns the listing's record.

    The count and the records of another company's record must not be read: they would
    walk every row of it (every event of its campaign, none kept), so its 404 would take
    as long as the record is large where a free id's takes no time, and the time would
    tell them apart (contract.md 1). PostgreSQL runs a CASE's uncorrelated subquery only
    when the CASE reaches it (SQLite's twin checks the guard first: ``listings._short``).
    """
    if listing.guard is None:
        return sql
    return f"CASE WHEN {listing.ownership()} THEN {sql} ELSE {otherwise} END"


def one_statement(listing: Listing, count: bool, window: str) -> tuple[str, tuple[object, ...]]:
    """The data token, the ownership, the total (if asked) and the records in ``window``.

    One statement sees one snapshot, even outside a transaction, and costs one round
    trip: what a short read needs. ``window`` is ``LIMIT ?`` or ``LIMIT ? OFFSET ?``
    (the caller adds those parameters). The parameters follow the text: the guard's,
    the count's (the guard's again, then the listing's, without the record's), then the
    records' (the guard's again, then the record's own, such as today's date, before
    the listing's).
    """
    total = "NULL::bigint"
    if count:
        total = if_owned(listing, f"({INDEXED_BY.sub('', listing.count())})", "NULL::bigint")
    rows = if_owned(
        listing,
        f"ARRAY(SELECT convert_to(({record_json(listing)})::text, 'UTF8')"
        f" {rows_from(listing)} ORDER BY {listing.order_by} {window})",
        "ARRAY[]::bytea[]",
    )
    statement = numbered(f"SELECT ({TOKEN}), {listing.ownership()}, {total}, {rows}")
    guarded = listing.guard_params
    counted = (*guarded, *listing.count_params) if count else ()
    return statement, (*guarded, *counted, *guarded, *listing.select_params)
