"""The private library names our shims rely on still exist (fails loudly on an upgrade).

app/data/aiosqlite_shim.py runs a whole read in an aiosqlite connection's thread through
``Connection._execute`` and ``Connection._conn``; app/web/aiohttp_shim.py chooses the
connection class a runner builds, times request headers, tells 431/414 from other
parser errors (tests/test_connections.py shows each at work) and drops an
``Expect: 100-continue`` (tests/test_errors.py); app/web/gunicorn_shim.py
reads the stop signals a new worker's inherited handler queued in the arbiter's
``SIG_QUEUE`` (tests/test_workers.py shows it at work); app/tools/marshmallow_shim.py
calls a field's ``_deserialize`` where ``deserialize`` would do no more. Each checks at
import, and pyproject caps each library (tests/test_fences.py keeps private names
inside these modules). If this test fails after an upgrade, rewrite the shim, then
lift the cap.
"""

from __future__ import annotations

import queue
import re
import signal
import sqlite3
import threading
import tomllib
from importlib.metadata import version
from pathlib import Path

import aiosqlite
import pytest
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from gunicorn.arbiter import Arbiter
from marshmallow import ValidationError, fields, validate
from packaging.requirements import Requirement

from app.data import aiosqlite_shim
from app.data.aiosqlite_shim import run_in_thread
from app.tools import marshmallow_shim
from app.web import aiohttp_shim, gunicorn_shim

from .support.servers import ROOT

SHIMS = sorted(path.stem for path in (ROOT / "app").rglob("*_shim.py"))


async def test_aiosqlite_private_names_exist() -> None:
    assert callable(getattr(aiosqlite.Connection, "_execute", None))
    assert isinstance(getattr(aiosqlite.Connection, "_conn", None), property)
    aiosqlite_shim.check_private_api()  # also run at import


class Upgraded:
    """A library class after an upgrade that dropped every private name a shim relies on."""

    def __init__(self) -> None:
        self.queue: list[int] = []

    def signal(self, sig: int, frame: object) -> None:
        self.queue.append(sig)

    def init_signals(self) -> None:
        pass

    def deserialize(self, value: object) -> object:
        return value


@pytest.mark.parametrize(
    ("check", "names"),
    [
        (aiosqlite_shim.check_private_api, "Connection._execute, Connection._conn"),
        (
            gunicorn_shim.check_private_api,
            "Arbiter.signal putting signals in SIG_QUEUE, "
            "Arbiter.init_signals installing Arbiter.signal, Arbiter.SIG_QUEUE",
        ),
        (marshmallow_shim.check_private_api, "Field._deserialize, Field._validate"),
    ],
    ids=["aiosqlite", "gunicorn", "marshmallow"],
)
def test_a_shim_check_fails_loudly_when_its_names_are_gone(check: object, names: str) -> None:
    """The check at import names what is missing and the shim to update."""
    assert callable(check)
    with pytest.raises(RuntimeError, match="lacks") as refused:
        check(Upgraded)
    assert names in str(refused.value)
    assert re.search(r": update app/\w+/\w+_shim\.py$", str(refused.value)), refused.value


def test_gunicorn_private_names_exist() -> None:
    gunicorn_shim.check_private_api()  # also run at import: no worker starts without them
    assert gunicorn_shim.stop_signal_in([signal.SIGHUP, signal.SIGTERM]) == signal.SIGTERM
    assert gunicorn_shim.stop_signal_in(None) is None


def test_an_arbiter_handler_queues_what_the_shim_reads() -> None:
    """gunicorn's own handler, on an arbiter of its own class, fills the queue we drain."""
    arbiter = Arbiter.__new__(Arbiter)
    setattr(arbiter, gunicorn_shim.QUEUE, queue.SimpleQueue())
    arbiter.signal(signal.SIGHUP, None)
    arbiter.signal(signal.SIGINT, None)
    pending = getattr(arbiter, gunicorn_shim.QUEUE)
    assert gunicorn_shim.stop_signal_in(pending) == signal.SIGINT
    assert gunicorn_shim.stop_signal_in(pending) is None  # drained


def test_marshmallow_quick_path_is_deserialize() -> None:
    """A field without validators skips to ``_deserialize``; one with them runs them."""
    marshmallow_shim.check_private_api()  # also run at import
    plain = fields.Integer()
    assert marshmallow_shim.value_loader(plain)("7", "n", {}) == 7
    checked = fields.Integer(validate=validate.Range(min=10))
    with pytest.raises(ValidationError):
        marshmallow_shim.value_loader(checked)("7", "n", {})


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


def test_every_shim_is_listed_here() -> None:
    assert SHIMS == ["aiohttp_shim", "aiosqlite_shim", "gunicorn_shim", "marshmallow_shim"]


@pytest.mark.parametrize("library", [shim.removesuffix("_shim") for shim in SHIMS])
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
