"""Load fixture files: validate every record, check every reference, write in one go.

A load is all or nothing, in three steps:

1. Stream: each file is parsed incrementally and each record validated as it arrives,
   then staged in a temporary table (memory stays flat whatever the file's size). This
   needs no lock, so a long parse never blocks another writer.
2. Check and write, inside one write transaction (BEGIN IMMEDIATE): table by table,
   parents first, the reference and tenancy checks read the database as it is now (no
   other load can change it until COMMIT), then the table's clean rows are upserted.
3. If any problem was found, in any file or table, everything rolls back and the first
   ``MAX_SHOWN`` problems are reported together; otherwise COMMIT.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from ..config import OneLineParser
from ..data.schema import DatabaseError, bump_data_version, connect_writer, write_transaction
from .cli import ToolError, command
from .fixture_format import TABLES
from .fixture_reader import Item, NotAFixture, read_items
from .load_checks import check
from .load_progress import Meter
from .staging import Stage

# fixtures/ ships inside the package as app.fixtures (see pyproject.toml), so an
# installed wheel finds the sample as a clone does.
SAMPLE_FIXTURE = Path(str(resources.files("app.fixtures") / "sample.json"))
MAX_SHOWN = 100  # problems listed in full; the rest are counted
BULK = 50_000  # rows into an empty table from which its indexes are built after the insert
LOCK_WAIT = 30.0  # seconds a load waits for another writer before giving up
BUSY = "another load is running; try again"
# Tables whose rows later checks read: written even once a problem is known, so that their
# children are checked against them; the others are only written by a clean load.
PARENTS = frozenset(
    ("companies", "employees", "teams", "campaigns", "courses", "course_sections", "inscriptions")
)
IMPLIED = "campaign_targets (implied)"
WRITTEN = "campaign_events (new or changed)"
ADVANCE_SEQ = "UPDATE main.meta SET value = CAST(value AS INTEGER) + ? WHERE key = 'change_seq'"


class LoadError(ToolError):
    """A fixture could not be loaded; ``problems`` name file, record path and cause."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(*problems)


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
    sources = ((str(name), _file_items(Path(name))) for name in files)
    return load_items(db_path, sources, progress=progress, lock_wait=lock_wait)


def load_items(
    db_path: str | Path,
    sources: Iterable[tuple[str, Iterable[Item]]],
    *,
    progress: bool = False,
    lock_wait: float = LOCK_WAIT,
) -> dict[str, int]:
    """``load_files`` for records that come from elsewhere (an importer): each source is
    a name for the problems and its items (table, position in the table, raw record)."""
    meter = Meter(progress)
    try:
        conn = connect_writer(db_path)
    except sqlite3.Error as exc:
        raise _database_error(exc) from None
    try:
        conn.execute("PRAGMA cache_size = -65536")  # 64 MiB: bounded, whatever the files
        conn.execute("PRAGMA temp.cache_size = -32768")
        conn.execute("BEGIN")  # touches only the temporary database: no lock on the file
        stage = Stage(conn)
        for name, items in sources:
            _stage_source(stage, name, items, meter)
        meter.close()
        stage.index()
        conn.execute("COMMIT")
        conn.execute(f"PRAGMA busy_timeout = {int(lock_wait * 1000)}")
        with write_transaction(conn):
            counts = _check_and_write(conn, stage, meter)
        return counts
    except sqlite3.Error as exc:
        raise _database_error(exc) from None
    finally:
        meter.close()
        conn.close()


def _file_items(path: Path) -> Iterator[Item]:
    """The items of one fixture file, read as they are needed."""
    with path.open("rb") as stream:
        yield from read_items(stream)


def _stage_source(stage: Stage, name: str, items: Iterable[Item], meter: Meter) -> None:
    """Stream one source into the stage; one that cannot be read or parsed is a problem."""
    src = stage.source(name)
    try:
        stage.add(src, items, meter.tick)
    except OSError as exc:
        stage.problem(src, f"cannot read: {exc.strerror}")
    except NotAFixture as exc:
        stage.problem(src, str(exc))
    stage.flush()


