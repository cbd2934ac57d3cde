"""The API key tool: create, list, revoke and rotate keys (contract.md section 1).

Keys are printed once, when made; the database keeps only their SHA-256 hash, so a
lost key cannot be shown again, only rotated.
"""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..data.api_keys import (
    create_key,
    list_keys,
    prefix_of,
    revoke_key,
    rotate_key,
)
from ..data.schema import check_readable, connect_writer, write_transaction
from .cli import ToolError, command

T = TypeVar("T")
COLUMNS = ("id", "company", "label", "prefix", "created", "revoked")
SHOWN_ONCE = "Store it now: the key is not shown again (only its hash is kept)."


def build_parser() -> argparse.ArgumentParser:
    """The command line: --db and one subcommand."""
    parser = argparse.ArgumentParser(description="Create, list, revoke and rotate API keys.")
    parser.add_argument("--db", required=True, help="SQLite database file")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser("create", help="make a new key for a company (shown once)")
    create.add_argument("--company", required=True, type=int, help="company id")
    create.add_argument("--label", required=True, help="what the key is for")
    commands.add_parser("list", help="list every key (never the key itself)")
    revoke = commands.add_parser("revoke", help="revoke a key (401 within 5 seconds)")
    revoke.add_argument("key_id", type=int, metavar="KEY_ID")
    rotate = commands.add_parser("rotate", help="replace a key: new key, old one revoked")
    rotate.add_argument("key_id", type=int, metavar="KEY_ID")
    return parser


def existing(db: str) -> Path:
    """The database file; the tool never creates one."""
    if not Path(db).is_file():
        raise ToolError(f"database file {db} does not exist")
    return Path(db)


def in_transaction(db: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(conn, *args)`` in one write transaction on an existing database."""
    conn = connect_writer(existing(db))
    try:
        with write_transaction(conn):
            return fn(conn, *args)
    finally:
        conn.close()


def reading(db: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(conn, *args)`` on a read-only connection: no write lock, no waiting on one."""
    file = existing(db)
    check_readable(file)  # a schema version this tool knows
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return fn(conn, *args)
    finally:
        conn.close()


def print_new_key(verb: str, key_id: int, key: str) -> None:
    """Show a fresh key, the only time it is ever shown."""
    print(f"{verb} key {key_id} (prefix {prefix_of(key)}):")
    print(f"  {key}")
    print(SHOWN_ONCE)


def format_table(keys: list[dict[str, Any]]) -> str:
    """A plain aligned table of the keys' public facts."""
    rows = [
        (
            str(k["id"]),
            f"{k['company_id']} {k['name']}",
            k["label"],
            k["prefix"],
            k["created_at"],
            k["revoked_at"] or "-",
        )
        for k in keys
    ]
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    header = "  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))
    return "\n".join(line.rstrip() for line in [header, *lines])


def run(args: argparse.Namespace) -> None:
    """Carry out one subcommand."""
    if args.command == "create":
        key_id, key = in_transaction(args.db, create_key, args.company, args.label)
        print_new_key("Created", key_id, key)
    elif args.command == "list":
        print(format_table(reading(args.db, list_keys)))
    elif args.command == "revoke":
        in_transaction(args.db, revoke_key, args.key_id)
        print(f"Revoked key {args.key_id}; the server refuses it within 5 seconds.")
    elif args.command == "rotate":
        key_id, key = in_transaction(args.db, rotate_key, args.key_id)
        print(f"Revoked key {args.key_id}.")
        print_new_key("Created replacement", key_id, key)


@command("error")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; a refusal is one line on stderr and exit code 1."""
    run(build_parser().parse_args(argv))
    return 0
