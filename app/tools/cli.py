"""How every tool ends: an expected error is one line on stderr and a non-zero exit.

The loader, the key tool and the generator each have a ``main(argv) -> int`` decorated
with :func:`command`; the console scripts and the thin files in scripts/ call it. A
traceback is kept for what nobody expected: a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import io
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import asyncpg

from ..config import database_url, unknown_settings
from ..data import schema
from ..data.api_keys import KeyRefused
from ..data.automation import RulesError
from ..data.fields import MAX_ID
from ..data.pg.store import failure
from ..data.schema import CommitHooks, DatabaseError
from . import start
from .start import STOPS

Main = Callable[[Sequence[str] | None], int]

EXIT_REFUSED = 1
PG_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM


class ToolError(Exception):
    """A refusal the user can act on; ``problems`` holds one line per problem."""

    def __init__(self, *problems: str) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def record_id(text: str) -> int:
    """An id given on the command line: a decimal number from 1 to 2^63-1, the largest a
    database holds (a larger one would reach the database and stop the tool there)."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_ID:
        raise argparse.ArgumentTypeError(f"not an id from 1 to {MAX_ID}: {text!r}")
    return int(text)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 campaign``, ``2 campaigns``: a count the way a tool prints it, noun agreed."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def printable(text: str) -> str:
    """``text`` with each unprintable character as its escape (``\\x1b``): a line quoting
    an input file (a field's name, a value) may hold a line break or an escape sequence
    that drives the terminal."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def describe(exc: BaseException) -> list[str]:
    """The lines that say what went wrong, without a traceback."""
    if isinstance(exc, ToolError):
        return exc.problems
    if isinstance(exc, sqlite3.Error):
        return [f"database: {cause_of(exc)}"]
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
        return [f"database: {failure(exc)}"]
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return [f"{exc.strerror or exc}{where}"]
    if isinstance(exc, MemoryError):  # its own text is empty
        return ["out of memory (ask for less at once, or give the tool more memory)"]
    return [str(exc)]


def cause_of(exc: sqlite3.Error) -> str:
    """The first SQLite error of a chain: a failed rollback must not hide why it was needed."""
    while isinstance(exc.__context__, sqlite3.Error) and "cannot rollback" in str(exc):
        exc = exc.__context__
    if "database is locked" in str(exc):
        return "locked by another writer; gave up waiting (try again once it has finished)"
    return str(exc)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the tool is so that it stops as Ctrl-C stops it: the write
    rolled back, a new file it was writing removed."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


class HeldStops(CommitHooks):
    """SIGINT and SIGTERM held from a write's COMMIT on (see ``schema.CommitHooks``).

    A stop that came during the COMMIT or after it (closing the file, moving a new file
    into place, printing the report) used to end the tool with ``database unchanged:
    interrupted`` and exit 130 although the write was made. Held, it is sent again when
    the next transaction begins (to the handler that was in place: a sender's loop gets
    its own), and dropped when the tool ends: the write was made and is reported. Only
    the main thread handles signals, so only its writes hold them.
    """

    def __init__(self) -> None:
        self.saved: dict[int, Any] = {}
        self.pending: list[int] = []

    def _note(self, signum: int, frame: object) -> None:
        self.pending.append(signum)

    def committing(self) -> None:
        if self.saved or threading.current_thread() is not threading.main_thread():
            return
        self.saved = {signum: signal.signal(signum, self._note) for signum in STOPS}

    def beginning(self) -> None:
        pending = self.release()
        for signum in pending[:1]:  # the first stop: it ends the tool
            signal.raise_signal(signum)

    def release(self) -> list[int]:
        """Put the handlers back; return the stops that came meanwhile."""
        if threading.current_thread() is not threading.main_thread():
            return []
        for signum, handler in self.saved.items():
            signal.signal(signum, handler)
        self.saved, pending, self.pending = {}, self.pending, []
        return pending


@contextlib.contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Make SIGINT raise KeyboardInterrupt, and SIGTERM Terminated, while the tool runs,
    whatever it inherited.

    An ignored or blocked SIGINT survives exec: a shell starts ``tool &`` with it
    ignored when job control is off, and a parent may spawn us from a thread that blocks
    it. Python then installs no handler of its own, so Ctrl-C was lost and the tool ran
    to the end and exited 0. Every write is one transaction, so an
    interrupt is always safe. The caller's handler and mask come back afterwards (the
    tests call the tools in-process); only the main thread may set a handler.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
        signal.SIGTERM: signal.signal(signal.SIGTERM, _terminate),
    }
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, set(previous))
    held = schema.commit_hooks = HeldStops()
    try:
        early = start.first_held()  # a stop that came while the tool was imported
        if early is not None:
            signal.raise_signal(early)
        yield
    finally:
        held.release()  # a stop held since the last commit is dropped: the write was made
        schema.commit_hooks = CommitHooks()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for signum, handler in previous.items():
            if handler is not None:  # None: set outside Python, so it cannot be put back
                signal.signal(signum, handler)


def run_tool(main: Main, argv: Sequence[str] | None, refused: str) -> int:
    """Run ``main``; print any expected error as ``refused: cause`` and return its exit code.

    What the tool prints is written once it is done (every tool reports after its write),
    so a stdout that fails then is not taken for a refusal of a write that was made.
    """
    for warning in unknown_settings(os.environ):
        print(f"warning: {warning}", file=sys.stderr)
    report = io.StringIO()
    try:
        with ctrl_c_interrupts():
            with contextlib.redirect_stdout(report):
                done = main(argv)
            # Inside: a stop held since the write's commit is held while the report goes out.
            unwritten = unwritten_report(report.getvalue())
    except SystemExit:  # --help, or a usage error, which argparse printed
        with contextlib.suppress(OSError):  # the exit code says what happened
            write_report(report.getvalue())
        raise
    except KeyboardInterrupt as exc:
        return stopped(exc, refused)
    except (
        ToolError,
        KeyRefused,
        RulesError,
        DatabaseError,
        sqlite3.Error,
        OSError,
        MemoryError,  # the write is rolled back as for any other error
        *PG_ERRORS,
    ) as exc:
        if (behind := stop_behind(exc)) is not None:
            return stopped(behind, refused)
        lines = [printable(line) for line in describe(exc)]
        if len(lines) == 1:
            print(f"{refused}: {lines[0]}", file=sys.stderr)
        else:
            print(f"{refused}:", *(f"  {line}" for line in lines), sep="\n", file=sys.stderr)
        return EXIT_REFUSED
    if unwritten is not None:
        print(f"done, but its report could not be written: {unwritten}", file=sys.stderr)
        return EXIT_REFUSED
    return done


def stopped(stop: KeyboardInterrupt, refused: str) -> int:
    """Say that the tool was stopped (the write rolled back); its exit code."""
    if isinstance(stop, Terminated):
        print(f"{refused}: stopped by SIGTERM", file=sys.stderr)
        return EXIT_TERMINATED
    print(f"{refused}: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


def stop_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The stop an error came while handling, if any: a clean-up after a stop mid-query
    (dropping a scratch table while the cut-short query still holds it) fails, and its
    error ("database table is locked") must not hide the stop."""
    cause = exc.__context__
    while cause is not None:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        cause = cause.__context__
    return None


