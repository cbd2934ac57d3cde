"""Import GoPhish campaigns into one company (contract.md 16), all or nothing.

``python -m app.tools.gophish export.json --company 1 (--db PATH | --database-url URL)
[--people people.csv] [--source NAME] [--company-name NAME]``: the export (and people
file) are read and checked whole, mapped to one fixture document, and loaded by the
ordinary loader of the store (SQLite's or PostgreSQL's) in one transaction. Any problem
refuses the whole import and the database is unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import OneLineParser
from ..data.fields import MAX_LABEL, MAX_SAFE_ID, one_line_label
from ..data.pg.schema import schema_version
from ..data.pg.session import connect
from ..data.pg.sql import numbered
from ..data.schema import DatabaseError
from .cli import add_store_arguments, command, record_id
from .fixture_reader import Item
from .gophish_format import Problems, mailbox, read_export, read_people, refusal
from .gophish_ids import has_wide_ids, has_wide_ids_pg, renumber, renumber_pg, safe_id
from .gophish_mapping import Context, Summary, to_fixture
from .loader import load_items
from .pg_loader import load_staged, stage_sources
from .staging import CHANGED, LoadError

DEFAULT_SOURCE = "gophish"
_SOURCE = re.compile(r"[a-z0-9][a-z0-9._:-]{0,99}")


# The company's employees, newest first (so the lowest id wins an email), and every id.
PEOPLE = (
    "SELECT id, company_id, first_name, last_name, email, department, country"
    " FROM employees WHERE company_id = ? ORDER BY id DESC"
)
EMPLOYEE_IDS = "SELECT id FROM employees"
COMPANY_NAME = "SELECT name FROM companies WHERE id = ?"


def _known(ctx: Context, people: Sequence[dict[str, Any]], ids: Sequence[int]) -> None:
    """The company's employees by mailbox, and the employee ids already taken, each id
    as it is once an earlier import's wide ids are brought under 2^53 (:mod:`.gophish_ids`)."""
    for person in people:
        ctx.existing[mailbox(person["email"])] = person | {"id": safe_id(person["id"])}
    ctx.taken_ids = {safe_id(i) for i in ids}


