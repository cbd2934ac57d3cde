"""Logging: setup (plain text or one JSON object per line) and the access log (contract.md 8)."""

from __future__ import annotations

import json
import logging
import sys
import time

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
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            entry.update(access)
        else:
            entry["message"] = escape_controls(record.getMessage())
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str, fmt: str) -> None:
    """Send every log line to stderr in the configured format."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
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
        # The backslash is escaped too, so an escape in the log always means the client
        # sent that character; the text line also escapes spaces, so no value can forge
        # a "name=value" field of its own.
        words = []
        for name, value in fields.items():
            if isinstance(value, str):
                words.append(f"{name}={escape_controls(value, TEXT_ESCAPED)}")
                fields[name] = escape_controls(value, "\\")
            else:
                words.append(f"{name}={value}")
        text = " ".join(words)
        self.logger.info(text, extra={"access": fields})

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)
