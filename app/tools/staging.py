"""Stage a load: validate each record as it streams and keep it in a temporary table.

Both loaders (SQLite's :mod:`.loader`, PostgreSQL's :mod:`.pg_loader`) stage through the
public functions here, and refuse a load with the same :class:`LoadError`.

Staged rows live in the connection's temporary database (``temp.stage_<table>``), never
in memory, so a load's memory does not grow with its files. Each row keeps where it came
from (``src`` file, ``idx`` in its table's array) and ``pos``, its place in the stream,
which orders the problems. Problems go to ``temp.load_problems`` as they are found.

A record that fails validation is kept as a placeholder (``valid = 0``) with its id when
the id itself was valid, so that records pointing at it are not also reported as
pointing at an unknown id: the one real problem is reported once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marshmallow import ValidationError, missing

from ..data import api_keys as apikeys
from .cli import ToolError
from .fixture_format import TABLES, Record, flatten_errors
from .fixture_reader import Item, NotAFixture, read_items
from .load_progress import Meter

CHUNK = 5_000  # rows per executemany
MAX_SHOWN = 100  # problems listed in full; the rest are counted
# What a load wrote of note, counted beside the records read (both loaders).
IMPLIED = "campaign_targets (implied)"
WRITTEN = "campaign_events (new or changed)"
CHANGED = "rows changed"  # by the whole load, derived rows and verdicts included
# Tables whose rows later checks read: written even once a problem is known, so that their
# children are checked against them; the others are only written by a clean load.
PARENTS = frozenset(
    ("companies", "employees", "teams", "campaigns", "courses", "course_sections", "inscriptions")
)

# The columns of an event as staged and as written (load_writes compares them all).
EVENT_COLUMNS = (
    "id",
    "campaign_id",
    "employee_id",
    "type",
    "timestamp",
    "with_captcha",
    "ip",
    "user_agent",
)


def _fold(text: str) -> str:
    return text.casefold()


@dataclass(frozen=True)
class Staged:
    """How one fixture table is staged: its columns and how a valid record fills them."""

    columns: tuple[str, ...]
    row: Callable[[dict[str, Any]], tuple[Any, ...]]
    key: tuple[str, ...] = ("id",)  # what identifies a record (upsert key)


# An inscription's stored columns as given; ``completed_at`` follows, when given (else
# derived once its section results are written: ``completed_at_given`` says which).
INSCRIPTION_COLUMNS = ("id", "employee_id", "course_id", "start_date", "due_date", "status")


def _given(value: Any) -> tuple[Any, int]:
    """A field the format lets out, and whether it was given."""
    return (None, 0) if value is missing else (value, 1)


def _plain(*columns: str, key: tuple[str, ...] = ("id",)) -> Staged:
    return Staged(columns, lambda r: tuple(r[c] for c in columns), key)


PERSON = ("first_name", "last_name", "email", "department", "country")
STAGED: dict[str, Staged] = {
    "companies": Staged(
        ("id", "name", "name_key"), lambda r: (r["id"], r["name"], _fold(r["name"]))
    ),
    "partners": _plain("id", "name"),
    "partner_companies": _plain("partner_id", "company_id", key=("partner_id", "company_id")),
    "api_keys": Staged(
        ("company_id", "partner_id", "scopes", "key_hash", "prefix", "label"),
        lambda r: (
            r["company_id"],
            r["partner_id"],
            apikeys.checked_scopes(r["scope"]),
            apikeys.hash_key(r["key"]),
            apikeys.prefix_of(r["key"]),
            r["label"],
        ),
        ("key_hash",),
    ),
    "employees": Staged(
        ("id", "company_id", *PERSON, *(f"{c}_key" for c in PERSON)),
        lambda r: (
            (r["id"], r["company_id"], *(r[c] for c in PERSON), *(_fold(r[c]) for c in PERSON))
        ),
    ),
    "teams": Staged(
        ("id", "company_id", "name", "name_key"),
        lambda r: (r["id"], r["company_id"], r["name"], _fold(r["name"])),
    ),
    "team_members": _plain("employee_id", "team_id", key=("employee_id", "team_id")),
    "campaigns": Staged(
        ("id", "company_id", "title", "launch_date", "title_key"),
        lambda r: (r["id"], r["company_id"], r["title"], r["launch_date"], _fold(r["title"])),
    ),
    "campaign_targets": _plain(
        "campaign_id", "employee_id", "sent_at", key=("campaign_id", "employee_id")
    ),
    "campaign_events": Staged(
        EVENT_COLUMNS,
        lambda r: (
            r["id"],
            r["campaign_id"],
            r["employee_id"],
            r["type"],
            r["timestamp"],
            int(r["with_captcha"]),
            r["ip"],
            r["user_agent"],
        ),
    ),
    "courses": Staged(
        ("id", "company_id", "title", "title_key"),
        lambda r: (r["id"], r["company_id"], r["title"], _fold(r["title"])),
    ),
    "course_sections": _plain("id", "course_id", "title", "section_type", "position"),
    "inscriptions": Staged(
        (*INSCRIPTION_COLUMNS, "completed_at", "completed_at_given"),
        lambda r: (*(r[c] for c in INSCRIPTION_COLUMNS), *_given(r.get("completed_at", missing))),
    ),
    "section_results": _plain(
        "inscription_id",
        "section_id",
        "completed_at",
        "result",
        "status",
        key=("inscription_id", "section_id"),
    ),
}


class Stage:
    """The temporary tables of one load, filled file by file."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.pos = 0
        self.counts = dict.fromkeys(TABLES, 0)
        self._rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in TABLES}
        self._problems: list[tuple[int, str]] = []
        self.names: dict[int, str] = {}
        self.unreadable = False  # a source could not be read or parsed: refused unwritten
        self._sql = {
            table: f"INSERT INTO temp.stage_{table} (pos, src, idx, valid, {', '.join(s.columns)})"
            f" VALUES ({', '.join('?' * (4 + len(s.columns)))})"
            for table, s in STAGED.items()
        }
        conn.execute("DROP TABLE IF EXISTS temp.load_sources")
        conn.execute("CREATE TEMP TABLE load_sources (src INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("DROP TABLE IF EXISTS temp.load_problems")
        conn.execute("CREATE TEMP TABLE load_problems (pos INTEGER NOT NULL, line TEXT NOT NULL)")
        for table, staged in STAGED.items():
            conn.execute(f"DROP TABLE IF EXISTS temp.stage_{table}")
            conn.execute(
                f"CREATE TEMP TABLE stage_{table} (pos INTEGER PRIMARY KEY, src INTEGER NOT NULL,"
                f" idx INTEGER NOT NULL, valid INTEGER NOT NULL, {', '.join(staged.columns)})"
            )

    def source(self, name: str) -> int:
        """Register a file (or other source) by name; return its number."""
        src = len(self.names) + 1
        self.names[src] = name
        self.conn.execute("INSERT INTO temp.load_sources VALUES (?, ?)", (src, name))
        return src

    def problem(self, src: int, line: str) -> None:
        """A problem of the source at the current place in the stream."""
        self._problems.append((self.pos, f"{self.names[src]}: {line}"))
        if len(self._problems) >= CHUNK:
            self.flush()

    def add(self, src: int, items: Iterable[Item], tick: Callable[[str, int], None]) -> None:
        """Validate and stage every item; ``tick(table, rows)`` reports progress."""
        unknown: set[str] = set()
        table, schema, rows, make, since = "", Record(), [], STAGED["companies"].row, 0
        quick = schema.quick_load
        for item in items:
            self.pos += 1
            if item.table != table:
                tick(table, since)
                table, since = item.table, 0
                if table in TABLES:
                    schema, rows, make = TABLES[table](), self._rows[table], STAGED[table].row
                    quick = schema.quick_load
            if table not in TABLES:
                if table not in unknown:
                    unknown.add(table)
                    self.problem(src, f"{table}: Unknown field.")
                continue
            if item.position is None:
                if item.value != []:  # an empty array: a table without records
                    self.problem(src, f"{table}: Not a valid list.")
                continue
            self.counts[table] += 1
            since += 1
            record = quick(item.value)
            if record is None:
                try:
                    record = schema.load(item.value)
                except ValidationError as exc:
                    self._refused(src, table, item.position, exc)
                    continue
            rows.append((self.pos, src, item.position, 1, *make(record)))
            if len(rows) >= CHUNK:
                self._write(table)
                tick(table, since)
                since = 0
        tick(table, since)
        self.flush()

    def _refused(self, src: int, table: str, index: int, exc: ValidationError) -> None:
        """Report a record's format problems; keep its id as a placeholder if it had one."""
        for line in flatten_errors(exc.messages, f"{table}[{index}]"):
            self.problem(src, line)
        valid = exc.valid_data if isinstance(exc.valid_data, dict) else {}
        columns = STAGED[table].columns
        if STAGED[table].key == ("id",) and "id" in valid:
            blanks = (None,) * (len(columns) - 1)
            self._rows[table].append((self.pos, src, index, 0, valid["id"], *blanks))

    def _write(self, table: str) -> None:
        rows = self._rows[table]
        self.conn.executemany(self._sql[table], rows)
        rows.clear()

    def flush(self) -> None:
        """Write what is still buffered."""
        for table in TABLES:
            if self._rows[table]:
                self._write(table)
        if self._problems:
            self.conn.executemany("INSERT INTO temp.load_problems VALUES (?, ?)", self._problems)
            self._problems.clear()

    def index(self) -> None:
        """Index the staged keys the checks look up (after staging: cheaper than during)."""
        for table, staged in STAGED.items():
            key = ", ".join(staged.key)
            self.conn.execute(f"CREATE INDEX temp.stage_{table}_key ON stage_{table} ({key})")
        self.conn.execute(
            "CREATE INDEX temp.stage_course_sections_place ON stage_course_sections"
            " (course_id, position)"
        )
        self.conn.execute("CREATE INDEX temp.load_problems_pos ON load_problems (pos)")


class LoadError(ToolError):
    """A fixture could not be loaded; ``problems`` name file, record path and cause."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(*problems)


def file_items(path: Path) -> Iterator[Item]:
    """The items of one fixture file, read as they are needed."""
    with path.open("rb") as stream:
        yield from read_items(stream)


def stage_source(stage: Stage, name: str, items: Iterable[Item], meter: Meter) -> None:
    """Stream one source into the stage; one that cannot be read or parsed is a problem."""
    src = stage.source(name)
    try:
        stage.add(src, items, meter.tick)
    except OSError as exc:
        stage.unreadable = True
        stage.problem(src, f"cannot read: {exc.strerror}")
    except NotAFixture as exc:
        stage.unreadable = True
        stage.problem(src, str(exc))
    stage.flush()


def any_problem(conn: sqlite3.Connection) -> bool:
    """Whether the load has found a problem yet (later tables then need no writing)."""
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
