"""Logging: setup (plain text or one JSON object per line) and the access log (contract.md 8)."""

from __future__ import annotations

import json
import logging
import sys
import time

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from ..keys import CALLER, REQUEST_ID


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
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup_logging(level: str, fmt: str) -> None:
    """Send every log line to stderr in the configured format."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class AccessLogger(AbstractAccessLogger):
    """One line per request: method, path, status, duration, company, request id."""

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
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        self.logger.info(text, extra={"access": fields})

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)
