"""Small helpers shared by the test modules: sample facts, databases, error checks."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse

from app.loader import SAMPLE_FIXTURE, load_files

KEY_1 = "rk_sample_northwind_7f3c9a1e5b2d4c6f8a0b"  # company 1, Northwind Logistics
KEY_2 = "rk_sample_bluefin_2d8e6a4c0b9f7e5d3c1a"  # company 2, Bluefin Health
API = "/api/companies/v1"
PROBLEM_KEYS = {"type", "title", "status", "detail", "request_id"}
TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
}


@cache
def sample() -> dict[str, Any]:
    """The sample fixture, parsed: the independent source of expected answers."""
    return json.loads(SAMPLE_FIXTURE.read_text(encoding="utf-8"))


def make_sample_db(directory: Path, template_dir: Path | None = None) -> Path:
    """A fresh database holding the sample data, made by the real loader."""
    path = directory / "sample.sqlite3"
    if template_dir is not None:
        template = template_dir / "template.sqlite3"
        if not template.exists():
            load_files(template, [SAMPLE_FIXTURE])
        shutil.copy(template, path)
    else:
        load_files(path, [SAMPLE_FIXTURE])
    return path


async def assert_problem(response: ClientResponse, status: int) -> dict[str, Any]:
    """Check the one problem+json shape of contract.md 5 and return the body."""
    assert response.status == status, await response.text()
    assert response.headers["Content-Type"] == "application/problem+json; charset=utf-8"
    body = await response.json(content_type=None)
    assert set(body) >= PROBLEM_KEYS, body
    assert set(body) - PROBLEM_KEYS <= {"errors"}, body
    assert body["type"] == "about:blank"
    assert body["status"] == status
    assert body["title"] == TITLES[status]
    assert body["request_id"] == response.headers["X-Request-ID"]
    assert isinstance(body["detail"], str) and body["detail"]
    text = json.dumps(body)
    for leak in ("Traceback", "SELECT ", "sqlite", ".py", "/work/", "/tmp/"):
        assert leak not in text, text
    return body
