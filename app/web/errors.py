"""The error model: errors carry their status; one middleware renders them all.

Every error leaves the service as an RFC 9457 ``application/problem+json`` body
(contract.md section 5): the API's own errors, aiohttp's HTTP exceptions (404, 405,
413...) and unexpected exceptions, which become a 500 without any internal detail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from ..data.listings import RecordNotFound
from ..data.schema import DatabaseError
from ..data.store import NotAvailable
from ..keys import CLIENT, REQUEST_ID
from .clients import client_of
from .headers import assign_request_id
from .logs import LogThrottle

log = logging.getLogger("app.errors")

# reporting-api.md Part 7 names these messages; the rest use the standard phrase.
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Internal Server Error",
}
PROBLEM_TYPE = "application/problem+json"
NOT_FOUND_DETAIL = "No such resource for this company."
NOT_AVAILABLE_DETAIL = "This listing is not available on PostgreSQL (it is on SQLite)."
UNAVAILABLE_DETAIL = "The database does not answer; try again shortly."
UNAVAILABLE_RETRY_AFTER = "5"  # seconds
# An outage fails every request: one line every few seconds, not one per request.
_unavailable_log = LogThrottle(log)


class ApiError(Exception):
    """An error with its HTTP status, a human detail and optional per-parameter errors."""

    status = 500

    def __init__(
        self,
        detail: str,
        *,
        errors: Mapping[str, list[str]] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = dict(errors) if errors else None
        self.headers = dict(headers or {})


NO_BODY_DETAIL = "This API takes no request body: every endpoint only reads."


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class PreconditionFailed(ApiError):
    status = 412


class TooManyRequests(ApiError):
    status = 429


def problem_body(
    status: int, detail: str, request_id: str, errors: Mapping[str, list[str]] | None = None
) -> dict[str, Any]:
    """The one problem+json shape of every error."""
    title = TITLES.get(status) or HTTPStatus(status).phrase
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "request_id": request_id,
    }
    if errors:
        body["errors"] = dict(errors)
    return body


def problem_response(
    status: int,
    detail: str,
    request_id: str,
    *,
    errors: Mapping[str, list[str]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    """Render a problem+json response."""
    body = problem_body(status, detail, request_id, errors)
    response = web.Response(
        status=status,
        body=json.dumps(body, ensure_ascii=False).encode(),
        content_type=PROBLEM_TYPE,
        charset="utf-8",
        headers=headers,
    )
    return response


_HTTP_DETAILS = {
    404: "No resource at this path.",
    405: "This method is not allowed here.",
    413: "The request is too large.",
}


STREAMED = 200  # the status every streamed answer is sent with (bodies.stream_response)
CLIENT_CLOSED = 499  # nginx's status for a client that left before its answer was sent


def client_gone(request: web.BaseRequest) -> bool:
    """Whether the client's connection is closed or closing (it left mid-answer)."""
    transport = request.transport
    return transport is None or transport.is_closing()


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


def client_closed_response() -> web.Response:
    """What a request whose client left ends with: status 499 for the access line.

    aiohttp tries to send it, finds the connection closed and logs the request with this
    status; nobody receives it, so a disconnect is one access line, not a 500 and a trace.
    """
    return web.Response(status=CLIENT_CLOSED)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every exception into a problem+json response (the outermost middleware).

    A request with a body is refused before anything reads it, and its connection
    closed: every endpoint only reads (server.LINGER_SECONDS bounds what is read of the
    body meanwhile).
    """
    assign_request_id(request)
    request[CLIENT] = client_of(request)  # for the limits and the access line
    # aiohttp counts what may follow a CONNECT as its body: it carries none of its own.
    tunnel = request.method == hdrs.METH_CONNECT
    if request.body_exists and not tunnel:
        response = problem_response(400, NO_BODY_DETAIL, request.get(REQUEST_ID, ""))
        response.force_close()
        return response
    try:
        try:
            return await handler(request)
        except Exception as exc:
            if request.writer.output_size == 0 or client_gone(request):
                raise
            return cut_short(request, exc)
    except ApiError as exc:
        return problem_response(
            exc.status,
            exc.detail,
            request.get(REQUEST_ID, ""),
            errors=exc.errors,
            headers=exc.headers,
        )
    except RecordNotFound:
        # A free id and another company's id take this same path (contract.md 1).
        return problem_response(404, NOT_FOUND_DETAIL, request.get(REQUEST_ID, ""))
    except DatabaseError as exc:
        report_unavailable(exc)
        return problem_response(
            503,
            UNAVAILABLE_DETAIL,
            request.get(REQUEST_ID, ""),
            headers={"Retry-After": UNAVAILABLE_RETRY_AFTER},
        )
    except NotAvailable:
        # A listing the store has no SQL for (a guard: every listing is ported): 501, not 500.
        return problem_response(501, NOT_AVAILABLE_DETAIL, request.get(REQUEST_ID, ""))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "location")}
        detail = _HTTP_DETAILS.get(exc.status) or HTTPStatus(exc.status).description
        response = problem_response(
            exc.status, detail, request.get(REQUEST_ID, ""), headers=headers
        )
        if tunnel:  # every CONNECT ends here (no resource has its target): close, since
            response.force_close()  # aiohttp reads what follows as the tunnel's bytes
        return response
    except ConnectionError:
        if client_gone(request):
            return client_closed_response()
        return unexpected_error(request)
    except asyncio.CancelledError:
        # Only the shutdown cancels a handler (a client that leaves does not): the
        # request gets no access line, so this one says which it was.
        log.warning(
            "cut short by the shutdown: %s %s (request id %s)",
            request.method,
            request.path,
            request.get(REQUEST_ID, ""),
        )
        raise
    except Exception:
        return unexpected_error(request)


def cut_short(request: web.Request, exc: Exception) -> web.Response:
    """What an answer that failed after its status line was sent ends with.

    No error response can follow a sent status line: aiohttp would write the second one
    into the chunked body and end it with a final chunk, so a client could take a
    shortened array or CSV for a whole one. The connection is reset instead, without the
    final chunk, which every client reads as a failed answer. The access line keeps the
    200 the client got; one line says the answer was cut and why (a bug keeps its trace).
    """
    cut = "%s %s cut short after its status line (request id %s)"
    where = (request.method, request.path, request.get(REQUEST_ID, ""))
    if isinstance(exc, DatabaseError):  # one line, as for any read the database fails
        log.warning(cut + ": %s", *where, exc)
    else:
        log.exception(cut, *where)
    if request.transport is not None:
        reset(request.transport)
    return web.Response(status=STREAMED)


def report_unavailable(exc: Exception) -> None:
    """Log that the database does not answer: at most one line an interval, no traceback."""
    _unavailable_log.warning("the database does not answer: %s", exc)


def unexpected_error(request: web.Request) -> web.Response:
    """Log the exception being handled with its request id; answer a bare 500."""
    log.exception(
        "unexpected error for %s %s (request id %s)",
        request.method,
        request.path,
        request.get(REQUEST_ID, ""),
    )
    return problem_response(500, "The server met an unexpected error.", request.get(REQUEST_ID, ""))