def _check_and_write(conn: sqlite3.Connection, stage: Stage, meter: Meter) -> dict[str, int]:
    """Check and upsert each table, parents first; raise LoadError if anything was wrong."""
    counts = dict(stage.counts)
    for table in TABLES:
        if not counts[table]:
            continue
        with meter.step(f"check and write {table}", counts[table]):
            check(conn, table)
            if table in PARENTS or not _any_problem(conn):
                with _indexes_set_aside(conn, table, counts[table]):
                    written = conn.execute(MERGES[table]).rowcount
                if table == "campaign_events":
                    counts[WRITTEN] = written
                    conn.execute(ADVANCE_SEQ, (written,))
    if counts["campaign_events"] and not _any_problem(conn):
        counts[IMPLIED] = conn.execute(IMPLIED_TARGETS).rowcount
    refuse_if_problems(conn)
    bump_data_version(conn)
    return counts


@contextmanager
def _indexes_set_aside(conn: sqlite3.Connection, table: str, rows: int) -> Iterator[None]:
    """Into an empty table, many rows go in faster with its indexes built once afterwards
    (the generator does the same); inside the transaction, so all or nothing still holds."""
    empty = not conn.execute(f"SELECT EXISTS (SELECT 1 FROM main.{table})").fetchone()[0]
    found = conn.execute(
        "SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = ?"
        " AND sql IS NOT NULL",
        (table,),
    ).fetchall() if empty and rows >= BULK else []  # fmt: skip
    for name, _ in found:
        conn.execute(f'DROP INDEX main."{name}"')
    yield
    for _, sql in found:
        conn.execute(sql)


def _any_problem(conn: sqlite3.Connection) -> bool:
    return bool(conn.execute("SELECT EXISTS (SELECT 1 FROM temp.load_problems)").fetchone()[0])


def refuse_if_problems(conn: sqlite3.Connection) -> None:
    """Raise LoadError with the first problems in stream order, and how many more."""
    total = conn.execute("SELECT count(*) FROM temp.load_problems").fetchone()[0]
    if not total:
        return
    shown = [
        line
        for (line,) in conn.execute(
            "SELECT line FROM temp.load_problems ORDER BY pos, rowid LIMIT ?", (MAX_SHOWN,)
        )
    ]
    if total > len(shown):
        shown.append(f"... and {total - len(shown)} more")
    raise LoadError(shown)


def summary(db_path: str | Path, counts: dict[str, int], seconds: float) -> str:
    """The one line that ends a successful load: records, time, rate and what changed."""
    records = sum(counts.get(table, 0) for table in TABLES)
    rate = f" ({records / seconds:,.0f} records/s)" if seconds > 0 else ""
    return (
        f"loaded {records:,} records into {db_path} in {seconds:.1f} s{rate};"
        f" {counts.get(WRITTEN, 0):,} events new or changed,"
        f" {counts.get(IMPLIED, 0):,} targets implied by events"
    )


