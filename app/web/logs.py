"""Logging: setup (plain text or one JSON object per line) and the access log (contract.md 8).

Every line is handed through the standard library's queue handler to a listener thread
that formats it and writes a batch every ``FLUSH_SECONDS``: a request's own path only
builds its record, so the access log costs little and stays on. An access line skips
even the record: its fields go on the writer's queue as they are. Escaping, like all
formatting, happens on that thread.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any, NamedTuple

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ..keys import CALLER, CLIENT, REQUEST_ID

REPORT_SECONDS = 10.0  # a recurring condition is logged at most this often
TEXT_ESCAPED = "\\ "  # besides unprintable characters, in a text access line


class LogThrottle:
    """Log a recurring condition at most once an interval, saying how often it recurred."""

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = REPORT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._next = float("-inf")
        self._suppressed = 0

    def warning(self, message: str, *args: object) -> None:
        """Log now if the interval has passed since the last line, else count it."""
        now = self._clock()
        if now < self._next:
            self._suppressed += 1
            return
        if self._suppressed:
            message += f" ({self._suppressed} more since the last report)"
        self._next = now + self._interval
        self._suppressed = 0
        self._logger.warning(message, *args)


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


class OncePerSecond:
    """The text of a second, made again only when the second changes: every line asks
    for its time, and a busy server writes thousands of lines a second."""

    def __init__(self, make: Callable[[int], str]) -> None:
        self.make = make
        self.last = (-1, "")  # one attribute, replaced whole: safe to read from any thread

    def __call__(self, second: int) -> str:
        last = self.last
        if last[0] != second:
            last = self.last = (second, self.make(second))
        return last[1]


class TextFormatter(logging.Formatter):
    """The plain-text format; a message's control characters are escaped (tracebacks stay)."""

    def __init__(self, fmt: str = "%(message)s") -> None:
        super().__init__(fmt)
        self.line_format = fmt
        self.second_text = OncePerSecond(
            lambda second: time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second))
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.time_text(record.created)

    def time_text(self, created: float) -> str:
        """``2025-06-01 10:00:00,250``: the default time of a line, to the millisecond."""
        return f"{self.second_text(int(created))},{int((created - int(created)) * 1000):03d}"

    def formatMessage(self, record: logging.LogRecord) -> str:
        return escape_controls(super().formatMessage(record))

    def access_line(self, entry: AccessEntry) -> str:
        """What :meth:`format` makes of an access line's record, without making one: the
        format may name the time, process, level, logger and message."""
        return self.line_format % {
            "asctime": self.time_text(entry.created),
            "process": os.getpid(),
            "levelname": "INFO",
            "name": entry.logger,
            "message": str(AccessLine(entry.fields)),
        }


class JsonFormatter(logging.Formatter):
    """One JSON object a line; access lines carry their fields, others their message."""

    def __init__(self) -> None:
        super().__init__()
        self.second_text = OncePerSecond(
            lambda second: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))
        )

    def format(self, record: logging.LogRecord) -> str:
        entry = self.start(record.created, record.levelname, record.name, record.process)
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            entry.update(escaped_fields(access))
        else:
            entry["message"] = escape_controls(record.getMessage())
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)

    def start(self, created: float, level: str, logger: str, pid: int | None) -> dict[str, Any]:
        """The members every line begins with."""
        return {
            "time": self.second_text(int(created)),
            "level": level,
            "logger": logger,
            "pid": pid,
        }

    def access_line(self, entry: AccessEntry) -> str:
        """What :meth:`format` makes of an access line's record, without making one."""
        line = self.start(entry.created, "INFO", entry.logger, os.getpid())
        line.update(escaped_fields(entry.fields))
        return json.dumps(line, ensure_ascii=False)


LineFormatter = TextFormatter | JsonFormatter  # what the writer formats lines with


def escaped_fields(fields: dict[str, object]) -> dict[str, object]:
    """An access line's fields for JSON: the backslash is escaped too, so an escape always
    means the client sent that character."""
    return {k: escape_controls(v, "\\") if isinstance(v, str) else v for k, v in fields.items()}


FLUSH_SECONDS = 0.1  # how stale a line may be before it is written


