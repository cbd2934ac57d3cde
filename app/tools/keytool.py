"""The API key tool: create, list, revoke and rotate keys (contract.md section 1), and
make partners, whose keys read several companies.

Keys are printed once, when made; the database keeps only their SHA-256 hash, so a
lost key cannot be shown again, only rotated. A revoked key stays revoked: it is
neither revoked again nor rotated back to life.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from ..config import OneLineParser
from ..data import schema
from ..data.api_keys import (
    CACHE_SECONDS,
    SCOPES,
    NewKey,
    add_partner_company,
    create_key,
    create_partner,
    list_keys,
    prefix_of,
    revoke_key,
    rotate_key,
)
from ..data.pg import api_keys as pg_keys
from ..data.pg.schema import bump_data_version as bump_pg
from ..data.pg.schema import upgrade_if_older
from ..data.pg.session import connect
from ..data.pg.store import check_schema
from ..data.schema import (
    bump_data_version,
    check_readable,
    connect_writer,
    ensure_schema,
    write_transaction,
)
from .cli import ToolError, add_store_arguments, command, record_id

# What a revocation means for a running server: its key cache (data.api_keys) decides.
REFUSED_WITHIN = f"the server refuses it within {CACHE_SECONDS:g} seconds"

T = TypeVar("T")
COLUMNS = ("id", "owner", "scopes", "label", "prefix", "created", "expires", "revoked")
SHOWN_ONCE = "Store it now: the key is not shown again (only its hash is kept)."
UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
LONGEST = 100 * 365 * 86_400  # a century: beyond it, "never" is what is meant
TIME_HELP = "a whole number and a unit: d (days), h (hours), m (minutes) or s (seconds)"


def lifetime(text: str) -> int:
    """``90d``, ``12h``, ``30m`` or ``45s`` as seconds; argparse reports anything else."""
    found = re.fullmatch(r"([0-9]{1,12})([dhms])", text.strip())
    seconds = int(found[1]) * UNITS[found[2]] if found else 0
    if not 0 < seconds <= LONGEST:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a lifetime such as 90d, 12h, 30m or 45s (at most 100 years)"
        )
    return seconds


def build_parser() -> argparse.ArgumentParser:
    """The command line: --db and one subcommand, every argument with its help."""
    parser = OneLineParser(description="Create, list, revoke and rotate API keys.")
    add_store_arguments(parser, "SQLite database file (must exist)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    create = commands.add_parser(
        "create",
        help="make a new key for a company or a partner (shown once)",
        description="Make a new key; it is printed once, then only its hash is kept.",
    )
    owner = create.add_mutually_exclusive_group(required=True)
    owner.add_argument(
        "--company", type=record_id, metavar="ID", help="the company the key reads for"
    )
    owner.add_argument(
        "--partner",
        type=record_id,
        metavar="ID",
        help="the partner whose companies the key reads (each request names one)",
    )
    create.add_argument(
        "--scope",
        metavar="SCOPES",
        help=f"what the key may read, separated by spaces or commas, among {', '.join(SCOPES)} "
        "(default: every scope)",
    )
    create.add_argument(
        "--label", required=True, help="what the key is for, e.g. 'SIEM export' (not blank)"
    )
    create.add_argument(
        "--expires-in",
        type=lifetime,
        metavar="TIME",
        help=f"the key stops working TIME after now; TIME is {TIME_HELP}, e.g. 90d "
        "(default: it works until revoked)",
    )
    commands.add_parser(
        "list",
        help="list every key (never the key itself)",
        description="List every key: its company or partner (with the partner's companies), "
        "scopes, label, prefix, creation, expiry (marked 'expired' once past) and revocation. "
        "Reads only: it never waits for a writer.",
    )
    partner = commands.add_parser(
        "partner", help="make partners and give them companies (a partner's keys read them all)"
    )
    partner_commands = partner.add_subparsers(dest="partner_command", required=True)
    made = partner_commands.add_parser("create", help="make a partner; prints its id")
    made.add_argument("--name", required=True, help="the partner's name (not blank)")
    add = partner_commands.add_parser(
        "add-company",
        help=f"let a partner's keys read a company (within {CACHE_SECONDS:g} seconds)",
    )
    add.add_argument("partner_id", type=record_id, metavar="PARTNER_ID", help="the partner's id")
    add.add_argument("company_id", type=record_id, metavar="COMPANY_ID", help="the company's id")
    revoke = commands.add_parser("revoke", help=f"revoke a key ({REFUSED_WITHIN})")
    revoke.add_argument(
        "key_id", type=record_id, metavar="KEY_ID", help="the key's id, as list shows"
    )
    rotate = commands.add_parser(
        "rotate",
        help="replace a key: new key, old one revoked",
        description="Replace a key that is not revoked: a new key for the same company "
        "and label, and the old one revoked. A revoked key is refused.",
    )
    rotate.add_argument(
        "key_id", type=record_id, metavar="KEY_ID", help="the key's id, as list shows"
    )
    rotate.add_argument(
        "--expires-in",
        type=lifetime,
        metavar="TIME",
        help=f"the new key stops working TIME after now; TIME is {TIME_HELP} "
        "(default: the lifetime the old key was given, if any)",
    )
    return parser


def existing(db: str) -> Path:
    """The database file; the tool never creates one (an empty file is none yet: SQLite
    would take it for a new database, and the tool would make its tables)."""
    if not Path(db).is_file():
        raise ToolError(f"database file {db} does not exist")
    if Path(db).stat().st_size == 0 or not has_tables(Path(db)):
        raise ToolError(f"database file {db} is empty: make it with reporting-load first")
    return Path(db)


def has_tables(file: Path) -> bool:
    """Whether the file holds a schema (of any version): a file a refused load left
    without tables (SQLite's header, in WAL mode) is empty all the same."""
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM sqlite_master)").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return True  # not for this check to say: opening it for the write will


