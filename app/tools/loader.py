"""Load fixture files: validate every record, check every reference, write in one go.

A load is all or nothing, in three steps:

1. Stream: each file is parsed incrementally and each record validated as it arrives,
   then staged in a temporary table (memory stays flat whatever the file's size). This
   needs no lock, so a long parse never blocks another writer; a file that cannot be read
   or parsed is refused here, before any lock or write.
2. Check and write, inside one write transaction (BEGIN IMMEDIATE): table by table,
   parents first, the reference and tenancy checks read the database as it is now (no
   other load can change it until COMMIT), then the table's clean rows are upserted.
3. If any problem was found, in any file or table, everything rolls back and the first
   ``MAX_SHOWN`` problems are reported together; otherwise COMMIT.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path

from ..config import OneLineParser
from ..data.automation import Rules, classify, rules_from_env
from ..data.schema import (
    DatabaseError,
    bump_data_version,
    changed_rows,
    connect_writer,
    ensure_schema,
    into_new_file,
    scratch_transaction,
    write_transaction,
)
from ..data.stats_summary import Touched
from ..data.stats_summary import refresh as refresh_stats
from ..data.summaries import refresh as refresh_reports
from .cli import add_store_arguments, cause_of, command, plural
from .fixture_format import TABLES
from .fixture_reader import Item
from .load_checks import check
from .load_progress import Meter
from .load_writes import (
    ADVANCE_SEQ,
    DERIVED_COMPLETIONS,
    IMPLIED_TARGETS,
    MERGES,
    indexes_set_aside,
)
from .pg_loader import load_pg
from .staging import (
    CHANGED,
    IMPLIED,
    PARENTS,
    WRITTEN,
    Stage,
    any_problem,
    file_items,
    refuse_if_problems,
    stage_source,
)
from .staging import LoadError as LoadError  # the loader's refusal, where callers look

# fixtures/ ships inside the package as app.fixtures (see pyproject.toml), so an
# installed wheel finds the sample as a clone does.
SAMPLE_FIXTURE = Path(str(resources.files("app.fixtures") / "sample.json"))
LOCK_WAIT = 30.0  # seconds a load waits for another writer before giving up
# SQLite's page caches during a load: the main database's, and the temporary one's that
# stages the records. Each of SQLite's sorters also holds up to the main cache's size
# before it spills to a file, so these bound the load's memory whatever the files' size.
# Larger main caches made no load faster: the standard set's whole load took 87 and
# 90 s with 24 MiB, 79 and 85 s with 8 (peak 152 MB against 101 MB), and 1,000 events
# into the large set about 1.9 s with either.
CACHE_MIB = 8
TEMP_CACHE_MIB = 16


def load_files(
    db_path: str | Path,
    files: Iterable[str | Path],
    *,
    progress: bool = False,
    lock_wait: float = LOCK_WAIT,
) -> dict[str, int]:
    """Validate the files and load them into the database in one transaction.

    Returns the records read per table (and what the load wrote of note: events new or
    changed, targets implied); raises LoadError listing the problems, the database
    unchanged, or DatabaseError when the database itself refuses.
    """
    sources = ((str(name), file_items(Path(name))) for name in files)
    return load_items(db_path, sources, progress=progress, lock_wait=lock_wait)


def load_items(
    db_path: str | Path,
    sources: Iterable[tuple[str, Iterable[Item]]],
    *,
    progress: bool = False,
    lock_wait: float = LOCK_WAIT,
    prepare: Callable[[sqlite3.Connection], None] | None = None,
    rules: Rules | None = None,
) -> dict[str, int]:
    """``load_files`` for records that come from elsewhere (an importer): each source is
    a name for the problems and its items (table, position in the table, raw record);
    ``prepare`` runs first in the write transaction (the importer's id upgrade); the
    verdicts follow ``rules`` (default: the environment's settings)."""
    with into_new_file(db_path) as path:
        return _load_into(path, sources, progress, lock_wait, prepare, rules or rules_from_env())


def _load_into(
    db_path: Path,
    sources: Iterable[tuple[str, Iterable[Item]]],
    progress: bool,
    lock_wait: float,
    prepare: Callable[[sqlite3.Connection], None] | None,
    rules: Rules,
) -> dict[str, int]:
    meter = Meter(progress)
    try:
        conn = connect_writer(db_path, schema_in_write=True)
    except sqlite3.Error as exc:
        raise _database_error(exc) from None
    try:
        conn.execute(f"PRAGMA cache_size = -{CACHE_MIB * 1024}")
        conn.execute(f"PRAGMA temp.cache_size = -{TEMP_CACHE_MIB * 1024}")
        with scratch_transaction(conn):  # the temporary database only: no lock on the file
            stage = Stage(conn)
            for name, items in sources:
                stage_source(stage, name, items, meter)
            meter.close()
            if stage.unreadable:  # nothing to check against the database: no lock, no write
                refuse_if_problems(conn)
            stage.index()
        conn.execute(f"PRAGMA busy_timeout = {int(lock_wait * 1000)}")
        with write_transaction(conn):
            # A file without tables gets them here, an older one its upgrade; a renumbering
            # prepare changes ids.
            reshaped = ensure_schema(conn, rules, in_write=True) or prepare is not None
            if prepare is not None:
                prepare(conn)
            counts = _check_and_write(conn, stage, meter, rules, reshaped)
        return counts
    except sqlite3.Error as exc:
        raise _database_error(exc) from None
    finally:
        meter.close()
        conn.close()


def _check_and_write(
    conn: sqlite3.Connection, stage: Stage, meter: Meter, rules: Rules, reshaped: bool
) -> dict[str, int]:
    """Check and upsert each table, parents first; raise LoadError if anything was wrong.
    Then decide the verdicts of the campaigns whose events or targets the load gave.

    Only a load that changed a row (or ``reshaped`` the database) refreshes the summaries
    and moves the data version: the same files loaded again keep every ETag."""
    counts = dict(stage.counts)
    seq = int(conn.execute("SELECT value FROM main.meta WHERE key = 'change_seq'").fetchone()[0])
    changed = int(reshaped)
    for table in TABLES:
        if not counts[table]:
            continue
        with meter.step(f"check and write {table}", counts[table]):
            check(conn, table)
            if table in PARENTS or not any_problem(conn):
                with indexes_set_aside(conn, table, counts[table]):
                    conn.execute(MERGES[table])
                    written = changed_rows(conn)
                changed += written
                if table == "campaign_events":
                    counts[WRITTEN] = written
                    conn.execute(ADVANCE_SEQ, (written,))
    if counts["campaign_events"] and not any_problem(conn):
        conn.execute(IMPLIED_TARGETS)
        counts[IMPLIED] = changed_rows(conn)
        changed += counts[IMPLIED]
    if counts["inscriptions"] and not any_problem(conn):
        conn.execute(DERIVED_COMPLETIONS)
        changed += changed_rows(conn)
    refuse_if_problems(conn)
    if counts["campaign_events"] or counts["campaign_targets"]:
        changed += classify(conn, rules, TOUCHED, seq).total()
    counts[CHANGED] = changed
    if changed:
        refresh_stats(conn, seq, LOADED)
        refresh_reports(conn, TOUCHED_SENDS, seq)
        bump_data_version(conn)
    return counts


# The campaigns whose verdicts a load may change: those it gives events or targets of,
# and those an event it gives leaves for another campaign (the trigger of the stats'
# summaries notes that old send): the neighbours left behind may stop being a burst or
# a shared address.
TOUCHED = (
    "SELECT campaign_id FROM temp.stage_campaign_events WHERE valid"
    " UNION SELECT campaign_id FROM temp.stage_campaign_targets WHERE valid"
    " UNION SELECT campaign_id FROM main.stats_moved_sends"
)
# The sends whose summaries a load may change besides those of its events: its targets.
TOUCHED_SENDS = "SELECT campaign_id, employee_id FROM temp.stage_campaign_targets WHERE valid"


# What the stats' summaries take again (app/data/stats_summary.py): the rows it gave.
LOADED = Touched(
    campaigns="SELECT id FROM temp.stage_campaigns WHERE valid",
    employees="SELECT id FROM temp.stage_employees WHERE valid"
    " UNION SELECT employee_id FROM temp.stage_team_members WHERE valid"
    " UNION SELECT m.employee_id FROM temp.stage_teams s"
    " JOIN main.team_members m ON m.team_id = s.id WHERE s.valid",
    sends="SELECT campaign_id, employee_id FROM temp.stage_campaign_targets WHERE valid",
    inscriptions="SELECT id FROM temp.stage_inscriptions WHERE valid"
    " UNION SELECT inscription_id FROM temp.stage_section_results WHERE valid",
)


def summary(db_path: str | Path, counts: dict[str, int], seconds: float) -> str:
    """The one line that ends a successful load: records, time, rate and what changed."""
    records = sum(counts.get(table, 0) for table in TABLES)
    rate = f" ({records / seconds:,.0f} records/s)" if seconds > 0 else ""
    unchanged = "" if counts.get(CHANGED, 1) else "; nothing changed, data version kept"
    return (
        f"loaded {plural(records, 'record')} into {db_path} in {seconds:.1f} s{rate};"
        f" {plural(counts.get(WRITTEN, 0), 'event')} new or changed,"
        f" {plural(counts.get(IMPLIED, 0), 'target')} implied by events{unchanged}"
    )


def _database_error(exc: sqlite3.Error) -> DatabaseError:
    """One line for a database that refuses the load (busy after the wait, full, ...),
    worded as every tool words it (``cli.cause_of``: never a failed rollback's message)."""
    return DatabaseError(f"database: {cause_of(exc)}")


def build_parser() -> argparse.ArgumentParser:
    """The command line: fixture files, --db and --no-progress."""
    parser = OneLineParser(description="Load fixture files into a database, all or nothing.")
    parser.add_argument("files", nargs="+", type=Path, help="fixture JSON files")
    add_store_arguments(parser, "SQLite database file (created if missing)")
    parser.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on stderr (by default: a bar per table on a terminal, plain lines"
        " otherwise)",
    )
    return parser


@command("load refused, database unchanged")
def main(argv: Sequence[str] | None = None) -> int:
    """Validate and load; a refusal names each problem (file, record path, cause)."""
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    if args.db is not None:
        counts = load_files(args.db, args.files, progress=not args.no_progress)
    else:
        counts = asyncio.run(load_pg(args.database_url, args.files))
    print(summary(args.db or "PostgreSQL", counts, time.perf_counter() - started))
    return 0


# ``python -m app.tools.loader`` is the tool too (it used to exit 0 having done nothing).
if __name__ == "__main__":
    sys.exit(main())
