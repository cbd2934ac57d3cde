"""Put a new database file in place of the served one (installed as reporting-swap).

SQLite finds a database's WAL by the file's name. A file renamed over one whose WAL
still holds frames would be read through those frames, and the next writer would
checkpoint them into it. So the swap folds the new file's own WAL into it, renames it
over the old file while holding the old file's write lock (no writer adds frames in
between), and deletes the ``-wal`` and ``-shm`` the old file leaves behind. Each server
then closes the old file and opens the new one on its own, within a second.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from ..config import OneLineParser
from ..data.pool import companions
from ..data.schema import check_readable, file_identity, upgrade_if_older, write_transaction
from .cli import ToolError, command

LOCK_WAIT_MS = 30_000  # how long the swap waits for a load in progress to finish


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="reporting-swap",
        description="Replace the database file servers read with another, safely, while"
        " they run. The new file is moved (renamed), so it must be on the same file system.",
    )
    parser.add_argument("new", help="the database file to serve from now on")
    parser.add_argument("--db", required=True, help="the database file the servers read")
    return parser


COMPANION_ENDS = ("-wal", "-shm", "-journal")  # the files SQLite keeps beside a database


def swap(new: Path, db: Path) -> str:
    """Rename ``new`` over ``db`` as the module says; the new file's data token.

    A file of an older schema version (a backup from before an upgrade) is upgraded
    first, as the server upgrades its file before it serves: servers refuse to reopen one.

    A symbolic link is refused on either side: renamed, the link itself would move (and
    point elsewhere from its new folder), and a link to the served file would replace it
    with a link to itself."""
    for path in (new, db):
        if path.is_symlink():
            raise ToolError(f"{path} is a symbolic link: name the database file itself")
        if path.name.endswith(COMPANION_ENDS):  # opening the database would discard it
            raise ToolError(f"{path} is a database's companion file: name the database itself")
    if db.exists() and new.exists() and new.samefile(db):
        raise ToolError(f"{new} is the served file itself")
    upgrade_if_older(new)
    token = check_readable(new)
    _fold_wal(new)
    if os.stat(new).st_dev != os.stat(db.resolve().parent).st_dev:
        raise ToolError(f"{new} is on another file system than {db}: copy it beside {db} first")
    if not db.exists():
        os.replace(new, db)
        return token
    old = sqlite3.connect(db, isolation_level=None)
    try:
        old.execute(f"PRAGMA busy_timeout = {LOCK_WAIT_MS}")
        with write_transaction(old):  # writes nothing: holds the write lock meanwhile
            left = {file: file_identity(file, True) for file in companions(db)}
            os.replace(new, db)
            for file, identity in left.items():
                if identity is not None and file_identity(file, True) == identity:
                    file.unlink()
    finally:
        old.close()
    return token


def _fold_wal(new: Path) -> None:
    """Write the new file's WAL into it: only the main file is renamed."""
    conn = sqlite3.connect(new, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    if any(file.exists() for file in companions(new)):
        raise ToolError(f"{new} is open in another process (its -wal is still there): close it")


@command("swap refused")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; a refusal is one line on stderr and exit code 1."""
    args = build_parser().parse_args(argv)
    token = swap(Path(args.new), Path(args.db))
    print(
        f"Swapped {args.new} in as {args.db} (data token {token}); servers read it within a second."
    )
    return 0


# ``python -m app.tools.swap`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
