"""Formats of a listing (contract.md 14): which one a request asks for, and how each lays
records out.

``format=json|csv|ndjson`` decides; without it, the ``Accept`` header does (q-values
honoured, the most specific media range deciding each type's quality, ties going to the
range the client listed first and then to JSON); no header, an empty one and ``*/*`` mean
JSON, and so does a header in which no media range can be read. A request that allows
none of the formats offered gets 406.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from aiohttp import hdrs, web
from marshmallow import Schema

from ..data.listings import ChunkEncoder
from .csv_layout import layout_of
from .errors import ApiError
from .schemas import exported_rows


class NotAcceptable(ApiError):
    status = 406


@dataclass(frozen=True)
class Format:
    """One format: its name in ``format=`` and its media type."""

    name: str
    media_type: str


JSON = Format("json", "application/json")
CSV = Format("csv", "text/csv")
NDJSON = Format("ndjson", "application/x-ndjson")
LISTING_FORMATS = (JSON, CSV, NDJSON)  # in the order ties are settled
FORMAT_NAMES = tuple(f.name for f in LISTING_FORMATS)


@dataclass(frozen=True)
class Body:
    """How a format lays out a listing: what opens and closes it, how a chunk encodes."""

    format: Format
    opening: bytes
    encode: ChunkEncoder
    closing: bytes

    def whole(self, texts: list[bytes]) -> bytes:
        """A body read whole."""
        return self.opening + self.encode(texts, True) + self.closing


def join_lines(texts: list[bytes], first: bool) -> bytes:
    """CSV lines the database wrote (:mod:`app.data.csv_lines`), each ending in CRLF."""
    return b"".join(texts)


def encode_json_chunk(texts: list[bytes], first: bool) -> bytes:
    """Records joined as part of a JSON array (the opening bracket comes separately)."""
    if not texts:
        return b""
    joined = b",".join(texts)
    return joined if first else b"," + joined


def encode_ndjson_chunk(texts: list[bytes], first: bool) -> bytes:
    """One record a line, each ended by a newline (SQLite's JSON holds no raw newline)."""
    return b"\n".join(texts) + b"\n" if texts else b""


class Offer:
    """The formats an answer offers, in the order ties go to, each with its body layout.

    ``one_object``: a single-object report, whose 406 points to its list for CSV or NDJSON.
    """

    def __init__(self, *bodies: Body, one_object: bool = False) -> None:
        self.formats = tuple(body.format for body in bodies)
        self._bodies = {body.format.name: body for body in bodies}
        self.one_object = one_object

    def negotiate(self, request: web.Request) -> Body:
        """The body layout of the format the request asks for; 406 when none fits."""
        try:
            return self._bodies[negotiate(request, self.formats).name]
        except NotAcceptable as refusal:
            if not self.one_object:
                raise
            listing = request.path.rsplit("/", 1)[0]
            note = f"This answer is one object, in JSON only; the list {listing} answers in "
            note += "CSV and NDJSON too (format=csv or format=ndjson)."
            raise NotAcceptable(f"{refusal.detail} {note}") from None


JSON_ARRAY = Body(JSON, b"[", encode_json_chunk, b"]")
NDJSON_LINES = Body(NDJSON, b"", encode_ndjson_chunk, b"")
# The one-object answers: the record's own JSON text, nothing around it.
RECORD = Offer(Body(JSON, b"", encode_json_chunk, b""), one_object=True)


def listing_offer(schema: type[Schema]) -> Offer:
    """JSON, CSV and NDJSON of records of ``schema``: the CSV columns come from it.

    Each listing view makes its own once, so CSV needs nothing from the docs set-up.
    """
    layout = layout_of(exported_rows(schema))
    return Offer(JSON_ARRAY, Body(CSV, layout.header(), layout.encode, b""), NDJSON_LINES)


def negotiate(request: web.Request, offered: Sequence[Format] = LISTING_FORMATS) -> Format:
    """The format ``format=`` names, else the one ``Accept`` prefers; 406 when none fits.

    The query string is decoded only when it may name a format: spelled out, or hidden
    in percent-escapes.
    """
    raw_query = request.rel_url.raw_query_string
    named = None
    if "format" in raw_query or "%" in raw_query:
        named = request.query.get("format")
    if named is not None:
        for fmt in offered:
            if fmt.name == named.lower():
                return fmt
        raise NotAcceptable(f"format={named} is not available here; available: {_names(offered)}.")
    accept = accept_header(request)
    chosen = preferred(accept, tuple(offered)) if accept else offered[0]
    if chosen is None:
        raise NotAcceptable(f"Accept allows none of the media types here: {_types(offered)}.")
    return chosen


def accept_header(request: web.BaseRequest) -> str:
    """The request's Accept ranges, every line of it as if joined by commas (RFC 9110 5.3).

    Reading only the first line would answer ``Accept: application/xml`` followed by
    ``Accept: text/csv`` with a 406, and let a first line's lower q-value win over a later
    line's preferred type.
    """
    return ",".join(request.headers.getall(hdrs.ACCEPT, ()))


@functools.lru_cache(maxsize=256)  # clients send a handful of distinct Accept values
def preferred(header: str, offered: tuple[Format, ...]) -> Format | None:
    """The offered format an Accept header ranks best (RFC 9110 12.5.1), None if none."""
    ranges = _ranges(header)
    if not ranges:
        return offered[0]
    best: tuple[float, int, int] | None = None
    chosen = None
    for fmt in offered:
        kind, sub = fmt.media_type.split("/")
        matches = [
            (specificity, quality, -index)
            for index, (r_kind, r_sub, quality) in enumerate(ranges)
            if (specificity := _specificity(kind, sub, r_kind, r_sub)) >= 0
        ]
        if not matches:
            continue
        top = max(m[0] for m in matches)
        specificity, quality, order = max(m for m in matches if m[0] == top)
        rank = (quality, specificity, order)
        if quality > 0 and (best is None or rank > best):
            best, chosen = rank, fmt
    return chosen


def _specificity(kind: str, sub: str, r_kind: str, r_sub: str) -> int:
    """How closely a media range matches a type: 2 exact, 1 ``type/*``, 0 ``*/*``, -1 not."""
    if r_kind == kind and r_sub == sub:
        return 2
    if r_kind == kind and r_sub == "*":
        return 1
    return 0 if (r_kind, r_sub) == ("*", "*") else -1


def _ranges(header: str) -> list[tuple[str, str, float]]:
    """The media ranges of an Accept header with their q-values; unreadable ones dropped."""
    ranges = []
    for part in header.split(","):
        media, *params = (item.strip() for item in part.split(";"))
        kind, slash, sub = media.lower().partition("/")
        if not slash or not kind or not sub:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = -1.0
        if 0.0 <= quality <= 1.0:
            ranges.append((kind, sub, quality))
    return ranges


def _names(offered: Sequence[Format]) -> str:
    return ", ".join(f.name for f in offered)


def _types(offered: Sequence[Format]) -> str:
    return ", ".join(f.media_type for f in offered)
