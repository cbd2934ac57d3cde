"""Loader processes for tests: started at once, held at the write lock, watched by their log."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .servers import GUARD_SECONDS, ROOT

# Runs load_files with plain progress lines on stderr; problems on stdout, exit 1.
LOAD = (
    "import sys; from app.tools.loader import LoadError, load_files\n"
    "try: load_files(sys.argv[1], sys.argv[2:], progress=True)\n"
    "except LoadError as exc: print(*exc.problems, sep='\\n'); sys.exit(1)\n"
)


def write_fixture(path: Path, document: dict[str, Any]) -> Path:
    """Write a fixture document and return its path."""
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def start_load(db: Path, fixture: Path, log: Path) -> subprocess.Popen[bytes]:
    """A loader process; its progress lines (the end of its reading) go to ``log``."""
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", LOAD, str(db), str(fixture)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
        )


def wait_for(log: Path, text: str) -> None:
    """Until the process writing ``log`` has printed ``text``."""
    deadline = time.monotonic() + GUARD_SECONDS
    while text not in log.read_text(encoding="utf-8"):
        assert time.monotonic() < deadline, log.read_text(encoding="utf-8")
        time.sleep(0.02)


@contextmanager
def write_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Hold the database's write lock (as another writer would) until the block ends."""
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield holder
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def loads_at_once(db: Path, files: list[Path], last_tables: list[str]) -> list[tuple[int, str]]:
    """Start one loader per file while the lock is held; release it once each has read its
    file (``last_tables``: the last table of each), so that they all wait for the lock
    together. Return each loader's exit code and output."""
    logs = [file.with_suffix(".log") for file in files]
    with write_lock(db):
        loads = [start_load(db, f, log) for f, log in zip(files, logs, strict=True)]
        for log, table in zip(logs, last_tables, strict=True):
            wait_for(log, f"{table}: ")
        time.sleep(0.2)  # from reading to waiting for the lock takes no time at all
    return [(p.wait(timeout=GUARD_SECONDS), p.communicate()[0].decode()) for p in loads]
