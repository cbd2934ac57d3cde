"""Loading fixtures into PostgreSQL: one transaction, COPY into staging, checks, upserts.

The files are read, validated and checked among themselves exactly as for SQLite: they
stream into the SQLite loader's stage (:class:`app.tools.staging.Stage`, in a private
in-memory database), where the format and duplicate checks run. Then, in one PostgreSQL
transaction: each table's clean staged rows (a later file winning over an earlier one)
are copied into a temporary staging table, checked there against what is stored
(unknown references, references across companies, records moving between companies)
with the SQLite loader's messages, and merged by upsert in dependency order; the change
sequence and the data version move in the same commit, and servers are notified at
commit. Every problem of every table goes to the stage's list of problems, so the
refusal is the SQLite loader's report, line for line and in file and record order; any
problem rolls everything back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg

from ..data.automation import Rules, rules_from_env
from ..data.pg.automation import classify
from ..data.pg.schema import bump_data_version, schema_for_a_write
from ..data.pg.session import connect
from ..data.pg.stats_summary import refresh as refresh_stats
from ..data.pg.summaries import refresh as refresh_reports
from ..data.schema import DERIVE_COMPLETED_AT, DERIVED_COMPLETION, KEPT_COMPLETION
from ..data.stats_summary import Touched
from .fixture_format import TABLES as FIXTURE_TABLES
from .fixture_reader import Item
from .load_checks import duplicate
from .load_progress import Meter
from .pg_checks import CHECKS, orphans
from .staging import (
    CHANGED,
    IMPLIED,
    PARENTS,
    STAGED,
    WRITTEN,
    Stage,
    any_problem,
    file_items,
    refuse_if_problems,
    stage_source,
)

Row = tuple[Any, ...]
Prepare = Callable[[asyncpg.Connection], Awaitable[None]]
NOW = "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
EVENT = ("campaign_id", "employee_id", "type", "timestamp", "with_captcha", "ip", "user_agent")
# The checks among the files of a load (the rest need the stored rows: PostgreSQL's).
PLACE_TAKEN = (
    "INSERT INTO temp.load_problems (pos, line)"
    " SELECT s.pos, src.name || ': ' || printf('course_sections[%d].position: position %d of"
    " course %d is also given to section %d', s.idx, s.position, s.course_id, x.id)"
    " FROM temp.stage_course_sections AS s"
    " JOIN temp.stage_course_sections AS x ON x.course_id = s.course_id"
    " AND x.position = s.position AND x.id != s.id AND x.pos < s.pos AND x.valid"
    " JOIN temp.load_sources AS src ON src.src = s.src WHERE s.valid"
)


def sqlite_decimal(value: float) -> Decimal:
    """The decimal SQLite prints for a REAL (15 significant digits, ``.0`` when whole).

    Stored as ``numeric``, PostgreSQL prints the very same text.
    """
    text = format(value, ".15g")
    return Decimal(text if "." in text or "e" in text else f"{text}.0")


# In dependency order (the fixture format's): each table's staged columns and its key.
TABLES: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    (table, STAGED[table].columns, STAGED[table].key) for table in FIXTURE_TABLES
]


# Staged columns that are not stored: how the staging table makes them.
STAGE_ONLY = {"completed_at_given": "0::int"}


def _stage_table(table: str, columns: tuple[str, ...]) -> str:
    """The temporary staging table of ``table``: its stored columns' types, and the rest."""
    made = ", ".join(f"{STAGE_ONLY[c]} AS {c}" if c in STAGE_ONLY else c for c in columns)
    return (
        f"CREATE TEMP TABLE stage_{table} ON COMMIT DROP AS"
        f" SELECT 0::int AS pos, {made} FROM {table} WITH NO DATA"
    )


