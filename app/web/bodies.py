"""Writing a listing's body in its format: read whole, or streamed chunk by chunk.

Either way gzip applies when the client's Accept-Encoding accepts it (read here, and by
the docs' fixed bodies; a whole body only past 1 KiB), and
a streamed body is written under the write timeout: a client that stops reading is cut
off instead of holding its snapshot and pooled connection.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable

from aiohttp import HttpVersion11, hdrs, web

from ..data.listings import Records
from ..data.store import RecordStream
from ..keys import CONFIG
from .errors import reset
from .formats import Body, Format

GZIP_MIN_BYTES = 1024


def utf8(fmt: Format) -> str:
    """The Content-Type header of a format's body, as one string: aiohttp's
    ``content_type`` and ``charset`` setters parse the header again on every response."""
    return f"{fmt.media_type}; charset=utf-8"


def finish(request: web.Request, response: web.Response, fmt: Format) -> web.Response:
    """Content type of the format, UTF-8, and gzip for a body over 1 KiB."""
    response.headers[hdrs.CONTENT_TYPE] = utf8(fmt)
    assert isinstance(response.body, bytes)
    if len(response.body) > GZIP_MIN_BYTES and accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
    return response


async def array_response(
    request: web.Request,
    body: Body,
    result: Records | RecordStream,
    headers: dict[str, str],
    whole: Callable[[list[bytes], dict[str, str]], web.Response],
) -> web.StreamResponse:
    """A whole listing: one body (``whole`` makes it) when the store read it all, else
    chunk by chunk."""
    if isinstance(result, Records):
        return whole(result.texts, headers)
    return await stream_response(request, body, result, headers)


async def stream_response(
    request: web.Request, body: Body, stream: RecordStream, headers: dict[str, str]
) -> web.StreamResponse:
    """A long listing sent chunk by chunk while the pool thread reads and encodes the next."""
    response = web.StreamResponse(headers=headers)
    response.headers[hdrs.CONTENT_TYPE] = utf8(body.format)
    gzip = accepts_gzip(request)
    if request.method == hdrs.METH_HEAD:  # GET's headers, and no body, not even gzip's end
        if gzip:
            response.headers[hdrs.CONTENT_ENCODING] = "gzip"
        await response.prepare(request)
        await response.write_eof()
        return response
    if gzip:
        response.enable_compression(web.ContentCoding.gzip)
    if request.version < HttpVersion11:
        # HTTP/1.0 has no chunks: the close ends the body. aiohttp says so in the headers
        # but keeps the connection alive, so the next answer would run into this one.
        response.force_close()
    await response.prepare(request)
    timeout = request.app[CONFIG].write_timeout
    await send(request, response, body.opening + stream.first, timeout)
    async for chunk in stream.rest():
        await send(request, response, chunk, timeout)
    if body.closing:
        await send(request, response, body.closing, timeout)
    await response.write_eof()
    return response


async def send(
    request: web.Request, response: web.StreamResponse, chunk: bytes, timeout: float
) -> None:
    """Write a chunk; a client that has not taken it after ``timeout`` seconds is cut off.

    Without this, a client that stops reading would hold its snapshot (pinning the
    WAL) and a pooled connection for as long as it keeps the socket open.
    """
    try:
        await asyncio.wait_for(response.write(chunk), timeout)
    except TimeoutError:
        if request.transport is not None:
            reset(request.transport)
        raise ConnectionResetError("the client stopped reading") from None


_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")  # RFC 9110 12.4.2


def coding_weights(accept_encoding: str) -> dict[str, float]:
    """Each content coding of an Accept-Encoding value and its weight, lower-cased.

    A malformed weight counts as 0 (not acceptable): answering without a coding is
    always safe, guessing one the client refused is not.
    """
    weights: dict[str, float] = {}
    for element in accept_encoding.split(","):
        coding, *params = (part.strip() for part in element.split(";"))
        if not coding:
            continue
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                value = value.strip()
                weight = float(value) if _QVALUE.fullmatch(value) else 0.0
        weights[coding.lower()] = weight
    return weights


def accepts_gzip(request: web.BaseRequest) -> bool:
    """Whether gzip is acceptable: named (or x-gzip, or covered by ``*``) with q > 0.

    Every Accept-Encoding line counts, as if joined by commas (RFC 9110 5.3).
    """
    return _gzip_acceptable(",".join(request.headers.getall(hdrs.ACCEPT_ENCODING, ())))


@functools.lru_cache(maxsize=256)  # clients send a handful of distinct values
def _gzip_acceptable(header: str) -> bool:
    if not header:
        return False
    weights = coding_weights(header)
    for name in ("gzip", "x-gzip"):
        if name in weights:
            return weights[name] > 0
    return weights.get("*", 0.0) > 0
