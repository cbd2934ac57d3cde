"""The private library names our shims rely on still exist (fails loudly on an upgrade).

app/data/aiosqlite_shim.py runs a whole read in an aiosqlite connection's thread through
``Connection._execute`` and ``Connection._conn``; app/web/aiohttp_shim.py chooses the
connection class a runner builds, times request headers and tells 431/414 from other
parser errors (tests/test_connections.py shows each at work). pyproject pins both
libraries below their next minor version. If this test fails after an upgrade, rewrite
the shim, then lift the pin.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import tomllib
from importlib.metadata import version
from pathlib import Path

import aiosqlite
import pytest
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from packaging.requirements import Requirement

from app.data.aiosqlite_shim import run_in_thread
from app.web import aiohttp_shim

from .support.servers import ROOT


async def test_aiosqlite_private_names_exist() -> None:
    assert callable(getattr(aiosqlite.Connection, "_execute", None))
    assert isinstance(getattr(aiosqlite.Connection, "_conn", None), property)


async def test_run_in_thread_runs_on_the_connection_thread(tmp_path: Path) -> None:
    """The function gets the sqlite3 connection, on the connection's own thread."""
    async with aiosqlite.connect(tmp_path / "x.sqlite3") as conn:

        def probe(raw: sqlite3.Connection) -> tuple[int, bool]:
            value = raw.execute("SELECT 41 + 1").fetchone()[0]
            return value, threading.current_thread() is not threading.main_thread()

        assert await run_in_thread(conn, probe) == (42, True)


def requirement(library: str) -> Requirement:
    """The library's requirement in pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (spec,) = [r for r in project["dependencies"] if re.match(rf"{library}\b(?!-)", r)]
    return Requirement(spec)


@pytest.mark.parametrize("library", ["aiohttp", "aiosqlite"])
def test_libraries_with_a_shim_have_an_upper_bound(library: str) -> None:
    """An upgrade past the tested versions is a deliberate change, with this file rerun."""
    specifier = requirement(library).specifier
    assert any(bound.operator == "<" for bound in specifier), specifier
    assert specifier.contains(version(library)), (specifier, version(library))


def test_aiohttp_private_names_exist() -> None:
    aiohttp_shim.check_private_api()  # also run at import: the app cannot start without them


def test_aiohttp_parser_errors_are_told_apart() -> None:
    """The limits a LineTooLong names, and the too-many-headers message, as the shim reads them."""
    field = LineTooLong(b"X-Pad: ...", aiohttp_shim.MAX_HEADER_FIELD)
    line = LineTooLong(b"/path...", aiohttp_shim.MAX_REQUEST_LINE)
    assert aiohttp_shim.parser_error_status(400, field) == 431
    assert aiohttp_shim.parser_error_status(400, line) == 414
    many = BadHttpMessage("Too many headers received")
    assert aiohttp_shim.parser_error_status(400, many) == 431
    assert aiohttp_shim.parser_error_status(400, BadHttpMessage("Bad line ending")) == 400