def in_transaction(db: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn(conn, *args, **kwargs)`` in one write transaction on an existing database;
    an older file is upgraded in that transaction, so a refused command leaves it as it was."""
    conn = connect_writer(existing(db), schema_in_write=True)
    try:
        with write_transaction(conn):
            ensure_schema(conn, in_write=True)
            return fn(conn, *args, **kwargs)
    finally:
        conn.close()


def reading(db: str, fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn(conn, *args)`` on a read-only connection: no write lock, no waiting on one
    (but to upgrade an older file first, as on PostgreSQL and as every writer does)."""
    file = existing(db)
    schema.upgrade_if_older(file)
    check_readable(file)  # a schema version this tool knows
    conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return fn(conn, *args)
    finally:
        conn.close()


def print_new_key(verb: str, new: NewKey) -> None:
    """Show a fresh key, the only time it is ever shown."""
    print(f"{verb} key {new.key_id} (prefix {prefix_of(new.key)}):")
    print(f"  {new.key}")
    print(SHOWN_ONCE)
    if new.expires_at:
        print(f"It expires at {new.expires_at} (UTC).")


def format_table(keys: list[dict[str, Any]]) -> str:
    """A plain aligned table of the keys' public facts."""
    rows = [
        (
            str(k["id"]),
            f"company {k['company_id']} {k['name']}"
            if k["partner_id"] is None
            else f"partner {k['partner_id']} {k['name']} (companies {k['companies'] or '-'})",
            k["scopes"],
            k["label"],
            k["prefix"],
            k["created_at"],
            f"{k['expires_at']}{' (expired)' if k['expired'] else ''}" if k["expires_at"] else "-",
            k["revoked_at"] or "-",
        )
        for k in keys
    ]
    widths = [max(len(row[i]) for row in [COLUMNS, *rows]) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    header = "  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))
    return "\n".join(line.rstrip() for line in [header, *lines])


async def on_postgresql(url: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """Run the PostgreSQL key function ``name`` in one transaction (the schema must exist)."""
    return await in_pg_transaction(url, getattr(pg_keys, name), *args, **kwargs)


async def in_pg_transaction(
    url: str, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
) -> T:
    """Run ``fn(conn, *args)`` in one transaction on PostgreSQL, which upgrades an older
    schema first (a refused command leaves it as it was) and checks the schema."""
    conn = await connect(url)
    try:
        async with conn.transaction():
            await upgrade_if_older(conn)
            await check_schema(conn)
            return await fn(conn, *args, **kwargs)
    finally:
        await conn.close()


def key_arguments(args: argparse.Namespace) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``create``'s arguments for either store's ``create_key``."""
    return (args.company, args.label, args.expires_in), {
        "scopes": args.scope,
        "partner_id": args.partner,
    }


def run(args: argparse.Namespace) -> None:
    """Carry out one subcommand."""
    if args.database_url:
        run_on_postgresql(args)
    elif args.command == "create":
        positional, named = key_arguments(args)
        print_new_key("Created", in_transaction(args.db, create_key, *positional, **named))
    elif args.command == "partner" and args.partner_command == "create":
        print(f"Created partner {in_transaction(args.db, create_partner, args.name)}.")
    elif args.command == "partner":
        added = in_transaction(args.db, partner_reads, args.partner_id, args.company_id)
        print(partner_reads_line(args, added))
    elif args.command == "list":
        print(format_table(reading(args.db, list_keys)))
    elif args.command == "revoke":
        in_transaction(args.db, revoke_key, args.key_id)
        print(f"Revoked key {args.key_id}; {REFUSED_WITHIN}.")
    elif args.command == "rotate":
        new = in_transaction(args.db, rotate_key, args.key_id, args.expires_in)
        print(f"Revoked key {args.key_id}.")
        print_new_key("Created replacement", new)


def partner_reads(conn: sqlite3.Connection, partner_id: int, company_id: int) -> bool:
    """One more company for the partner: its rollup lists it, so the data version moves
    (new ETags and totals), as with a load. A company it already reads changes nothing,
    so every ETag stays; False then."""
    added = add_partner_company(conn, partner_id, company_id)
    if added:
        bump_data_version(conn)
    return added


async def partner_reads_pg(conn: asyncpg.Connection, partner_id: int, company_id: int) -> bool:
    """The same on PostgreSQL."""
    added = await pg_keys.add_partner_company(conn, partner_id, company_id)
    if added:
        await bump_pg(conn)
    return added


def partner_reads_line(args: argparse.Namespace, added: bool) -> str:
    """What ``partner add-company`` did, in one line."""
    if added:
        return f"Partner {args.partner_id} reads company {args.company_id}."
    return f"Partner {args.partner_id} already reads company {args.company_id}; nothing changed."


def run_on_postgresql(args: argparse.Namespace) -> None:
    """The same subcommands and output, on the PostgreSQL database of ``--database-url``."""
    url = args.database_url
    if args.command == "create":
        positional, named = key_arguments(args)
        print_new_key(
            "Created", asyncio.run(on_postgresql(url, "create_key", *positional, **named))
        )
    elif args.command == "partner" and args.partner_command == "create":
        print(f"Created partner {asyncio.run(on_postgresql(url, 'create_partner', args.name))}.")
    elif args.command == "partner":
        added = asyncio.run(
            in_pg_transaction(url, partner_reads_pg, args.partner_id, args.company_id)
        )
        print(partner_reads_line(args, added))
    elif args.command == "list":
        print(format_table(asyncio.run(on_postgresql(url, "list_keys"))))
    elif args.command == "revoke":
        asyncio.run(on_postgresql(url, "revoke_key", args.key_id))
        print(f"Revoked key {args.key_id}; {REFUSED_WITHIN}.")
    elif args.command == "rotate":
        new = asyncio.run(on_postgresql(url, "rotate_key", args.key_id, args.expires_in))
        print(f"Revoked key {args.key_id}.")
        print_new_key("Created replacement", new)


@command("error")
def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; a refusal is one line on stderr and exit code 1."""
    run(build_parser().parse_args(argv))
    return 0


# ``python -m app.tools.keytool`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
