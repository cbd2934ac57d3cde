"""Writing a listing's body in its format: read whole, or streamed chunk by chunk.

Either way gzip applies when the client accepts it (a whole body only past 1 KiB), and
a streamed body is written under the write timeout: a client that stops reading is cut
off instead of holding its snapshot and pooled connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

from aiohttp import hdrs, web

from ..data.store import RecordStream
from ..keys import CONFIG
from .formats import Body, Format
from .headers import accepts_gzip

GZIP_MIN_BYTES = 1024


def whole_response(
    request: web.Request, body: Body, texts: list[bytes], headers: dict[str, str]
) -> web.Response:
    """A body read whole, gzipped when accepted and worth it."""
    return finish(request, web.Response(body=body.whole(texts), headers=headers), body.format)


def finish(request: web.Request, response: web.Response, fmt: Format) -> web.Response:
    """Content type of the format, UTF-8, and gzip for a body over 1 KiB."""
    response.content_type = fmt.media_type
    response.charset = "utf-8"
    assert isinstance(response.body, bytes)
    if len(response.body) > GZIP_MIN_BYTES and accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
    return response


async def stream_response(
    request: web.Request, body: Body, stream: RecordStream, headers: dict[str, str]
) -> web.StreamResponse:
    """A long listing sent chunk by chunk while the pool thread reads and encodes the next."""
    response = web.StreamResponse(headers=headers)
    response.content_type = body.format.media_type
    response.charset = "utf-8"
    if request.method == hdrs.METH_HEAD:  # the headers only, never a body
        await response.prepare(request)
        await response.write_eof()
        return response
    if accepts_gzip(request):
        response.enable_compression(web.ContentCoding.gzip)
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


# SO_LINGER on with a zero timeout: close() resets the connection at once.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


def reset(transport: asyncio.Transport) -> None:
    """Drop a connection with a reset, discarding what its send buffer still holds.

    A plain close leaves the kernel trickling megabytes of unsent answer to a client
    that reads slowly (measured: 4 MB over 100 s); the reset frees them now.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    transport.abort()