def read_company(db: Path, company: int, source: str) -> tuple[str | None, Context]:
    """The company's name (None when absent) and its employees by email; writes nothing."""
    ctx = Context(company, source)
    if not db.exists():
        return None, ctx
    try:
        # Read-write but only reading: closing the last connection then removes the WAL
        # file, where a read-only one would leave an empty one behind.
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=rw", uri=True)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] == 0:
                return None, ctx  # an empty file: the loader will create the schema
            row = conn.execute(COMPANY_NAME, (company,)).fetchone()
            people = conn.execute(PEOPLE, (company,))
            columns = [d[0] for d in people.description]
            rows = [dict(zip(columns, values, strict=True)) for values in people]
            _known(ctx, rows, [r[0] for r in conn.execute(EMPLOYEE_IDS)])
            ctx.wide_ids = has_wide_ids(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DatabaseError(f"cannot read the database: {exc}") from None
    return (None if row is None else str(row[0])), ctx


async def read_company_pg(url: str, company: int, source: str) -> tuple[str | None, Context]:
    """:func:`read_company` from a PostgreSQL database."""
    ctx = Context(company, source)
    conn = await connect(url)
    try:
        if await schema_version(conn) is None:
            return None, ctx  # an empty database: the loader will create the schema
        name = await conn.fetchval(numbered(COMPANY_NAME), company)
        people = [dict(r) for r in await conn.fetch(numbered(PEOPLE), company)]
        _known(ctx, people, [r[0] for r in await conn.fetch(EMPLOYEE_IDS)])
        ctx.wide_ids = await has_wide_ids_pg(conn)
    finally:
        await conn.close()
    return (None if name is None else str(name)), ctx


def import_export(
    db: Path | None,
    export: Path,
    company: int,
    *,
    source: str = DEFAULT_SOURCE,
    people: Path | None = None,
    company_name: str | None = None,
    database_url: str = "",
) -> Summary:
    """Check, map and load one export into the SQLite file ``db`` or, with
    ``database_url``, PostgreSQL; raise LoadError (database unchanged) on any problem."""
    problems = Problems(export)
    campaigns = read_export(export, problems)
    if database_url:
        name, ctx = asyncio.run(read_company_pg(database_url, company, source))
    else:
        assert db is not None
        name, ctx = read_company(db, company, source)
    refused: list[str] = []
    if people is not None:
        try:
            ctx.people = read_people(people)
        except LoadError as exc:
            refused = exc.problems
    # Checked as a key's or a subscription's label is (the fixture's Text checks only the
    # length and NUL): a blank name or one with a tab or line break names nothing readable.
    if company_name is not None and not (company_name.strip() and one_line_label(company_name)):
        refused.append(
            f"--company-name is blank or not one line of at most {MAX_LABEL} printable characters"
        )
    if company > MAX_SAFE_ID:
        # No store holds such a company (the loader takes ids up to 2^53-1): said once,
        # rather than once for each mapped row that would name it.
        refused.append(f"--company {company}: not an id from 1 to {MAX_SAFE_ID}")
    elif name is None and company_name is None:
        where = "the database" if database_url else db
        refused.append(f"--company {company}: no such company in {where} (--company-name adds it)")
    document: dict[str, Any]
    try:
        document, summary = to_fixture(campaigns, ctx, problems)
    except LoadError as exc:
        raise refusal(exc.problems, refused) from None
    if refused:
        raise refusal(refused)
    if name is None:
        document["companies"] = [{"id": company, "name": company_name}]
    if not any(document.values()) and not ctx.wide_ids:
        summary.changed = False  # nothing to write: the data version (every cache) stays
        return summary
    items = (Item(t, i, record) for t, rows in document.items() for i, record in enumerate(rows))
    sources = [(f"{export} (mapped)", items)]
    if database_url:
        prepare_pg = renumber_pg if ctx.wide_ids else None
        counts = asyncio.run(load_staged(database_url, stage_sources(sources), prepare_pg))
    else:
        assert db is not None
        counts = load_items(db, sources, prepare=renumber if ctx.wide_ids else None)
    summary.changed = bool(counts[CHANGED])
    return summary


def _source(text: str) -> str:
    if not _SOURCE.fullmatch(text.lower()):
        raise argparse.ArgumentTypeError(
            f"{text!r}: 1 to 100 letters, digits and . _ : - (starting with a letter or digit)"
        )
    return text.lower()


def build_parser() -> OneLineParser:
    """The command line."""
    parser = OneLineParser(
        description="Import GoPhish campaigns (JSON of /api/campaigns/ or /api/campaigns/{id}).",
    )
    parser.add_argument("export", type=Path, help="the JSON GoPhish's API returned")
    parser.add_argument("--company", type=record_id, required=True, help="our company id")
    add_store_arguments(parser, "SQLite database file")
    parser.add_argument("--people", type=Path, help="CSV with email,department,country")
    parser.add_argument(
        "--source",
        type=_source,
        default=DEFAULT_SOURCE,
        help=f"name of the GoPhish server (default {DEFAULT_SOURCE}); one per server",
    )
    parser.add_argument("--company-name", help="create the company with this name if missing")
    return parser


@command("import refused, database unchanged")
def main(argv: Sequence[str] | None = None) -> int:
    """Run one import; print the summary line (a refusal names each problem)."""
    args = build_parser().parse_args(argv)
    summary = import_export(
        Path(args.db) if args.db is not None else None,
        args.export,
        args.company,
        source=args.source,
        people=args.people,
        company_name=args.company_name,
        database_url=args.database_url or "",
    )
    print(f"imported {args.export} into company {args.company} ({args.source}): {summary.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
