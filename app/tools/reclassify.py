"""Decide the verdicts again, after a change of the settings (installed as
reporting-reclassify).

One company or all, in one transaction, with the environment's settings, which are then
recorded for those companies. An event whose verdict or reasons change takes a new place
in the change sequence, so the event feed sends it again, as any changed event.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from collections.abc import Sequence

from ..config import OneLineParser
from ..data.automation import Rules, classify, rules_from_env
from ..data.pg.automation import classify as classify_pg
from ..data.pg.schema import bump_data_version as bump_pg
from ..data.pg.schema import ensure_schema as ensure_pg
from ..data.pg.schema import schema_version
from ..data.pg.session import connect
from ..data.pg.stats_summary import refresh as refresh_stats_pg
from ..data.pg.summaries import refresh as refresh_reports_pg
from ..data.schema import (
    DatabaseError,
    bump_data_version,
    connect_writer,
    ensure_schema,
    write_transaction,
)
from ..data.stats_summary import Touched
from ..data.stats_summary import refresh as refresh_stats
from ..data.summaries import refresh as refresh_reports
from .cli import ToolError, add_store_arguments, command, plural, record_id
from .keytool import existing

Moved = Counter[tuple[str, str]]


def scope(company: int | None) -> str:
    """The campaigns to decide: the company's, or every one."""
    return "SELECT id FROM campaigns" + (
        "" if company is None else f" WHERE company_id = {company}"
    )


def reclassify(db: str, company: int | None, rules: Rules) -> Moved:
    """Decide the SQLite database's verdicts again; the events moved, per (old, new)."""
    conn = connect_writer(existing(db), schema_in_write=True)
    try:
        with write_transaction(conn):
            ensure_schema(conn, rules, in_write=True)  # a refusal leaves an older file as it was
            if (
                company is not None
                and not conn.execute("SELECT 1 FROM companies WHERE id = ?", (company,)).fetchone()
            ):
                raise ToolError(f"unknown company {company}")
            seq = conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()[0]
            moved = classify(conn, rules, scope(company), int(seq))
            refresh_stats(conn, int(seq), Touched())
            refresh_reports(conn, "", int(seq))
            if moved:
                bump_data_version(conn)
            return moved
    finally:
        conn.close()


async def reclassify_pg(url: str, company: int | None, rules: Rules) -> Moved:
    """:func:`reclassify` on PostgreSQL (loads take turns with it by the loaders' lock)."""
    conn = await connect(url)
    try:
        if await schema_version(conn) is None:  # as on SQLite: no schema is made here
            raise DatabaseError("the PostgreSQL database has no schema (load fixtures first)")
        async with conn.transaction():
            await ensure_pg(conn, rules)  # in the write: a refusal leaves an older schema
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('reporting load'))")
            if company is not None and not await conn.fetchval(
                "SELECT EXISTS (SELECT 1 FROM companies WHERE id = $1)", company
            ):
                raise ToolError(f"unknown company {company}")
            seq = await conn.fetchval("SELECT value::bigint FROM meta WHERE key = 'change_seq'")
            moved = await classify_pg(conn, rules, scope(company), seq)
            await refresh_stats_pg(conn, seq, Touched())
            await refresh_reports_pg(conn, "", seq)
            if moved:
                await bump_pg(conn)
            return moved
    finally:
        await conn.close()


def summary(company: int | None, moved: Moved) -> str:
    """``reclassified company 1: 1 event moved between verdicts (automated to human 1)``."""
    between = {pair: n for pair, n in sorted(moved.items()) if pair[0] != pair[1]}
    detail = ", ".join(f"{old} to {new} {n:,}" for (old, new), n in between.items())
    line = (
        f"reclassified {'every company' if company is None else f'company {company}'}:"
        f" {plural(sum(between.values()), 'event')} moved between verdicts"
        + (f" ({detail})" if detail else "")
    )
    others = sum(n for pair, n in moved.items() if pair[0] == pair[1])
    kept = "event kept its verdict" if others == 1 else "events kept their verdicts"
    return line + (f"; {others:,} {kept} with other reasons" if others else "")


def build_parser() -> argparse.ArgumentParser:
    """The command line: --company and the store."""
    parser = OneLineParser(
        description="Decide every event's verdict again with the current settings"
        " (REPORTING_BOT_FAST_SECONDS, REPORTING_BOT_NETWORKS), in one transaction."
    )
    parser.add_argument("--company", type=record_id, help="this company only (default: every one)")
    add_store_arguments(parser, "SQLite database file")
    return parser


@command("reclassify refused, database unchanged")
def main(argv: Sequence[str] | None = None) -> int:
    """Reclassify and print how many events moved between verdicts."""
    args = build_parser().parse_args(argv)
    rules = rules_from_env()
    if args.db is not None:
        moved = reclassify(args.db, args.company, rules)
    else:
        moved = asyncio.run(reclassify_pg(args.database_url, args.company, rules))
    print(summary(args.company, moved))
    return 0


# ``python -m app.tools.reclassify`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
