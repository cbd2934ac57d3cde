"""The event feed: every event of a company in the order loads wrote them (contract.md 13).

Each write of an event by a load gives it the next value of the change sequence
(``campaign_events.seq``), so a position ``(seq, id)`` splits the feed in two for good:
every event written later lands after it, whatever its id. Events carry no company:
the feed walks the ``(seq, id)`` index and keeps the rows whose campaign is the
company's (a primary-key lookup each), which reads the index in order and never sorts.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from .automation import kept_events
from .listings import Listing, Record, placeholders
from .schema import DatabaseError

# A position in the feed: the (seq, id) of the last event a client received.
Position = tuple[int, int]
START: Position = (0, 0)  # before every event (ids start at 1)

# JSON of one event, keys in the order of contract.md 13.
FEED_EVENT = Record(
    "feed_event",
    """json_object(
    'id', ev.id, 'type', ev.type, 'timestamp', ev.timestamp,
    'with_captcha', json(iif(ev.with_captcha, 'true', 'false')),
    'ip', ev.ip, 'user_agent', ev.user_agent,
    'campaign', json_object('id', c.id, 'title', c.title, 'launch_date', c.launch_date),
    'victim', json_object('id', e.id, 'first_name', e.first_name,
        'last_name', e.last_name, 'email', e.email, 'department', e.department),
    'automation', json_object('verdict', ev.verdict, 'reasons', json(ev.reasons)))""",
)


@dataclass(frozen=True, slots=True)
class FeedFilters:
    """The feed's filters, normalised: the same set always reads (and signs) the same."""

    types: tuple[str, ...] = ()
    without_captcha: bool = False
    from_date: dt.date | None = None
    to_date: dt.date | None = None
    automation: str = "include"  # filter[automation]

    @classmethod
    def of(
        cls,
        types: Sequence[str] = (),
        without_captcha: bool = False,
        from_date: dt.date | None = None,
        to_date: dt.date | None = None,
        automation: str = "include",
    ) -> FeedFilters:
        """Filters with the types sorted and each once (``click,open`` = ``open,click,open``)."""
        return cls(tuple(sorted(set(types))), without_captcha, from_date, to_date, automation)

    def scope(self) -> str:
        """A canonical text of the filter set, which a cursor is bound to.

        ``include`` adds nothing: the cursors made before filter[automation] existed
        stay valid, and are the same text.
        """
        dates = [d.isoformat() if d else "" for d in (self.from_date, self.to_date)]
        captcha = "false" if self.without_captcha else ""
        scope = f"type={','.join(self.types)};with_captcha={captcha};dates={'..'.join(dates)}"
        return scope if self.automation == "include" else f"{scope};automation={self.automation}"


def feed_listing(company_id: int, filters: FeedFilters, after: Position) -> Listing:
    """The company's events after ``after`` matching the filters, by (seq, id)."""
    # The employee's company is checked too, as the events listings do: no join may
    # reach another tenant's row, whatever was written to the tables.
    where = ["c.company_id = ?", "e.company_id = c.company_id", "(ev.seq, ev.id) > (?, ?)"]
    params: list[object] = [company_id, *after]
    if filters.types:
        where.append(f"ev.type IN ({placeholders(filters.types)})")
        params.extend(filters.types)
    if filters.without_captcha:
        where.append("ev.with_captcha = 0")
    if kept_events(filters.automation):
        where.append(kept_events(filters.automation))
    # Timestamps are UTC text 'YYYY-MM-DDTHH:MM:SSZ': a date compares as its prefix.
    if filters.from_date is not None:
        where.append("ev.timestamp >= ?")
        params.append(filters.from_date.isoformat())
    if filters.to_date is not None:
        # The day's last second, not the next day: 9999-12-31 has no next day.
        where.append("ev.timestamp <= ?")
        params.append(f"{filters.to_date.isoformat()}T23:59:59Z")
    # The feed walks the sequence index and stops after ``limit`` rows; left to itself,
    # SQLite may prefer a per-campaign index and sort all of the company's events.
    rows_from = (
        "FROM campaign_events ev INDEXED BY campaign_events_by_seq"
        " JOIN campaigns c ON c.id = ev.campaign_id"
        " JOIN employees e ON e.id = ev.employee_id"
        f" WHERE {' AND '.join(where)}"
    )
    order = "ev.seq, ev.id"
    # Heavy: every company's events share the sequence index, so a window may pass over
    # many of another company's (or many its filters leave out) before it finds its own.
    return Listing(FEED_EVENT, rows_from, rows_from, order, tuple(params), key=order, heavy=True)


# The mark of the first change of the change sequence at or after a seq (the meta rows
# ``feed_mark:<seq>`` the schema's trigger writes); none when the seq is past the sequence.
FEED_MARK = "SELECT value FROM meta WHERE key >= ? AND key < 'feed_mark;' ORDER BY key LIMIT 1"


def feed_mark_key(seq: int) -> str:
    """The meta key a position's mark is looked up from (keys sort as their seqs)."""
    return f"feed_mark:{seq:020d}"


def feed_mark(conn: sqlite3.Connection, seq: int) -> str | None:
    """The mark a cursor at ``seq`` is signed with; None if the sequence never reached it."""
    row = conn.execute(FEED_MARK, (feed_mark_key(seq),)).fetchone()
    return None if row is None else str(row[0])


def cursor_secret(conn: sqlite3.Connection) -> bytes:
    """The database's secret for signing feed cursors (made when the schema was created)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'cursor_secret'").fetchone()
    if row is None or not row[0]:
        raise DatabaseError("the database has no cursor secret (meta cursor_secret)")
    return bytes.fromhex(str(row[0]))