def unwritten_report(text: str) -> str | None:
    """Write the report; why it could not be (a full disk, a closed pipe, no stdout at
    all), or None."""
    try:
        write_report(text)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def write_report(text: str) -> None:
    """Write a tool's report to stdout; a tool started with its stdout closed (``>&-``)
    has none, which is a failure to write like a full disk's."""
    if sys.stdout is None:
        raise OSError(errno.EBADF, "stdout is closed")
    sys.stdout.write(text)
    sys.stdout.flush()


def database_file(text: str) -> str:
    """``--db`` as the tools read it: an empty name is a usage error (taken for no --db,
    it sent a tool to PostgreSQL at its default address)."""
    if not text:
        raise argparse.ArgumentTypeError("the SQLite file's name is empty")
    return text


class _FileOverVariable(argparse.Action):
    """``--db FILE`` given: that file, even with REPORTING_DATABASE_URL set. A flag wins
    over the environment (as the server's settings do); without this, the tools that
    look at the URL first (the key tool, the webhook tool, the GoPhish importer) wrote
    to PostgreSQL while the command line named a SQLite file."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        namespace.database_url = None


def add_store_arguments(parser: argparse.ArgumentParser, db_help: str) -> None:
    """``--db FILE`` or ``--database-url postgresql://...`` (default REPORTING_DATABASE_URL,
    which an explicit ``--db`` overrides: exactly one of ``db`` and ``database_url`` is set).

    The URL is checked as it is read (the variable's too): a malformed one is a usage
    error, not a traceback from the driver when it connects.
    """
    url = os.environ.get("REPORTING_DATABASE_URL") or None
    group = parser.add_mutually_exclusive_group(required=url is None)
    group.add_argument("--db", type=database_file, action=_FileOverVariable, help=db_help)
    group.add_argument(
        "--database-url",
        default=url,
        type=database_url,
        metavar="URL",
        help="postgresql://... : use PostgreSQL instead [env REPORTING_DATABASE_URL;"
        " --db overrides it]",
    )


def command(refused: str) -> Callable[[Main], Callable[..., int]]:
    """Make a tool's ``main`` end through :func:`run_tool`, its errors prefixed ``refused``."""

    def wrap(main: Main) -> Callable[..., int]:
        @functools.wraps(main)
        def wrapped(argv: Sequence[str] | None = None) -> int:
            return run_tool(main, argv, refused)

        return wrapped

    return wrap
