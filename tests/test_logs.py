"""The log's plumbing (issue 21 item 4): the standard library's queue handler and listener.

A request's path only queues its record: formatting and writing happen on the writer's
thread, in batches; closing the handler (``logging.shutdown`` at exit) writes what is
left; a fork finds nothing half written, and the child writes its own lines.
"""

from __future__ import annotations

import io
import json
import logging
import logging.handlers
import os
import queue
import threading
import time
from collections.abc import Iterator

import pytest

from app.web.logs import (
    FLUSH_SECONDS,
    AccessEntry,
    AccessLine,
    AccessLogger,
    JsonFormatter,
    LogWriter,
    RecordQueue,
    TextFormatter,
    setup_logging,
)


class Watched(io.StringIO):
    """A stream that remembers which threads wrote to it, and how many writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writers: set[str] = set()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writers.add(threading.current_thread().name)
        self.writes += 1
        return super().write(text)


class Message:
    """A log message that remembers on which thread it was turned into text."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def __str__(self) -> str:
        self.threads.add(threading.current_thread().name)
        return "hello"


@pytest.fixture
def root() -> Iterator[logging.Logger]:
    """The root logger, put back as pytest had it afterwards."""
    logger = logging.getLogger()
    handlers, level = logger.handlers[:], logger.level
    try:
        yield logger
    finally:
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.handlers[:] = handlers
        logger.setLevel(level)


def test_the_caller_only_queues(root: logging.Logger) -> None:
    writer = setup_logging("INFO", "text")
    stream = writer.stream = Watched()
    (handler,) = root.handlers
    assert isinstance(handler, logging.handlers.QueueHandler)
    assert isinstance(writer, logging.handlers.QueueListener)
    message = Message()
    for _ in range(500):
        logging.getLogger("app.test").info(message)
    deadline = time.monotonic() + 10
    while stream.getvalue().count("hello") < 500:
        assert time.monotonic() < deadline, stream.getvalue()
        time.sleep(FLUSH_SECONDS)
    main = threading.main_thread().name
    assert main not in message.threads and main not in stream.writers
    assert stream.writes < 100  # in batches, not a write a line
    assert all(line.endswith(" INFO app.test hello") for line in stream.getvalue().splitlines())


def test_closing_the_handler_writes_what_is_left(root: logging.Logger) -> None:
    """What logging.shutdown does at exit: every queued line is written, nothing lost."""
    writer = setup_logging("INFO", "text")
    stream = writer.stream = Watched()
    for number in range(2000):
        logging.getLogger("app.test").info("line %d", number)
    (handler,) = root.handlers
    handler.close()
    lines = stream.getvalue().splitlines()
    assert [line.rsplit(" ", 1)[1] for line in lines] == [str(n) for n in range(2000)]
    assert not writer.running


@pytest.mark.system  # forks this process
def test_a_forked_child_writes_its_own_lines_once() -> None:
    """Lines queued before a fork are written by the parent only; the child writes its own."""
    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        writer = LogWriter(queue.SimpleQueue(), stream, TextFormatter("%(message)s"))
        writer.start()
        handler = RecordQueue(writer)
        logger = logging.getLogger("app.fork-test")
        logger.propagate, logger.handlers = False, [handler]
        logger.setLevel(logging.INFO)
        try:
            logger.info("before")
            pid = os.fork()
            if pid == 0:  # the child: one line of its own, then out without cleanup
                logger.info("child")
                handler.close()
                os._exit(0)
            assert os.waitpid(pid, 0)[1] == 0
            logger.info("after")
        finally:
            handler.close()
            logger.handlers = []
    with os.fdopen(read) as output:
        assert sorted(output.read().splitlines()) == ["after", "before", "child"]


def access_record(created: float, fields: dict[str, object]) -> logging.LogRecord:
    """An access line's record made the standard library's way, at ``created``."""
    record = logging.LogRecord("app.access", logging.INFO, "", 0, AccessLine(fields), (), None)
    record.access, record.created = fields, created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


LINE = "%(asctime)s [%(process)d] %(levelname)s %(name)s %(message)s"


def test_every_line_carries_its_own_time() -> None:
    """The formatters make a second's text once; a line of another second, later or
    earlier (a clock set back), still gets its own, to the millisecond."""
    text, json_lines = TextFormatter("%(asctime)s"), JsonFormatter()
    plain = logging.Formatter("%(asctime)s")
    for created in (1_000_000.999, 1_000_001.0, 1_000_001.5, 999_999.25, 1_000_001.75):
        record = access_record(created, {"path": "/"})
        assert text.format(record) == plain.format(record)
        utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        assert json.loads(json_lines.format(record))["time"] == utc


@pytest.mark.parametrize("formatter", [TextFormatter(LINE), JsonFormatter()], ids=["text", "json"])
def test_a_queued_access_line_is_written_as_its_record_would_be(
    formatter: TextFormatter | JsonFormatter,
) -> None:
    """The writer turns a queued access entry into the very line the record of the same
    fields and time would have given: escapes included."""
    fields: dict[str, object] = {
        "method": "GET",
        "path": "/a b\\c\r\n\u2028",
        "status": 404,
        "duration_ms": 0.5,
        "company": None,
        "request_id": "r 1",
    }
    for created in (1_000_000.001, 1_000_000.999, 1_700_000_000.5):
        entry = AccessEntry("app.access", created, fields)
        assert formatter.access_line(entry) == formatter.format(access_record(created, fields))


def test_access_lines_skip_the_record_only_behind_the_writer_alone(root: logging.Logger) -> None:
    """Queued as entries when the writer's queue is the one handler; made into records
    that every handler sees once another handler (pytest's capture, say) is there."""
    access = logging.getLogger("app.access")
    writer = setup_logging("INFO", "text")
    assert AccessLogger(access, "").writer is writer
    root.addHandler(logging.NullHandler())
    assert AccessLogger(access, "").writer is None


class Unprintable:
    def __format__(self, spec: str) -> str:
        raise ValueError("cannot be written")


def test_an_access_line_that_cannot_be_written_is_reported_and_the_writer_goes_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = Watched()
    writer = LogWriter(queue.SimpleQueue(), stream, TextFormatter(LINE))
    writer.start()
    try:
        writer.records.put(AccessEntry("app.access", time.time(), {"path": Unprintable()}))
        writer.records.put(AccessEntry("app.access", time.time(), {"path": "/next"}))
    finally:
        writer.stop()
    assert stream.getvalue().endswith(" INFO app.access path=/next\n")
    assert "--- Logging error ---" in capsys.readouterr().err
