"""The one module that relies on aiohttp's private API, and why.

aiohttp has no public way to (1) choose the connection class (``RequestHandler``) an
``AppRunner`` builds, (2) know whether a connection is waiting for a request's headers,
which a header-read timeout needs, (3) tell an oversized header (431) or request line
(414) from other parser errors, which it all answers as 400, (4) answer an
``Expect: 100-continue`` without a ``100 Continue`` first, or (5) close the connection
of a request asking to switch protocols (``plain_requests``). The names used for these
are checked at import by ``check_private_api`` and by tests/test_connections.py, and
pyproject.toml caps aiohttp below the next minor release: an upgrade that moves them
fails at once, loudly, instead of silently dropping a protection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import aiohttp
from aiohttp import hdrs, web
from aiohttp.http import RawRequestMessage
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, LineTooLong
from aiohttp.web_protocol import RequestHandler
from multidict import CIMultiDict, CIMultiDictProxy

from .connections import Admission, ConnectionGuard

MAX_REQUEST_LINE = 16_384  # bytes of method, path and query; longer is 414
MAX_HEADER_FIELD = 8_190  # bytes of one header's name and value (aiohttp's default); 431
MAX_HEADER_BYTES = 32_768  # bytes of a request's line and headers together; 431 beyond
_HEAD_END = b"\r\n\r\n"
AppHandler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
RequestFactory = Callable[..., web.BaseRequest]
_CONTINUE = "100-continue"
_TOO_MANY_HEADERS = "Too many headers"  # the start of aiohttp's message for that case
_TLS_ON_PLAIN = "Received HTTPS traffic"  # its message for a TLS hello, which no method starts


def check_private_api() -> None:
    """Fail with one clear error if this aiohttp lacks what the module relies on."""
    missing = []
    if "_waiter" not in RequestHandler.__slots__:
        missing.append("RequestHandler._waiter")
    if not asyncio.iscoroutinefunction(getattr(web.AppRunner, "_make_server", None)):
        missing.append("AppRunner._make_server")
    if "_kwargs" not in web.Server.__init__.__code__.co_names:
        missing.append("Server._kwargs")
    if LineTooLong("x", 1).args[1] != 1:
        missing.append("LineTooLong.args[1] (the limit)")
    if not callable(getattr(RawRequestMessage, "_replace", None)):
        missing.append("RawRequestMessage._replace")
    if missing:
        raise RuntimeError(
            f"aiohttp {aiohttp.__version__} lacks {', '.join(missing)}: "
            "update app/web/aiohttp_shim.py"
        )


check_private_api()


def parser_error_status(status: int, exc: BaseException | None) -> int:
    """The status a parser refusal deserves: aiohttp answers every one of them 400.

    The limits are configured apart (see MAX_REQUEST_LINE), so the limit a LineTooLong
    names says which one was crossed. A method the parser does not know (``FOO``, or
    ``get``: methods are case-sensitive) is 501, as RFC 9110 9.1 asks of an unrecognised
    method; a TLS hello sent to the plain port stays 400.
    """
    if status != 400:
        return status
    if isinstance(exc, BadHttpMethod):
        return status if exc.message.startswith(_TLS_ON_PLAIN) else 501
    if isinstance(exc, LineTooLong):
        limit = exc.args[1]
        if limit == MAX_HEADER_FIELD:
            return 431
        if limit == MAX_REQUEST_LINE:
            return 414
    elif isinstance(exc, BadHttpMessage) and exc.message.startswith(_TOO_MANY_HEADERS):
        return 431
    return status


def plain_requests(factory: RequestFactory) -> RequestFactory:
    """``factory`` building requests as this API answers them: none asks for a
    ``100 Continue`` (:func:`without_continue`), and one asking to switch protocols closes
    its connection after its answer.

    aiohttp's parser drops, unparsed, whatever arrives in the same read as a request with
    ``Connection: upgrade`` and an ``Upgrade`` other than websocket (``h2c``, say): the
    requests pipelined behind it would go unanswered, and the rest of one cut in two
    would be read as a request of its own. No endpoint switches protocols, so such a
    request is answered and its connection closed, before any later byte is read as one.
    """

    def make(message: RawRequestMessage, *args: Any) -> web.BaseRequest:
        if message.upgrade:
            message = message._replace(should_close=True)
        # .get, not .getall: a request the parser refused comes with a plain empty dict.
        if message.headers.get(hdrs.EXPECT, "").lower() == _CONTINUE:
            message = without_continue(message)
        return factory(message, *args)

    return make


def without_continue(message: RawRequestMessage) -> RawRequestMessage:
    """``message`` without its ``Expect: 100-continue``.

    aiohttp meets that expectation before any middleware runs, by sending ``100 Continue``:
    the client then sends its whole body, only to have it refused (no endpoint takes one).
    Without it the client gets the final answer at once and keeps its body (RFC 9110
    10.1.1); any other ``Expect`` stays, for aiohttp to refuse with a 417.
    """
    headers = CIMultiDict(
        (k, v)
        for k, v in message.headers.items()
        if k.lower() != "expect" or v.lower() != _CONTINUE
    )
    raw = tuple(
        (k, v)
        for k, v in message.raw_headers
        if k.lower() != b"expect" or v.lower() != _CONTINUE.encode()
    )
    return message._replace(headers=CIMultiDictProxy(headers), raw_headers=raw)


class GuardedRequestHandler(RequestHandler):
    """aiohttp's connection handler, admitted by a ConnectionGuard and timing its headers.

    A refused connection gets the guard's 503 and is closed before aiohttp sees it.
    Once the first bytes of a request arrive, its headers must be complete within the
    guard's header timeout, however slowly they trickle in; otherwise the connection is
    closed. (Idle connections are closed by aiohttp's keep-alive timeout.) The bytes of
    the request line and headers are counted as they arrive: past ``MAX_HEADER_BYTES`` the
    request gets a 431 and the connection closes, before aiohttp's parser holds them, so
    an unfinished request costs a few tens of KiB at most.
    """

    def __init__(
        self, manager: web.Server, *, guard: ConnectionGuard | None = None, **kwargs: Any
    ) -> None:
        super().__init__(manager, **kwargs)
        self._guard = guard
        self._admission = Admission(admitted=False)
        self._peer: str | None = None
        self._header_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0  # of the request whose headers are arriving
        self._head_tail = b""  # its last bytes, in case its blank line is split

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._guard is not None:
            peer = transport.get_extra_info("peername")
            self._peer = peer[0] if peer else None
            self._admission = self._guard.admit(self._peer)
            if not self._admission.admitted:
                assert isinstance(transport, asyncio.WriteTransport)
                transport.write(self._admission.answer)
                transport.close()
                return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._stop_header_timer()
        if self._guard is not None:
            if not self._admission.admitted:
                return  # refused in connection_made: aiohttp never knew it
            self._guard.release(self._admission)
            self._admission = Admission(admitted=False)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._guard is None:
            super().data_received(data)
            return
        if self._waiting_for_request() and self._head_too_large(data):
            self._refuse_head()
            return
        super().data_received(data)
        if self._waiting_for_request():
            if self._header_timer is None:  # started by the request's first bytes only
                self._start_header_timer()
        else:
            self._stop_header_timer()
            self._head_bytes, self._head_tail = 0, b""
            if not data.endswith(_HEAD_END):  # the next request began behind this one
                self._start_header_timer()

    def _head_too_large(self, data: bytes) -> bool:
        """Count ``data`` up to the blank line that ends the headers; True past the cap."""
        seen = self._head_tail + data
        end = seen.find(_HEAD_END)
        if end < 0:
            self._head_bytes += len(data)
            self._head_tail = seen[-3:]
        else:
            self._head_bytes += end + len(_HEAD_END) - len(self._head_tail)
        return self._head_bytes > MAX_HEADER_BYTES

    def _refuse_head(self) -> None:
        """Answer 431 and close without parsing: the bytes so far are dropped."""
        if self._guard is not None and self.transport is not None:
            self.transport.write(self._guard.headers_too_large(self._peer, MAX_HEADER_BYTES))
        self.force_close()

    def _waiting_for_request(self) -> bool:
        """Idle between requests, with no complete request received yet (private API)."""
        waiter = self._waiter
        return waiter is not None and not waiter.done()

    def _headers_late(self) -> None:
        self._header_timer = None
        if self._guard is None:
            return
        if self._waiting_for_request():
            self._guard.headers_late(self._peer)
            self.force_close()
        else:  # the late request waits behind one still answered: ask again after it
            self._start_header_timer()

    def _start_header_timer(self) -> None:
        assert self._guard is not None
        self._header_timer = asyncio.get_running_loop().call_later(
            self._guard.header_timeout, self._headers_late
        )

    def _stop_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None


class HandlerServer(web.Server):
    """A low-level server building ``handler_class`` connections."""

    def __init__(self, *args: Any, handler_class: type[RequestHandler], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handler_class = handler_class

    def __call__(self) -> RequestHandler:
        return self.handler_class(self, loop=asyncio.get_running_loop(), **self._kwargs)


class HandlerAppRunner(web.AppRunner):
    """An AppRunner whose server builds ``handler_class`` connections."""

    handler_class: ClassVar[type[RequestHandler]] = GuardedRequestHandler

    def wrap_handler(self, handler: AppHandler) -> AppHandler:
        """The application's request handler as the connections call it (here unchanged)."""
        return handler

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return HandlerServer(
            self.wrap_handler(server.request_handler),
            handler_class=self.handler_class,
            request_factory=plain_requests(server.request_factory),
            handler_cancellation=server.handler_cancellation,
            **server._kwargs,
        )
