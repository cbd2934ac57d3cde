"""Feed cursors: a position in the feed, opaque to clients and tamper-evident (contract.md 13).

A cursor is URL-safe base64 of the position (seq and id, 8 bytes each) and an HMAC-SHA256
tag of it, keyed with the database's own secret (meta ``cursor_secret``) and bound to the
company and the normalised filter set. Another company's cursor, one made for other
filters, one edited by hand or one from another database fails the tag: 400. The same
position always gives the same text, so a client that has caught up keeps its cursor,
its next link and its ETag until a load writes something it would receive.

The tag also covers the position's feed mark (the random mark of the load that wrote it,
:data:`app.data.schema.FEED_MARK_START`): a copy of the database restored from before that load
lacks the mark or, after new loads, has another, so the cursor is refused (400) instead
of silently skipping the events the restored database writes again. A position past the
end of the sequence is refused as an altered cursor is, with the same words: the end of
the sequence, which every company's loads move, is no company's to probe.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..data.feed import START, Position
from ..data.fields import MAX_ID
from .errors import BadRequest

_POSITION = struct.Struct(">QQ")
_TAG_BYTES = 16
_LENGTH = 43  # base64 of 32 bytes, without padding
_DOMAIN = b"reporting-api feed cursor v1"


# The feed mark of a seq, from the database; None when its sequence never reached it.
MarkOf = Callable[[int], Awaitable[str | None]]


class CursorSigner:
    """Makes and checks the cursors of one database (one per app)."""

    def __init__(self, secret: bytes, mark_of: MarkOf) -> None:
        self._secret = secret
        self._mark_of = mark_of

    def _tag(self, company_id: int, scope: str, payload: bytes, mark: str) -> bytes:
        # The empty mark (positions before the marks began) signs as cursors always did.
        parts = [_DOMAIN, str(company_id).encode(), scope.encode(), payload]
        message = b"|".join(parts + ([mark.encode()] if mark else []))
        return hmac.digest(self._secret, message, hashlib.sha256)[:_TAG_BYTES]

    async def sign(self, company_id: int, scope: str, position: Position) -> str:
        """The cursor text of ``position`` for this company and filter set."""
        payload = _POSITION.pack(*position)
        mark = await self._mark_of(position[0]) or ""
        return _text(payload + self._tag(company_id, scope, payload, mark))

    async def open(self, company_id: int, scope: str, text: str) -> Position:
        """The position a cursor holds; 400 unless it was made here for this company and
        scope, from the database as it is (not a copy restored from before it was made)."""
        try:
            raw = base64.urlsafe_b64decode(text + "=") if len(text) == _LENGTH else b""
        except (ValueError, binascii.Error):
            raw = b""
        # Only the one spelling this class writes (base64 would skip stray characters).
        if len(raw) != _POSITION.size + _TAG_BYTES or _text(raw) != text:
            raise _invalid("Not a cursor this feed gave.")
        payload, tag = raw[: _POSITION.size], raw[_POSITION.size :]
        seq, event_id = _POSITION.unpack(payload)
        if seq > MAX_ID or event_id > MAX_ID:
            raise _invalid("Not a cursor this feed gave.")
        # A position past the end of the sequence has no mark: a cursor given before a
        # restore, or one edited by hand. Both get the refusal of a bad tag (which says
        # restore too), and the tag is computed all the same: were they told apart, any
        # company could learn by halving how far the sequence, which every company's
        # loads move, has gone (when others load, and how much).
        mark = await self._mark_of(seq)
        expected = self._tag(company_id, scope, payload, mark or "")
        if mark is None or not hmac.compare_digest(tag, expected):
            raise _invalid(
                "This cursor was not given for this key's company and these filters, or the"
                " database was restored from an earlier copy since (or it was altered)."
                " Start again without a cursor, or keep the filters."
            )
        return seq, event_id


def _text(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _invalid(message: str) -> BadRequest:
    return BadRequest("Invalid parameter(s): cursor.", errors={"cursor": [message]})


@dataclass(frozen=True)
class CursorPage:
    """A feed request: the position it reads after, how many records, and its next cursor."""

    after: Position
    limit: int
    company_id: int
    scope: str
    signer: CursorSigner

    async def next_cursor(self, last: tuple[int, ...] | None) -> str:
        """The cursor after the last record sent, or this one's position on an empty page."""
        position = (last[0], last[1]) if last else self.after
        return await self.signer.sign(self.company_id, self.scope, position)


async def cursor_page(
    signer: CursorSigner, company_id: int, scope: str, given: str | None, limit: int
) -> CursorPage:
    """A feed request after the position ``given`` holds (400 unless it was made here for
    this company and scope), or from the start."""
    after = START if given is None else await signer.open(company_id, scope, given)
    return CursorPage(after, limit, company_id, scope, signer)