def _merge(table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> str:
    """Upsert the staged rows in key order (no row twice: duplicates were refused); the
    statement's one value is the rows inserted or changed."""
    names = [c for c in columns if c not in STAGE_ONLY]
    values = [f"s.{c}" for c in names]
    if table == "api_keys":
        names.append("created_at")
        values.append(NOW)
    if table == "inscriptions":
        names.append("company_id")
        values.append("(SELECT company_id FROM employees WHERE id = s.employee_id)")
        values[names.index("completed_at")] = KEPT_COMPLETION.format("inscriptions")
    changed = [c for c in names if c not in key and c != "created_at"]
    if table == "api_keys":
        changed = ["label", "scopes"]
    where = ""
    if table == "campaign_events":
        # A new or changed event takes the next place of the change sequence, in id
        # order; an event stored exactly as given is not written at all.
        names.append("seq")
        values.append(
            "(SELECT value::bigint FROM meta WHERE key = 'change_seq')"
            " + row_number() OVER (ORDER BY s.id)"
        )
        same = " AND ".join(f"e.{c} IS NOT DISTINCT FROM s.{c}" for c in EVENT)
        where = f" WHERE NOT EXISTS (SELECT 1 FROM campaign_events e WHERE e.id = s.id AND {same})"
        changed.append("seq")
    # A stored row given again as it is stays as it is (SQLite's loader's rule).
    differs = [c for c in changed if c != "seq"]
    action = (
        "DO UPDATE SET "
        + ", ".join(f"{c} = EXCLUDED.{c}" for c in changed)
        + f" WHERE ({', '.join(f'{table}.{c}' for c in differs)})"
        f" IS DISTINCT FROM ({', '.join(f'EXCLUDED.{c}' for c in differs)})"
        if changed
        else "DO NOTHING"
    )
    order = ", ".join(f"s.{k}" for k in key)
    kept = ""
    if table == "api_keys":
        # As SQLite's loader: new keys take ids in the files' order (the sample's key 1 is
        # company 1's on both stores), and a key already stored is updated, not offered
        # for insertion, which would take a value of the identity each time (a load of the
        # sample again moved the next key's id on by 3).
        order = "s.pos"
        where = " WHERE NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.key_hash = s.key_hash)"
        kept = (
            "kept AS (UPDATE api_keys k SET label = s.label, scopes = s.scopes"
            " FROM stage_api_keys s WHERE k.key_hash = s.key_hash"
            " AND (k.label, k.scopes) IS DISTINCT FROM (s.label, s.scopes) RETURNING 1), "
        )
    return (
        f"WITH {kept}merged AS (INSERT INTO {table} ({', '.join(names)})"
        f" SELECT {', '.join(values)} FROM stage_{table} s{where} ORDER BY {order}"
        f" ON CONFLICT ({', '.join(key)}) {action} RETURNING 1)"
        " SELECT (SELECT count(*) FROM merged)" + (" + (SELECT count(*) FROM kept)" if kept else "")
    )


# The completion date of each inscription the load gave without one (SQLite's too).
DERIVED_COMPLETIONS = (
    f"{DERIVE_COMPLETED_AT} WHERE id IN"
    " (SELECT id FROM stage_inscriptions WHERE completed_at_given = 0)"
    f" AND completed_at IS DISTINCT FROM {DERIVED_COMPLETION}"
)

# Events imply their employees were targets (contract.md 10).
IMPLIED_TARGETS = (
    "INSERT INTO campaign_targets (campaign_id, employee_id)"
    " SELECT DISTINCT campaign_id, employee_id FROM stage_campaign_events"
    " ON CONFLICT DO NOTHING"
)


class Staged:
    """A load's records staged and checked among themselves, ready to be copied."""

    def __init__(self, conn: sqlite3.Connection, stage: Stage) -> None:
        self.conn = conn
        self.stage = stage

    def rows(self, table: str, columns: tuple[str, ...], key: tuple[str, ...]) -> list[Row]:
        """The clean rows of a table, the last of each key (``pos`` first), stream order."""
        same = " AND ".join(f"x.{k} = s.{k}" for k in key)
        found = self.conn.execute(
            f"SELECT s.pos, {', '.join(f's.{c}' for c in columns)} FROM temp.stage_{table} s"
            f" WHERE s.valid AND NOT EXISTS (SELECT 1 FROM temp.stage_{table} x"
            f" WHERE {same} AND x.pos > s.pos) ORDER BY s.pos"
        ).fetchall()
        if table == "section_results":
            at = columns.index("result") + 1
            found = [
                (*r[:at], None if r[at] is None else sqlite_decimal(r[at]), *r[at + 1 :])
                for r in found
            ]
        return [tuple(r) for r in found]

    def where(self, table: str, pos: int) -> str:
        """``file: table[index]`` of a staged record, as the SQLite loader names it."""
        src, idx = self.conn.execute(
            f"SELECT src, idx FROM temp.stage_{table} WHERE pos = ?", (pos,)
        ).fetchone()
        return f"{self.stage.names[src]}: {table}[{idx}]"

    def placeholders(self, table: str) -> list[tuple[str, int]]:
        """The ids of records refused for their format: known, so never reported unknown."""
        if STAGED[table].key != ("id",):
            return []
        found = self.conn.execute(f"SELECT id FROM temp.stage_{table} WHERE NOT valid")
        return [(table, id_) for (id_,) in found if id_ is not None]

    def problem(self, pos: int, line: str) -> None:
        """A problem found in PostgreSQL, placed in the stream as the SQLite loader's."""
        self.conn.execute("INSERT INTO temp.load_problems VALUES (?, ?)", (pos, line))


def read_batch(files: Iterable[str | Path]) -> Staged:
    """Read, validate and check every file among themselves; LoadError naming every bad
    record (the SQLite loader's stage and messages)."""
    return stage_sources((str(name), file_items(Path(name))) for name in files)


def stage_sources(sources: Iterable[tuple[str, Iterable[Item]]]) -> Staged:
    """:func:`read_batch` for records that come from elsewhere (an importer), each source
    a name for the problems and its items, as the SQLite loader's ``load_items``.

    A source that cannot be read or parsed is refused here, before any connection; the
    other problems found so far wait for the database's, to be reported together."""
    conn = sqlite3.connect(":memory:")
    stage = Stage(conn)
    meter = Meter(False)
    for name, items in sources:
        stage_source(stage, name, items, meter)
    if stage.unreadable:
        refuse_if_problems(conn)
    stage.index()
    for table, _, key in TABLES:
        conn.execute(duplicate(table, key, shown="key" if table == "api_keys" else None))
    conn.execute(PLACE_TAKEN)
    return Staged(conn, stage)


async def load_pg(url: str, files: Iterable[str | Path]) -> dict[str, int]:
    """Validate the files and load them into the PostgreSQL database at ``url``."""
    rules = rules_from_env()
    return await load_staged(url, read_batch(files), rules=rules)


async def load_staged(
    url: str, batch: Staged, prepare: Prepare | None = None, rules: Rules | None = None
) -> dict[str, int]:
    """Load records staged and checked among themselves, in one transaction; ``prepare``
    runs first in it (the importer's id upgrade); the verdicts follow ``rules`` (default:
    the environment's settings)."""
    rules = rules or rules_from_env()
    try:
        conn = await connect(url)
        try:
            async with schema_for_a_write(conn, rules) as reshaped:
                return await write(conn, batch, rules, prepare, reshaped)
        finally:
            await conn.close()
    finally:
        batch.conn.close()


async def write(
    conn: asyncpg.Connection,
    batch: Staged,
    rules: Rules,
    prepare: Prepare | None = None,
    reshaped: bool = False,
) -> dict[str, int]:
    """Stage, check and merge every table in one transaction, then decide the verdicts of
    the campaigns it gave events or targets of; all or nothing. As on SQLite, only a load
    that changed a row (or ``reshaped`` the schema, or renumbered) moves the data version."""
    counts: dict[str, int] = dict(batch.stage.counts)
    changed = int(reshaped or prepare is not None)
    async with conn.transaction():
        # Loads take turns, so their ranges of the change sequence follow commit order.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext('reporting load'))")
        seq = await conn.fetchval("SELECT value::bigint FROM meta WHERE key = 'change_seq'")
        if prepare is not None:
            await prepare(conn)
        await conn.execute("CREATE TEMP TABLE stage_known (tbl text, id bigint) ON COMMIT DROP")
        for table, columns, key in TABLES:
            await conn.copy_records_to_table(
                "stage_known", records=batch.placeholders(table), columns=("tbl", "id")
            )
            await conn.execute(_stage_table(table, columns))
            rows = batch.rows(table, columns, key)
            if not rows:
                continue
            await conn.copy_records_to_table(
                f"stage_{table}", records=rows, columns=("pos", *columns)
            )
            await _check(conn, batch, table, key)
            if table not in PARENTS and any_problem(batch.conn):
                continue
            if any_problem(batch.conn):
                await _set_aside_orphans(conn, table)
            written = await conn.fetchval(_merge(table, columns, key))
            changed += written
            if table == "campaign_events":
                counts[WRITTEN] = written
                await conn.execute(
                    "UPDATE meta SET value = (value::bigint + $1)::text WHERE key = 'change_seq'",
                    written,
                )
                counts[IMPLIED] = _rows(await conn.execute(IMPLIED_TARGETS))
                changed += counts[IMPLIED]
        refuse_if_problems(batch.conn)
        if counts["inscriptions"]:
            changed += _rows(await conn.execute(DERIVED_COMPLETIONS))
        if counts["campaign_events"] or counts["campaign_targets"]:
            changed += (await classify(conn, rules, TOUCHED, seq)).total()
        counts[CHANGED] = changed
        if changed:
            await refresh_stats(conn, seq, LOADED)
            await refresh_reports(conn, TOUCHED_SENDS, seq)
            await bump_data_version(conn)
    return counts


def _rows(status: str) -> int:
    """The rows a statement wrote, from its status (``UPDATE 3``, ``INSERT 0 3``)."""
    return int(status.split()[-1])


# The campaigns whose verdicts a load may change (the SQLite loader's TOUCHED): those it
# gives events or targets of, and those an event it gives leaves (stats_moved_sends).
TOUCHED = (
    "SELECT campaign_id FROM stage_campaign_events"
    " UNION SELECT campaign_id FROM stage_campaign_targets"
    " UNION SELECT campaign_id FROM stats_moved_sends"
)
# The sends whose summaries a load may change besides those of its events (SQLite's too).
TOUCHED_SENDS = "SELECT campaign_id, employee_id FROM stage_campaign_targets"


# What the stats' summaries take again (the SQLite loader's LOADED): the rows it gave.
LOADED = Touched(
    campaigns="SELECT id FROM stage_campaigns",
    employees="SELECT id FROM stage_employees UNION SELECT employee_id FROM stage_team_members"
    " UNION SELECT m.employee_id FROM stage_teams s JOIN team_members m ON m.team_id = s.id",
    sends="SELECT campaign_id, employee_id FROM stage_campaign_targets",
    inscriptions="SELECT id FROM stage_inscriptions"
    " UNION SELECT inscription_id FROM stage_section_results",
)


async def _set_aside_orphans(conn: asyncpg.Connection, table: str) -> None:
    """Keep a parent's rows whose own parent was refused out of the merge (still known to
    their children's checks): see :data:`app.tools.pg_checks.PARENT_REFS`."""
    found = [row["pos"] for row in await conn.fetch(orphans(table))]
    if found:
        await _set_aside(conn, table, found)


async def _set_aside(
    conn: asyncpg.Connection, table: str, positions: list[int], known: bool = True
) -> None:
    """Take staged rows out of the merge; unless ``known`` is false (a table not keyed
    by id), their ids stay known to the children's checks."""
    if known:
        await conn.execute(
            f"INSERT INTO stage_known SELECT '{table}', id FROM stage_{table} WHERE pos = ANY($1)",
            positions,
        )
    await conn.execute(f"DELETE FROM stage_{table} WHERE pos = ANY($1)", positions)


async def _check(conn: asyncpg.Connection, batch: Staged, table: str, key: tuple[str, ...]) -> None:
    """Record every problem of the table's staged rows; set the refused rows aside (not
    merged, their ids still known to the checks of their children)."""
    refused: set[int] = set()
    for sql, message in CHECKS.get(table, ()):
        for found in await conn.fetch(sql):
            batch.problem(found["pos"], message(batch.where(table, found["pos"]), found))
            refused.add(found["pos"])
    if refused:
        await _set_aside(conn, table, list(refused), known=key == ("id",))
