"""Logging: setup (plain text or one JSON object per line) and the access log (contract.md 8).

Every line is handed to a background thread that formats it and writes a batch every
``FLUSH_SECONDS``: a request's own path only builds its record, so the access log costs
little and stays on (``BufferedHandler``). Escaping, like all formatting, happens there.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import deque
from typing import IO, Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ..keys import CALLER, REQUEST_ID

TEXT_ESCAPED = "\\ "  # besides unprintable characters, in a text access line


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_controls(text: str, also: str = "") -> str:
    """``text`` with every unprintable character (and those in ``also``) as an escape.

    Unprintable covers C0 and C1 controls (a CR or LF forges a log line, ESC drives
    terminals), line separators, Unicode spaces, bidirectional overrides and the
    surrogates of undecodable bytes. The common case, nothing to escape, costs one scan.
    """
    if text.isprintable():
        for char in also:
            if char in text:
                break
        else:
            return text
    return "".join(
        char if char.isprintable() and char not in also else _escape(char) for char in text
    )


class TextFormatter(logging.Formatter):
    """The plain-text format; a message's control characters are escaped (tracebacks stay)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_controls(super().formatMessage(record))


class JsonFormatter(logging.Formatter):
    """One JSON object a line; access lines carry their fields, others their message."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + "Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            # The backslash is escaped too, so an escape always means the client sent it.
            entry.update(
                {
                    k: escape_controls(v, "\\") if isinstance(v, str) else v
                    for k, v in access.items()
                }
            )
        else:
            entry["message"] = escape_controls(record.getMessage())
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


FLUSH_SECONDS = 0.1  # how stale a line may be before it is written


class BufferedHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Queues records; a thread formats and writes them in one batch every FLUSH_SECONDS.

    Pending lines are written before a fork (gunicorn starting a worker), and the child
    starts its own thread; ``logging.shutdown`` at exit writes what is left.
    """

    def __init__(self, stream: IO[str]) -> None:
        super().__init__(stream)
        self._pending: deque[logging.LogRecord] = deque()
        self._writing = threading.Lock()
        self._closed = False
        self._start()
        os.register_at_fork(
            before=self._before_fork,
            after_in_parent=self._after_fork_in_parent,
            after_in_child=self._after_fork_in_child,
        )

    def handle(self, record: logging.LogRecord) -> Any:
        """Queue the record: no lock and no I/O on the caller's path (deque is thread-safe)."""
        self._pending.append(record)
        return True

    def flush(self) -> None:
        with self._writing:
            self._write_pending()

    def close(self) -> None:
        self._closed = True
        self.flush()
        super().close()

    def _write_pending(self) -> None:
        lines = []
        while self._pending:
            record = self._pending.popleft()
            try:
                lines.append(self.format(record) + self.terminator)
            except Exception:
                self.handleError(record)
        try:
            if lines:
                self.stream.write("".join(lines))
            self.stream.flush()
        except (OSError, ValueError):  # the stream went away (closed pipe, closed file)
            pass

    def _start(self) -> None:
        threading.Thread(target=self._run, name="log-writer", daemon=True).start()

    def _run(self) -> None:
        while not self._closed:
            time.sleep(FLUSH_SECONDS)
            self.flush()

    def _before_fork(self) -> None:
        self._writing.acquire()  # held across the fork: no write is half done in the child
        self._write_pending()

    def _after_fork_in_parent(self) -> None:
        self._writing.release()

    def _after_fork_in_child(self) -> None:
        self._writing = threading.Lock()
        if not self._closed:
            self._start()


def setup_logging(level: str, fmt: str) -> None:
    """Send every log line to stderr in the configured format, written in batches."""
    handler = BufferedHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        text = "%(asctime)s [%(process)d] %(levelname)s %(name)s %(message)s"
        handler.setFormatter(TextFormatter(text))
    logging.logThreads = False  # records skip looking up the thread: nothing prints it
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class AccessLogger(AbstractAccessLogger):
    """One line per request: method, path, status, duration, company, request id.

    Every string field is escaped: the path is the client's, decoded (``%0D%0A`` is a
    real line break by then).
    """

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        caller = request.get(CALLER)
        fields = {
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "duration_ms": round(time * 1000, 2),
            "company": caller.company_id if caller else None,
            "request_id": request.get(REQUEST_ID, ""),
            "remote": request.remote,
        }
        # makeRecord and handle, not info(): no search for the caller's frame, and the
        # text is joined and escaped only when the record is formatted (off this path).
        logger = self.logger
        line = AccessLine(fields)
        extra = {"access": fields}
        logger.handle(
            logger.makeRecord(logger.name, logging.INFO, "", 0, line, (), None, extra=extra)
        )

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


class AccessLine:
    """An access line's text, joined from its fields only when it is formatted.

    The text line escapes the backslash and the space too, so an escape always means the
    client sent that character and no value can forge a "name=value" field of its own.
    """

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, object]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        return " ".join(
            f"{name}={escape_controls(value, TEXT_ESCAPED) if isinstance(value, str) else value}"
            for name, value in self.fields.items()
        )
