"""Running the app: a runner whose low-level errors are problem+json, and signal handling.

aiohttp answers requests its HTTP parser refuses (an over-long request line, bytes that
are not allowed in a URL) itself, in plain text, before any middleware runs. The
request handler below renders those in the contract's problem+json shape too. The
runner also bounds connections, keep-alive and header reading (connections.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import signal
from collections.abc import Callable
from typing import Any

from aiohttp import web

from ..config import Config, base_url
from ..keys import CONFIG, REQUEST_ID
from .aiohttp_shim import (
    MAX_HEADER_FIELD,
    MAX_REQUEST_LINE,
    AppHandler,
    GuardedRequestHandler,
    HandlerAppRunner,
    parser_error_status,
)
from .connections import HEADERS_TOO_LARGE, ConnectionGuard, quiet_resource_errors
from .dashboard import PAGE_HEADERS
from .errors import PROBLEM_TYPE, problem_body, problem_response
from .headers import assign_request_id, set_standard_headers
from .logs import AccessLogger

log = logging.getLogger("app.server")
LINGER_SECONDS = 1.0  # how long an unread request body is read and dropped before the close
HUP_IGNORED = "SIGHUP ignored: one process reloads nothing (restart it to change settings)"
CEIL_THRESHOLD = 5.0  # aiohttp rounds up the deadline of a longer wait (helpers.ceil_timeout)

_PARSER_DETAILS = {
    400: "The request could not be parsed as HTTP.",
    413: "The request is too large.",
    414: "The request line (path and query) is too long.",
    431: HEADERS_TOO_LARGE,
    501: "This method is not one the server knows; the API answers GET and HEAD.",
}


class ProblemRequestHandler(GuardedRequestHandler):
    """aiohttp's connection handler, with its own error pages in problem+json."""

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """Log the failure and answer with a problem body (never a trace)."""
        status = parser_error_status(status, exc)
        if status in _PARSER_DETAILS:
            log.info("refused unparsable request: %s", status)
        else:
            log.error("error handling request", exc_info=exc)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot send an error")
        detail = _PARSER_DETAILS.get(status, "The server met an unexpected error.")
        # A request the parser refused has no trustworthy headers: always a fresh id.
        request_id = secrets.token_hex(16)
        if isinstance(request, web.Request):
            request[REQUEST_ID] = request_id  # for the access log line
        body = problem_body(status, detail, request_id)
        response = web.json_response(body, status=status, content_type=PROBLEM_TYPE)
        set_standard_headers(response, request_id)
        # Which page a refused request was for is unknown (its line may be cut or unread):
        # the dashboard's policy goes on every such answer, where it harms no API client.
        response.headers.update(PAGE_HEADERS)
        response.force_close()
        return response


EXPECTATION_DETAIL = "The only expectation this server meets is 100-continue."


def problem_expectations(handler: AppHandler) -> AppHandler:
    """``handler`` answering an ``Expect`` it cannot meet with a 417 in problem+json.

    aiohttp checks ``Expect`` before any middleware runs and refuses every value but
    100-continue in plain text, without a request id: this renders that refusal in the
    one error shape, and closes, since a body may follow unread.
    """

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPExpectationFailed:
            response = problem_response(417, EXPECTATION_DETAIL, assign_request_id(request))
            response.force_close()
            return response

    return handle


def shutdown_wait(total: float) -> float:
    """Each of aiohttp's two shutdown waits, so that both end within ``total`` seconds.

    aiohttp rounds the deadline of a wait longer than 5 s up to a whole second of the
    loop's clock, and the second wait starts on such a second, so two halves of 30 s
    took 31 to 32 s: past gunicorn's graceful timeout (``processes.Arbiter``), which
    then killed the worker with SIGKILL mid-answer, its last log lines lost. A wait
    over 5 s is therefore a second shorter (rounded up, it ends by the half).
    """
    half = total / 2
    return half if half <= CEIL_THRESHOLD else max(CEIL_THRESHOLD, half - 1)


class ProblemAppRunner(HandlerAppRunner):
    """An AppRunner serving ProblemRequestHandler connections, bounded as configured."""

    handler_class = ProblemRequestHandler

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        config = app.get(CONFIG) or Config()
        kwargs.setdefault("keepalive_timeout", config.keepalive_timeout)
        kwargs.setdefault("guard", ConnectionGuard.from_config(config))
        kwargs.setdefault("max_line_size", MAX_REQUEST_LINE)
        kwargs.setdefault("max_field_size", MAX_HEADER_FIELD)
        # A request body is refused unread (errors.error_middleware): aiohttp then reads
        # and drops what the client goes on sending for this long before it closes, so
        # the client has time to read the refusal (10 s by default, at wire speed).
        kwargs.setdefault("lingering_time", LINGER_SECONDS)
        # On a stop signal aiohttp waits this long for each request in flight, then, for
        # a handler still running (a stream a client reads slowly), as long again before
        # it cancels it: half of the configured time each keeps the whole within it.
        kwargs.setdefault("shutdown_timeout", shutdown_wait(config.shutdown_timeout))
        super().__init__(app, **kwargs)

    def wrap_handler(self, handler: AppHandler) -> AppHandler:
        return problem_expectations(handler)


def make_runner(app: web.Application) -> web.AppRunner:
    """The runner of every server process, one or several (``processes.serve_workers``)."""
    return ProblemAppRunner(
        app, access_log_class=AccessLogger, access_log=logging.getLogger("app.access")
    )


async def serve(
    app: web.Application,
    host: str,
    port: int,
    on_started: Callable[[], None] | None = None,
) -> None:
    """Serve until SIGINT or SIGTERM, then let in-flight requests finish and clean up.

    SIGHUP, which asks gunicorn's arbiter to start new workers, is only logged here: one
    process has nothing to reload, and Python's default would end it mid-request.
    ``on_started`` runs once the socket is bound (a banner printed earlier could lie).
    """
    runner = make_runner(app)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    quiet_resource_errors(loop)
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGHUP, log.info, HUP_IGNORED)
    try:
        await web.TCPSite(runner, host, port).start()
        log.info("listening on %s", base_url(host, port))
        if on_started is not None:
            on_started()
        await stop.wait()
        log.info("shutting down: finishing requests in flight")
    finally:
        await runner.cleanup()