class LogWriter(logging.handlers.QueueListener):
    """The thread that formats queued records and writes them, a batch at a time.

    When the queue runs dry the formatted lines are written in one call and the thread
    lets more gather for FLUSH_SECONDS, so a busy server pays one write (and one handover
    of the interpreter lock) per batch, not per line. It stops before a fork (gunicorn
    starting a worker) having written everything, and starts again on both sides.
    """

    def __init__(self, records: queue.SimpleQueue[Any], stream: IO[str], fmt: LineFormatter):
        super().__init__(records)
        self.records = records
        self.stream = stream
        self.formatter = fmt
        self.formats = logging.Handler()  # its format and handleError, as a handler's
        self.formats.setFormatter(fmt)
        self.lines: list[str] = []
        self.running = False
        self.awake = threading.Event()  # set by stop: no more waiting for lines to gather
        os.register_at_fork(before=self.stop, after_in_parent=self.start, after_in_child=self.start)

    def dequeue(self, block: bool) -> Any:
        """The next record; when none waits, write the batch, then let lines gather."""
        if self.records.empty():
            self.write_batch()
            self.awake.wait(FLUSH_SECONDS)
        return super().dequeue(block)

    def handle(self, record: logging.LogRecord | AccessEntry) -> None:
        """Format the record into the batch; a record that cannot be formatted is reported."""
        try:
            if isinstance(record, AccessEntry):
                self.lines.append(self.formatter.access_line(record) + "\n")
            else:
                self.lines.append(self.formats.format(record) + "\n")
        except Exception:
            if isinstance(record, AccessEntry):
                record = logging.makeLogRecord({"name": record.logger, "msg": repr(record)})
            self.formats.handleError(record)

    def write_batch(self) -> None:
        """Write the formatted lines in one call (a stream gone away is not an error)."""
        text, self.lines = "".join(self.lines), []
        try:
            if text:
                self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the stream went away (closed pipe, closed file)
            pass

    def start(self) -> None:
        """Start the thread unless it runs (a fork restarts it on both sides)."""
        if not self.running:
            self.running = True
            super().start()

    def stop(self) -> None:
        """Write every queued line, then end the thread."""
        if self.running:
            self.running = False
            self.awake.set()
            super().stop()
            self.awake.clear()
            self.write_batch()


class RecordQueue(logging.handlers.QueueHandler):
    """Hands each record, unformatted, to the writer's queue: the caller's path does no I/O.

    QueueHandler formats in ``prepare`` so that records can cross processes; ours stay
    in this one, so formatting (and escaping) is left to the writer's thread. Closed by
    ``logging.shutdown`` at exit, it stops the writer, which writes what is left.
    """

    def __init__(self, writer: LogWriter) -> None:
        super().__init__(writer.records)
        self.writer = writer

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record as it is: the writer's thread formats it."""
        return record

    def close(self) -> None:
        """Stop the writer, which writes every queued line first."""
        self.writer.stop()
        super().close()


def setup_logging(level: str, fmt: str) -> LogWriter:
    """Send every log line to stderr in the configured format, written in batches."""
    formatter: LineFormatter = JsonFormatter()
    if fmt != "json":
        formatter = TextFormatter("%(asctime)s [%(process)d] %(levelname)s %(name)s %(message)s")
    writer = LogWriter(queue.SimpleQueue(), sys.stderr, formatter)
    writer.start()
    logging.logThreads = False  # records skip looking up the thread: nothing prints it
    root = logging.getLogger()
    root.handlers[:] = [RecordQueue(writer)]
    root.setLevel(level.upper())
    return writer


class AccessLogger(AbstractAccessLogger):
    """One line per request: method, path, status, duration, company, request id.

    Every string field is escaped: the path is the client's, decoded (``%0D%0A`` is a
    real line break by then). When the writer's queue is the only place the logger's
    records go (as :func:`setup_logging` sets it up), a line is queued as its fields
    and the time: the writer makes the text, and the request builds no log record.
    """

    def __init__(self, logger: logging.Logger, log_format: str) -> None:
        super().__init__(logger, log_format)
        self.writer = sole_writer(logger)

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        caller = request.get(CALLER)
        fields = {
            "method": request.method,
            "path": request.path,
            "status": response.status,
            "duration_ms": round(time * 1000, 2),
            "company": caller.company_id if caller else None,
            "request_id": request.get(REQUEST_ID, ""),
            "remote": request.get(CLIENT, request.remote),  # (a request the parser refused)
        }
        logger = self.logger
        if self.writer is not None:
            self.writer.records.put(AccessEntry(logger.name, now(), fields))
            return
        # makeRecord and handle, not info(): no search for the caller's frame, and the
        # text is joined and escaped only when the record is formatted.
        extra = {"access": fields}
        line = AccessLine(fields)
        logger.handle(
            logger.makeRecord(logger.name, logging.INFO, "", 0, line, (), None, extra=extra)
        )

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)


now = time.time  # log() has an argument named time


class AccessEntry(NamedTuple):
    """An access line on its way to the writer: the logger's name, when, the fields."""

    logger: str
    created: float
    fields: dict[str, object]


def sole_writer(logger: logging.Logger) -> LogWriter | None:
    """The writer behind ``logger`` when a RecordQueue is the one handler its records
    reach and no filter looks at them; None otherwise (tests capturing records, say)."""
    handlers: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        handlers += current.handlers
        current = current.parent if current.propagate else None
    match handlers:
        case [RecordQueue() as only] if not only.filters and only.level <= logging.INFO:
            return only.writer
    return None


class AccessLine:
    """An access line's text, joined from its fields only when it is formatted.

    The text line escapes the backslash and the space too, so an escape always means the
    client sent that character and no value can forge a "name=value" field of its own.
    """

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, object]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        texts = [  # a list, not a generator: join would make one of it anyway
            f"{name}={escape_controls(value, TEXT_ESCAPED) if isinstance(value, str) else value}"
            for name, value in self.fields.items()
        ]
        return " ".join(texts)