def _database_error(exc: sqlite3.Error) -> Exception:
    """One line for a database that refuses the load: busy, full, or anything else."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if code == sqlite3.SQLITE_BUSY:
        return LoadError([BUSY])
    return DatabaseError(f"the database refused the load, nothing was written: {exc}")


def _clean(table: str, key: tuple[str, ...]) -> str:
    """A staged row is written when valid, without a problem, and the last of its key.

    Two files of one load may give the same record: the later file wins, as if they were
    loaded one after the other (within one file a repeated key is a problem).
    """
    same = " AND ".join(f"x.{k} = s.{k}" for k in key)
    return (
        "s.valid AND NOT EXISTS (SELECT 1 FROM temp.load_problems AS p WHERE p.pos = s.pos)"
        f" AND NOT EXISTS (SELECT 1 FROM temp.stage_{table} AS x WHERE {same} AND x.pos > s.pos)"
    )


def _parents(*refs: tuple[str, str]) -> str:
    return "".join(f" AND EXISTS (SELECT 1 FROM main.{t} WHERE id = s.{c})" for c, t in refs)


def _upsert(
    table: str,
    columns: tuple[str, ...],
    *,
    key: tuple[str, ...] = ("id",),
    parents: str = "",
    select: dict[str, str] | None = None,
    update: tuple[str, ...] | None = None,
    order: str | None = None,
) -> str:
    """``INSERT ... SELECT`` of the clean staged rows in key order, upserting on the key.

    ``select`` gives the expression of a column that is not copied as staged; ``update``
    the columns an existing row takes (default: every column outside the key).
    """
    values = ", ".join((select or {}).get(c, f"s.{c}") for c in columns)
    changed = update if update is not None else tuple(c for c in columns if c not in key)
    action = "DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in changed)
    keys = ", ".join(key)
    where = _clean(table, key) + parents
    return (
        f"INSERT INTO main.{table} ({', '.join(columns)}) SELECT {values}"
        f" FROM temp.stage_{table} AS s WHERE {where} ORDER BY {order or keys}"
        f" ON CONFLICT ({keys}) {action if changed else 'DO NOTHING'}"
    )


OF_COMPANY = _parents(("company_id", "companies"))
# An event written by a load takes the next places of the change sequence (contract.md 13),
# in id order; an event that is already stored exactly as given is not written at all.
EVENT = (
    "id",
    "campaign_id",
    "employee_id",
    "type",
    "timestamp",
    "with_captcha",
    "ip",
    "user_agent",
)
SAME = " AND ".join(f"e.{c} IS s.{c}" for c in EVENT[1:])
PERSON = ("first_name", "last_name", "email", "department", "country")
MERGES: dict[str, str] = {
    "companies": _upsert("companies", ("id", "name")),
    "api_keys": _upsert(
        "api_keys",
        ("company_id", "key_hash", "prefix", "label", "created_at"),
        key=("key_hash",),
        parents=OF_COMPANY,
        select={"created_at": "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"},
        update=("label",),
        order="s.pos",
    ),
    "employees": _upsert(
        "employees",
        ("id", "company_id", *PERSON, *(f"{c}_key" for c in PERSON)),
        parents=OF_COMPANY,
    ),
    "teams": _upsert("teams", ("id", "company_id", "name", "name_key"), parents=OF_COMPANY),
    "team_members": _upsert(
        "team_members",
        ("employee_id", "team_id"),
        key=("employee_id", "team_id"),
        parents=_parents(("employee_id", "employees"), ("team_id", "teams")),
    ),
    "campaigns": _upsert(
        "campaigns", ("id", "company_id", "title", "launch_date"), parents=OF_COMPANY
    ),
    "campaign_targets": _upsert(
        "campaign_targets",
        ("campaign_id", "employee_id", "sent_at"),
        key=("campaign_id", "employee_id"),
        parents=_parents(("campaign_id", "campaigns"), ("employee_id", "employees")),
    ),
    "campaign_events": _upsert(
        "campaign_events",
        (*EVENT, "seq"),
        parents=_parents(("campaign_id", "campaigns"), ("employee_id", "employees"))
        + f" AND NOT EXISTS (SELECT 1 FROM main.campaign_events AS e WHERE e.id = s.id AND {SAME})",
        select={
            "seq": "(SELECT CAST(value AS INTEGER) FROM main.meta WHERE key = 'change_seq')"
            " + row_number() OVER (ORDER BY s.id)"
        },
    ),
    "courses": _upsert("courses", ("id", "company_id", "title", "title_key"), parents=OF_COMPANY),
    "course_sections": _upsert(
        "course_sections",
        ("id", "course_id", "title", "section_type", "position"),
        parents=_parents(("course_id", "courses")),
    ),
    "inscriptions": _upsert(
        "inscriptions",
        ("id", "company_id", "employee_id", "course_id", "start_date", "due_date", "status"),
        parents=_parents(("employee_id", "employees"), ("course_id", "courses")),
        select={"company_id": "(SELECT company_id FROM main.employees WHERE id = s.employee_id)"},
    ),
    "section_results": _upsert(
        "section_results",
        ("inscription_id", "section_id", "completed_at", "result", "status"),
        key=("inscription_id", "section_id"),
        parents=_parents(("inscription_id", "inscriptions"), ("section_id", "course_sections")),
    ),
}
# An event implies that its employee was a target of its campaign (contract.md 10); a
# target row given in a fixture (with its sent_at) is kept as it is.
IMPLIED_TARGETS = (
    "INSERT OR IGNORE INTO main.campaign_targets (campaign_id, employee_id)"
    " SELECT DISTINCT campaign_id, employee_id FROM temp.stage_campaign_events AS s"
    f" WHERE {_clean('campaign_events', ('id',))}"
)


def build_parser() -> argparse.ArgumentParser:
    """The command line: fixture files, --db and --no-progress."""
    parser = OneLineParser(description="Load fixture files into a database, all or nothing.")
    parser.add_argument("files", nargs="+", type=Path, help="fixture JSON files")
    parser.add_argument("--db", required=True, help="SQLite database file (created if missing)")
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
    counts = load_files(args.db, args.files, progress=not args.no_progress)
    print(summary(args.db, counts, time.perf_counter() - started))
    return 0
