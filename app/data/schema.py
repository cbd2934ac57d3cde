"""Database schema, write connections and the checks a file must pass before serving.

The serving process only reads (``PRAGMA query_only``); the loader, the key tool and
the generator write through :func:`connect_writer`.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path

from . import summaries, training
from .api_keys import ALL_SCOPES
from .automation import VERDICTS, Rules, classify, rules_from_env
from .csv_lines import KEPT_TEXTS, SQLITE, kept_cells, kept_columns
from .stats_summary import (
    EVERYTHING,
    SQLITE_TABLES,
    refresh,
)
from .vocabulary import EVENT_TYPES, INSCRIPTION_STATUSES, SECTION_STATUSES, SECTION_TYPES

SCHEMA_VERSION = 14
# The versions a writer makes or upgrades to SCHEMA_VERSION: 0 (no tables yet) and 1 to 13.
OLDER = tuple(range(SCHEMA_VERSION))


def _one_of(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


# --- Schema version 7: scoped keys, partners and their companies --------------------------
# A key belongs to one company or to one partner, and holds its scopes (space-separated).
API_KEYS_COLUMNS = f"""
    id         INTEGER PRIMARY KEY,
    company_id INTEGER REFERENCES companies(id),
    key_hash   TEXT NOT NULL UNIQUE CHECK (length(key_hash) = 64),
    prefix     TEXT NOT NULL,
    label      TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    expires_at TEXT,
    partner_id INTEGER REFERENCES partners(id),
    scopes     TEXT NOT NULL DEFAULT '{ALL_SCOPES}',
    CHECK ((company_id IS NULL) != (partner_id IS NULL))
"""
PARTNER_TABLES = (
    """CREATE TABLE IF NOT EXISTS partners (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS partner_companies (
    partner_id INTEGER NOT NULL REFERENCES partners(id),
    company_id INTEGER NOT NULL REFERENCES companies(id),
    PRIMARY KEY (partner_id, company_id)
) WITHOUT ROWID""",
)
PARTNERS = "".join(f"{table};\n" for table in PARTNER_TABLES) + (
    "CREATE INDEX IF NOT EXISTS api_keys_by_partner ON api_keys (partner_id);\n"
)


SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS companies (
    id       INTEGER PRIMARY KEY,
    name     TEXT NOT NULL,
    name_key TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS api_keys ({API_KEYS_COLUMNS});
CREATE TABLE IF NOT EXISTS employees (
    id             INTEGER PRIMARY KEY,
    company_id     INTEGER NOT NULL REFERENCES companies(id),
    first_name     TEXT NOT NULL,
    last_name      TEXT NOT NULL,
    email          TEXT NOT NULL,
    department     TEXT NOT NULL,
    country        TEXT NOT NULL,
    first_name_key TEXT NOT NULL,
    last_name_key  TEXT NOT NULL,
    email_key      TEXT NOT NULL,
    department_key TEXT NOT NULL,
    country_key    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS teams (
    id         INTEGER PRIMARY KEY,
    company_id INTEGER NOT NULL REFERENCES companies(id),
    name       TEXT NOT NULL,
    name_key   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS team_members (
    employee_id INTEGER NOT NULL REFERENCES employees(id),
    team_id     INTEGER NOT NULL REFERENCES teams(id),
    PRIMARY KEY (employee_id, team_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS campaigns (
    id          INTEGER PRIMARY KEY,
    company_id  INTEGER NOT NULL REFERENCES companies(id),
    title       TEXT NOT NULL,
    launch_date TEXT NOT NULL,
    title_key   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS campaign_events (
    id           INTEGER PRIMARY KEY,
    campaign_id  INTEGER NOT NULL REFERENCES campaigns(id),
    employee_id  INTEGER NOT NULL REFERENCES employees(id),
    type         TEXT NOT NULL CHECK (type IN ({_one_of(EVENT_TYPES)})),
    timestamp    TEXT NOT NULL,
    with_captcha INTEGER NOT NULL CHECK (with_captcha IN (0, 1)),
    ip           TEXT,
    user_agent   TEXT,
    seq          INTEGER NOT NULL DEFAULT 0,
    verdict      TEXT NOT NULL DEFAULT 'human' CHECK (verdict IN ({_one_of(VERDICTS)})),
    reasons      TEXT NOT NULL DEFAULT '[]'
);
-- Who a campaign was sent to (contract.md 10); an event implies its employee is one.
CREATE TABLE IF NOT EXISTS campaign_targets (
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    employee_id INTEGER NOT NULL REFERENCES employees(id),
    sent_at     TEXT,
    PRIMARY KEY (campaign_id, employee_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS courses (
    id         INTEGER PRIMARY KEY,
    company_id INTEGER NOT NULL REFERENCES companies(id),
    title      TEXT NOT NULL,
    title_key  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS course_sections (
    id           INTEGER PRIMARY KEY,
    course_id    INTEGER NOT NULL REFERENCES courses(id),
    title        TEXT NOT NULL,
    section_type TEXT NOT NULL
        CHECK (section_type IN ({_one_of(SECTION_TYPES)})),
    position     INTEGER NOT NULL,
    UNIQUE (course_id, position)
);
CREATE TABLE IF NOT EXISTS inscriptions (
    id          INTEGER PRIMARY KEY,
    company_id  INTEGER NOT NULL REFERENCES companies(id),
    employee_id INTEGER NOT NULL REFERENCES employees(id),
    course_id   INTEGER NOT NULL REFERENCES courses(id),
    start_date  TEXT NOT NULL,
    due_date    TEXT,
    status      TEXT NOT NULL
        CHECK (status IN ({_one_of(INSCRIPTION_STATUSES)})),
    completed_at TEXT
);
CREATE TABLE IF NOT EXISTS section_results (
    inscription_id INTEGER NOT NULL REFERENCES inscriptions(id),
    section_id     INTEGER NOT NULL REFERENCES course_sections(id),
    completed_at   TEXT,
    result         REAL CHECK (result BETWEEN 0 AND 100),
    status         TEXT CHECK (status IN ({_one_of(SECTION_STATUSES)})),
    CHECK ((result IS NULL) = (status IS NULL)),
    PRIMARY KEY (inscription_id, section_id)
) WITHOUT ROWID;

-- One index per endpoint query, in the order the query filters and sorts. A campaign's
-- events are read from theirs alone, whatever the format and filters (no lookup of
-- each event's row, whose address and user agent make it long: schema version 12).
CREATE INDEX IF NOT EXISTS campaign_events_by_campaign
    ON campaign_events (campaign_id, timestamp, id, employee_id, type, with_captcha, verdict);
CREATE INDEX IF NOT EXISTS campaign_events_by_employee
    ON campaign_events (employee_id, timestamp, id);
-- A page of inscriptions by a person filter checks each one's employee from this index
-- alone (schema version 13).
CREATE INDEX IF NOT EXISTS inscriptions_by_company
    ON inscriptions (company_id, start_date, id, employee_id);
CREATE INDEX IF NOT EXISTS team_members_by_team ON team_members (team_id);
CREATE INDEX IF NOT EXISTS campaign_targets_by_employee
    ON campaign_targets (employee_id, campaign_id);
-- The event feed (contract.md 13) reads in change-sequence order.
CREATE INDEX IF NOT EXISTS campaign_events_by_seq ON campaign_events (seq, id);
CREATE INDEX IF NOT EXISTS course_sections_by_course
    ON course_sections (course_id, position);
CREATE INDEX IF NOT EXISTS api_keys_by_company ON api_keys (company_id);
-- The reports (contract.md 11, 12): each list walked in its order (no sort of the
-- company's whole list before the page is cut), figures from covering indexes.
CREATE INDEX IF NOT EXISTS campaigns_by_company ON campaigns (company_id, launch_date, id);
CREATE INDEX IF NOT EXISTS employees_by_company ON employees (company_id);
-- The people a name or an e-mail filter picks (schema version 13).
CREATE INDEX IF NOT EXISTS employees_by_first_name ON employees (company_id, first_name_key);
CREATE INDEX IF NOT EXISTS employees_by_last_name ON employees (company_id, last_name_key);
CREATE INDEX IF NOT EXISTS employees_by_email ON employees (company_id, email_key);
-- A campaign's events show each one's employee from this index alone (schema version 13).
CREATE INDEX IF NOT EXISTS employees_victims
    ON employees (id, company_id, first_name, last_name, email, department);
CREATE INDEX IF NOT EXISTS courses_by_company ON courses (company_id);
CREATE INDEX IF NOT EXISTS campaign_events_by_type
    ON campaign_events (campaign_id, type, employee_id, timestamp, with_captcha, verdict);
CREATE INDEX IF NOT EXISTS campaign_events_by_employee_type
    ON campaign_events (employee_id, type, campaign_id, timestamp);
CREATE INDEX IF NOT EXISTS inscriptions_by_employee
    ON inscriptions (employee_id, status, due_date);
CREATE INDEX IF NOT EXISTS inscriptions_by_course ON inscriptions (course_id, status, due_date);
CREATE INDEX IF NOT EXISTS section_results_by_section ON section_results (section_id, result);
-- Version 7: the stats by team read the company's teams.
CREATE INDEX IF NOT EXISTS teams_by_company ON teams (company_id);
{PARTNERS}"""

# Rows that point across tenants would leak data through joins; refuse them here too,
# whatever path writes (loader, generator or a hand-made script), on insert and on update.
# A row never changes company either: an update may not move it to another tenant.
_SAME_COMPANY = (
    # table, the condition on NEW that crosses companies, the message
    (
        "campaign_events",
        "(SELECT company_id FROM campaigns WHERE id = NEW.campaign_id)"
        " IS NOT (SELECT company_id FROM employees WHERE id = NEW.employee_id)",
        "event employee and campaign belong to different companies",
    ),
    (
        "inscriptions",
        "(SELECT company_id FROM employees WHERE id = NEW.employee_id) IS NOT NEW.company_id"
        " OR (SELECT company_id FROM courses WHERE id = NEW.course_id) IS NOT NEW.company_id",
        "inscription employee, course and company differ",
    ),
    (
        "team_members",
        "(SELECT company_id FROM employees WHERE id = NEW.employee_id)"
        " IS NOT (SELECT company_id FROM teams WHERE id = NEW.team_id)",
        "team member and team belong to different companies",
    ),
    (
        "campaign_targets",
        "(SELECT company_id FROM campaigns WHERE id = NEW.campaign_id)"
        " IS NOT (SELECT company_id FROM employees WHERE id = NEW.employee_id)",
        "campaign target and campaign belong to different companies",
    ),
    (
        # The course's, hence the company's: a result never counts in another's course.
        "section_results",
        "(SELECT course_id FROM inscriptions WHERE id = NEW.inscription_id)"
        " IS NOT (SELECT course_id FROM course_sections WHERE id = NEW.section_id)",
        "section result and inscription belong to different courses or companies",
    ),
)
_KEEPS_COMPANY = (
    # table, the company of OLD, the company of NEW
    *((t, "OLD.company_id", "NEW.company_id") for t in ("api_keys", "employees", "teams")),
    *((t, "OLD.company_id", "NEW.company_id") for t in ("campaigns", "courses", "inscriptions")),
    (
        "campaign_events",
        "(SELECT company_id FROM campaigns WHERE id = OLD.campaign_id)",
        "(SELECT company_id FROM campaigns WHERE id = NEW.campaign_id)",
    ),
    (
        "course_sections",
        "(SELECT company_id FROM courses WHERE id = OLD.course_id)",
        "(SELECT company_id FROM courses WHERE id = NEW.course_id)",
    ),
)
TENANCY_TRIGGERS = (
    "".join(
        f"CREATE TRIGGER IF NOT EXISTS {table}_same_company{suffix}\n"
        f"BEFORE {event} ON {table}\nWHEN {when}\n"
        f"BEGIN SELECT RAISE(ABORT, '{message}');\nEND;\n"
        for table, when, message in _SAME_COMPANY
        for event, suffix in (("INSERT", ""), ("UPDATE", "_on_update"))
    )
    + "".join(
        f"CREATE TRIGGER IF NOT EXISTS {table}_keeps_company\n"
        f"BEFORE UPDATE ON {table}\nWHEN {old} IS NOT {new}\n"
        f"BEGIN SELECT RAISE(ABORT, 'a row of {table} cannot move to another company');\nEND;\n"
        for table, old, new in _KEEPS_COMPANY
    )
    + (
        # Each change of the change sequence gets a random mark (see FEED_MARK_START).
        "CREATE TRIGGER IF NOT EXISTS meta_feed_mark\n"
        "AFTER UPDATE OF value ON meta\n"
        "WHEN NEW.key = 'change_seq' AND NEW.value IS NOT OLD.value\n"
        "BEGIN INSERT OR IGNORE INTO meta (key, value) VALUES\n"
        "    (printf('feed_mark:%020d', CAST(NEW.value AS INTEGER)), lower(hex(randomblob(8))));\n"
        "END;\n"
    )
)

# Feed marks, meta rows ``feed_mark:<seq, 20 digits>``: the mark of the change that
# brought the change sequence to seq. A feed cursor is signed with the mark of the first
# change at or after its position, so a copy restored from before that change (which
# lacks it, or has another after new loads) refuses the cursor. The sequence's value
# when the marks began has the empty mark: cursors given before keep working.
FEED_MARK_START = (
    "INSERT OR IGNORE INTO meta (key, value)"
    " SELECT printf('feed_mark:%020d', CAST(value AS INTEGER)), '' FROM meta"
    " WHERE key = 'change_seq'"
)

# The meta rows every database starts with: the data version and token (ETags), the
# change sequence of the event feed, and the secret its cursors are signed with.
META_DEFAULTS = (
    "INSERT OR IGNORE INTO meta (key, value) VALUES ('data_version', '0'),"
    " ('data_token', lower(hex(randomblob(16)))), ('change_seq', '0'),"
    " ('cursor_secret', lower(hex(randomblob(32))))"
)

# From schema version 1 (before campaign targets and the event feed) to 2.
MIGRATE_1_TO_2 = (
    "ALTER TABLE api_keys ADD COLUMN expires_at TEXT",
    "ALTER TABLE campaign_events ADD COLUMN ip TEXT",
    "ALTER TABLE campaign_events ADD COLUMN user_agent TEXT",
    "ALTER TABLE campaign_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0",
    # Existing events take their places in the feed in id order.
    "UPDATE campaign_events SET seq = r.n FROM"
    " (SELECT id, row_number() OVER (ORDER BY id) AS n FROM campaign_events) AS r"
    " WHERE r.id = campaign_events.id",
    "INSERT OR IGNORE INTO meta (key, value) VALUES"
    " ('change_seq', (SELECT count(*) FROM campaign_events))",
)

# From schema version 2 to 3: campaign titles get their case-folded copy (the title
# filter), Python's casefold as the loader writes it (registered for the migration).
MIGRATE_2_TO_3 = (
    "ALTER TABLE campaigns ADD COLUMN title_key TEXT NOT NULL DEFAULT ''",
    "UPDATE campaigns SET title_key = casefold(title)",
)

# From schema version 4 to 5: every event gets its verdict (decided once the columns are
# there, with the upgrading writer's settings).
MIGRATE_4_TO_5 = (
    "ALTER TABLE campaign_events ADD COLUMN verdict TEXT NOT NULL DEFAULT 'human'"
    f" CHECK (verdict IN ({_one_of(VERDICTS)}))",
    "ALTER TABLE campaign_events ADD COLUMN reasons TEXT NOT NULL DEFAULT '[]'",
)

# From schema version 5 to 6: the campaigns' walk of each type's events also counts
# their verdicts (automated_events, suspected_events), so its index holds the verdict;
# the CREATE below makes it again.
MIGRATE_5_TO_6 = ("DROP INDEX IF EXISTS campaign_events_by_type",)

# --- From schema version 6 to 7 (one step, one marked block per feature) ---
# A completed inscription's date when its fixture gives none: its latest section
# completion (null for any other status). Both stores and every writer use it.
DERIVED_COMPLETION = (
    "CASE WHEN status = 'completed' THEN (SELECT max(r.completed_at) FROM section_results r"
    " WHERE r.inscription_id = inscriptions.id) END"
)
DERIVE_COMPLETED_AT = f"UPDATE inscriptions SET completed_at = {DERIVED_COMPLETION}"
# An inscription a load gives without a date keeps its stored one until the derivation
# (so an unchanged re-load changes no date and moves nothing in the change feed).
KEPT_COMPLETION = (
    "CASE WHEN s.completed_at_given = 1 THEN s.completed_at"
    " ELSE (SELECT completed_at FROM {0} WHERE id = s.id) END"
)
MIGRATE_6_TO_7 = (
    # -- stats: inscriptions get their completion date, derived for the stored ones.
    "ALTER TABLE inscriptions ADD COLUMN completed_at TEXT",
    DERIVE_COMPLETED_AT,
    # -- keys: api_keys.company_id may be NULL now (partner keys), so the table is made
    # again (SQLite's way to change a column); its index and trigger come back with the
    # schema's CREATEs. Company names get their case-folded copy (the partners'
    # filter[name]). The partners come first: the new keys' table refers to them (with
    # foreign keys on, SQLite refuses rows of a table whose parent is missing).
    *PARTNER_TABLES,
    "ALTER TABLE companies ADD COLUMN name_key TEXT NOT NULL DEFAULT ''",
    "UPDATE companies SET name_key = casefold(name)",
    f"CREATE TABLE api_keys_7 ({API_KEYS_COLUMNS})",
    "INSERT INTO api_keys_7 (id, company_id, key_hash, prefix, label, created_at, revoked_at,"
    " expires_at) SELECT id, company_id, key_hash, prefix, label, created_at, revoked_at,"
    " expires_at FROM api_keys",
    "DROP TABLE api_keys",
    "ALTER TABLE api_keys_7 RENAME TO api_keys",
)


# -- hooks (same step 6 -> 7): the change feeds of inscriptions and employees ------
# (app/data/changes.py). Every version before 7, a new file too, takes this block once.
# A row whose ``seq`` is NULL has changed in the open write and is not placed yet; the
# partial indexes find those at the end of the write (place_changes).
_PERSON = ("first_name", "last_name", "email", "department", "country")
INSCRIPTION_CHANGES = (
    "employee_id",
    "course_id",
    "start_date",
    "due_date",
    "status",
    "completed_at",
)
_DIFFERS = "OLD.{0} IS NOT NEW.{0}"


def _moves(name: str, on: str, when: str, table: str, row: str) -> str:
    """A trigger that leaves ``table``'s row ``row`` unplaced after a write ``on``."""
    condition = f"\nWHEN {when}" if when else ""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {name}\nAFTER {on}{condition}\n"
        f"BEGIN UPDATE {table} SET seq = NULL WHERE id IN ({row}) AND seq IS NOT NULL;\nEND;\n"
    )


# Webhook subscriptions (written by reporting-webhooks) and their delivery attempts: each
# subscription's position in the event feed moves only after a 2xx (app/data/webhooks.py).
WEBHOOK_TABLES = """
CREATE TABLE IF NOT EXISTS webhooks (
    id                   INTEGER PRIMARY KEY,
    company_id           INTEGER NOT NULL REFERENCES companies(id),
    label                TEXT NOT NULL,
    url                  TEXT NOT NULL,
    url_host             TEXT NOT NULL,
    event_types          TEXT NOT NULL,
    secret               TEXT NOT NULL,
    old_secret           TEXT,
    old_secret_until     TEXT,
    status               TEXT NOT NULL CHECK (status IN ('enabled', 'disabled', 'failing')),
    position_seq         INTEGER NOT NULL,
    position_id          INTEGER NOT NULL,
    created_at           TEXT NOT NULL,
    last_success_at      TEXT,
    last_failure_at      TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id              INTEGER PRIMARY KEY,
    webhook_id      INTEGER NOT NULL REFERENCES webhooks(id),
    message_id      TEXT NOT NULL,
    event_id        INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    attempted_at    TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('succeeded', 'failed')),
    response_status INTEGER,
    error           TEXT
);
CREATE INDEX IF NOT EXISTS webhooks_by_company ON webhooks (company_id, id);
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
"""

CHANGE_FEEDS = WEBHOOK_TABLES + (
    "CREATE INDEX IF NOT EXISTS inscriptions_by_seq ON inscriptions (company_id, seq, id);\n"
    "CREATE INDEX IF NOT EXISTS employees_by_seq ON employees (company_id, seq, id);\n"
    "CREATE INDEX IF NOT EXISTS inscriptions_unplaced ON inscriptions (id) WHERE seq IS NULL;\n"
    "CREATE INDEX IF NOT EXISTS employees_unplaced ON employees (id) WHERE seq IS NULL;\n"
    + _moves(
        "inscriptions_moved",
        "UPDATE ON inscriptions",
        " OR ".join(_DIFFERS.format(c) for c in INSCRIPTION_CHANGES),
        "inscriptions",
        "NEW.id",
    )
    + _moves(
        "section_results_added",
        "INSERT ON section_results",
        "",
        "inscriptions",
        "NEW.inscription_id",
    )
    + _moves(
        "section_results_changed",
        "UPDATE ON section_results",
        " OR ".join(
            _DIFFERS.format(c) for c in ("inscription_id", "completed_at", "result", "status")
        ),
        "inscriptions",
        "NEW.inscription_id, OLD.inscription_id",
    )
    + _moves(
        "section_results_removed",
        "DELETE ON section_results",
        "",
        "inscriptions",
        "OLD.inscription_id",
    )
    + _moves(
        "employees_moved",
        "UPDATE ON employees",
        " OR ".join(_DIFFERS.format(c) for c in _PERSON),
        "employees",
        "NEW.id",
    )
    + _moves("team_members_added", "INSERT ON team_members", "", "employees", "NEW.employee_id")
    + _moves("team_members_removed", "DELETE ON team_members", "", "employees", "OLD.employee_id")
    + _moves(
        "team_members_changed",
        "UPDATE ON team_members",
        "",
        "employees",
        "NEW.employee_id, OLD.employee_id",
    )
    + _moves(
        "teams_renamed",
        "UPDATE ON teams",
        "OLD.name IS NOT NEW.name",
        "employees",
        "SELECT employee_id FROM team_members WHERE team_id = NEW.id",
    )
)

# The unplaced rows of a table take the next places of the change sequence, in id order.
_PLACE = (
    "UPDATE {0} SET seq = ? + r.n FROM (SELECT id, row_number() OVER (ORDER BY id) AS n"
    " FROM {0} INDEXED BY {0}_unplaced WHERE seq IS NULL) AS r WHERE r.id = {0}.id"
)


def add_change_feeds(conn: sqlite3.Connection) -> None:
    """The step itself: the columns (unless an older file has them already), indexes and
    triggers; every row then takes its first place."""
    for table in ("inscriptions", "employees"):
        if "seq" not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN seq INTEGER")
    for statement in _statements(CHANGE_FEEDS):
        conn.execute(statement)
    place_changes(conn)


def changed_rows(conn: sqlite3.Connection) -> int:
    """The rows the connection's last INSERT, UPDATE or DELETE wrote. Not the cursor's
    ``rowcount``: Python 3.11 compares a statement's first word with the C library's
    ``tolower``, so under a Turkish locale an ``INSERT`` is no write to it and counts -1."""
    return int(conn.execute("SELECT changes()").fetchone()[0])


def place_changes(conn: sqlite3.Connection) -> None:
    """Give the inscriptions and employees this write changed their places (last in the
    change sequence, in id order): the change feeds' positions, made at write time."""
    for table in ("inscriptions", "employees"):
        seq = int(conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()[0])
        conn.execute(_PLACE.format(table), (seq,))
        moved = changed_rows(conn)
        if moved:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'change_seq'", (str(seq + moved),))


# --- end of schema version 7 ---

# --- From schema version 7 to 8 (one step, one marked block per feature) ---
# -- stats: the stats' summaries, kept by the writers (app/data/stats_summary.py): the
# tables (made with the others), filled from the stored rows once the verdicts are decided.
# -- training: the training summaries and the triggers that keep them
# (app/data/training.py), counted once from the stored rows.
# -- reports: the campaign reports' and the directory's summaries, kept by the writers
# (app/data/summaries.py); the upgrade fills them for the stored data.
SUMMARY_TABLES = (
    SQLITE_TABLES
    + training.TABLES
    + training.TRIGGERS
    + summaries.SCHEMA
    + summaries.TRIGGERS
    + training.PEOPLE_TABLE
    + training.PEOPLE_TRIGGERS  # 11 to 12
)


def fill_summaries(conn: sqlite3.Connection) -> None:
    seq = conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()[0]
    refresh(conn, int(seq), EVERYTHING)


# --- end of 7 to 8 ---


class DatabaseError(Exception):
    """The database file is missing, unreadable or not ours."""


def configure(conn: sqlite3.Connection) -> None:
    """Apply the per-connection settings every connection needs."""
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")


@contextmanager
def into_new_file(path: str | Path) -> Iterator[Path]:
    """The file a writer should open: ``path`` itself when it exists, else a new file
    beside it, linked into place only once the write succeeded. A refused write into a
    database that did not exist leaves no file behind (a server started with
    ``--bootstrap`` would otherwise serve that empty file). Another writer that made the
    file meanwhile keeps it, and this write is refused: nothing is lost.

    The new file is its owner's alone (0600, whatever the umask): it holds the webhooks'
    signing secrets in clear, and SQLite gives its -wal and -shm the same mode. An
    existing file keeps its mode."""
    target = Path(path)
    if target.exists():
        yield target
        return
    if target.is_symlink():  # else os.link below fails as if another writer made it
        raise DatabaseError(
            f"{target} is a symbolic link to {os.readlink(target)}, which does not exist:"
            " name the database file itself"
        )
    if not target.parent.is_dir():  # else the error names the work file below
        raise DatabaseError(f"cannot create {target}: the directory {target.parent} does not exist")
    work = target.with_name(f".{target.name}.{os.getpid()}.new")
    try:
        work.unlink(missing_ok=True)  # left by a killed writer of the same process id
        os.close(os.open(work, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        yield work
        try:
            os.link(work, target)  # never over a file another writer made meanwhile
        except FileExistsError:
            raise DatabaseError(f"{target} was made by another writer meanwhile") from None
        except OSError:  # a file system without hard links: the rename, checked first
            if target.exists():
                raise DatabaseError(f"{target} was made by another writer meanwhile") from None
            os.replace(work, target)
    finally:
        for file in (work, work.with_name(f"{work.name}-wal"), work.with_name(f"{work.name}-shm")):
            file.unlink(missing_ok=True)


class Writer(sqlite3.Connection):
    """A writing connection that remembers which file it opened (device and inode).

    A writer may read for minutes before it writes (a load stages its files first). Had
    another file been renamed over the path meanwhile (``reporting-swap``, a restore), its
    write would go to the old, unlinked file: reported done, and lost. Its write
    transactions are refused instead (see ``write_transaction``)."""

    path = Path()
    opened: tuple[int, int] | None = None  # None: writes wherever it was opened

    def check_in_place(self) -> None:
        """Raise unless the file opened is still the one at the path."""
        if self.opened is not None and file_identity(self.path, True) != self.opened:
            raise DatabaseError(
                f"{self.path} was replaced or removed since this tool opened it: nothing"
                " was written; run it again"
            )


def file_identity(path: str | Path, missing: bool = False) -> tuple[int, int] | None:
    """The file's device and inode: what changes when another file is renamed over it.

    With ``missing``, None for a file that does not exist instead of an error.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if missing:
            return None
        raise
    return st.st_dev, st.st_ino


def connect_writer(
    path: str | Path, *, schema_in_write: bool = False, follows_swaps: bool = False
) -> sqlite3.Connection:
    """Open a writing connection and make sure the schema exists (WAL mode).

    ``schema_in_write``: a file without the tables (new or empty) or of an older schema
    version is left so; the caller makes or upgrades them in its write transaction
    (``ensure_schema(conn, in_write=True)``), so a refused write leaves the file as it was.
    ``follows_swaps``: the caller notices a replaced file itself (the webhook sender), so
    its writes are not refused (see ``Writer``)."""
    before = file_identity(path, True)  # a file swapped in just after is refused, not missed
    conn = sqlite3.connect(path, isolation_level=None, factory=Writer)
    assert isinstance(conn, Writer)
    conn.path = Path(path)
    if not follows_swaps:
        conn.opened = before or file_identity(path, True)
    configure(conn)
    # Switching to WAL needs the file to itself, so ask only when it is not WAL yet:
    # two writers opening a WAL file at once must both get in (they then take turns).
    if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    if not (schema_in_write and conn.execute("PRAGMA user_version").fetchone()[0] in OLDER):
        ensure_schema(conn)  # a newer or unknown version is refused here all the same
    return conn


# --- From schema version 9 to 10: the CSV cells campaigns and employees keep; the stats'
# histograms of seconds counted by hour too (stats_seconds_hours, made with the other
# summaries' tables, filled by ensure_schema) ---


def add_csv_cells(conn: sqlite3.Connection) -> None:
    """Each campaign's and employee's exported cells (app/data/csv_lines.py): the column
    (unless the file has it already), made for the stored rows, and the triggers that make
    it again at every write."""
    for table in KEPT_TEXTS:
        if "csv_cells" not in {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN csv_cells TEXT NOT NULL DEFAULT ''")
        cells = kept_cells(table, SQLITE)
        conn.execute(f"UPDATE {table} SET csv_cells = {cells}")
        make = f"BEGIN UPDATE {table} SET csv_cells = {cells} WHERE id = NEW.id; END"
        added, changed = f"{table}_csv_cells", f"{table}_csv_cells_again"
        conn.execute(f"CREATE TRIGGER IF NOT EXISTS {added} AFTER INSERT ON {table} {make}")
        columns = ", ".join(kept_columns(table))
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS {changed} AFTER UPDATE OF {columns} ON {table} {make}"
        )


# --- end of schema version 10 ---


def ensure_schema(
    conn: sqlite3.Connection, rules: Rules | None = None, *, in_write: bool = False
) -> bool:
    """Create the tables on an empty file, migrate a version 1 to 13 file, refuse any other;
    True if it did either.

    An upgrade decides the verdicts of the stored events with ``rules`` (default: the
    environment's settings). ``in_write``: inside the caller's write transaction, not in
    one of its own (a write makes or upgrades the tables with its rows, so that a refused
    or stopped write leaves the file as it was: without tables, or of its older version)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return False
    if version not in OLDER:
        raise DatabaseError(f"schema version {version} is not {SCHEMA_VERSION}")
    with nullcontext() if in_write else write_transaction(conn):
        # Read again under the write lock: another process may have just done this.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return False
        if version == 1:
            for statement in MIGRATE_1_TO_2:
                conn.execute(statement)
        if version in (1, 2):
            conn.create_function("casefold", 1, str.casefold, deterministic=True)
            for statement in MIGRATE_2_TO_3:
                conn.execute(statement)
        if version in (1, 2, 3, 4):
            for statement in MIGRATE_4_TO_5:
                conn.execute(statement)
        if version in (1, 2, 3, 4, 5):
            for statement in MIGRATE_5_TO_6:
                conn.execute(statement)
        if version in (1, 2, 3, 4, 5, 6):
            conn.create_function("casefold", 1, str.casefold, deterministic=True)
            for statement in MIGRATE_6_TO_7:
                conn.execute(statement)
        if version < 12:  # 11 to 12: a campaign's events index covers their listings
            conn.execute("DROP INDEX IF EXISTS campaign_events_by_campaign")  # (made below)
        # 12 to 13: the company's inscriptions index holds each one's employee, and the
        # people triggers keep the totals without the start date too (both made below).
        conn.execute("DROP INDEX IF EXISTS inscriptions_by_company")
        for trigger in training.PEOPLE_TRIGGER_NAMES:
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        # 13 to 14: the histogram of seconds is kept per launch day (made below, then
        # filled with every other stats' summary from the stored rows).
        conn.execute("DROP TABLE IF EXISTS stats_seconds")
        # Every CREATE is IF NOT EXISTS: on a version 1 file this adds what is new.
        for statement in _statements(SCHEMA + TENANCY_TRIGGERS + SUMMARY_TABLES):
            conn.execute(statement)
        # 7 to 8, training's block: the training summaries counted once; triggers keep them.
        if version in (1, 2, 3, 4, 5, 6, 7):
            for statement in training.MIGRATE_7_TO_8:
                conn.execute(statement)
        if version == 1:
            # An event implies its employee was a target (contract.md 10).
            conn.execute(
                "INSERT OR IGNORE INTO campaign_targets (campaign_id, employee_id)"
                " SELECT DISTINCT campaign_id, employee_id FROM campaign_events"
            )
        conn.execute(META_DEFAULTS)
        conn.execute(FEED_MARK_START)
        if version in (1, 2, 3, 4):  # version 5 has its verdicts: never decided again
            seq = conn.execute("SELECT value FROM meta WHERE key = 'change_seq'").fetchone()[0]
            chosen = rules or rules_from_env()
            classify(conn, chosen, "SELECT id FROM main.campaigns", int(seq))
        add_change_feeds(conn)  # schema step 6 -> 7, hooks block (a new file too)
        if version in (1, 2, 3, 4, 5, 6, 7):  # 7 to 8, stats' and reports' blocks
            fill_summaries(conn)
            summaries.fill(conn)  # after any verdicts decided above
        if version == 8:  # 8 to 9: the medians and the directory's totals, from the summaries
            conn.execute(summaries.MEDIANS_OF_EVERY_CAMPAIGN)
            conn.execute(summaries.DIRECTORY_TOTALS_OF_EVERYONE)
        add_csv_cells(conn)  # 9 to 10 (a new file too)
        if version in (8, 9, 10):  # 10 to 11: only the campaigns' counts are kept
            conn.execute("DROP TABLE stats_members")
        if version in (8, 9, 10, 11, 12):  # 11 to 12: the inscriptions by department,
            for statement in training.FILL_PEOPLE:  # country; 12 to 13: and their totals
                conn.execute(statement)
        if version in (8, 9, 10, 11, 12, 13):  # 13 to 14 (and every step since 8 that
            fill_summaries(conn)  # changed a stats' table): all made again from the rows
        if version:  # verdicts, feed places and fields an answer lacked: no ETag holds
            bump_data_version(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return True


def write_transaction(conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
    """The one way anything writes: BEGIN IMMEDIATE, then COMMIT, or ROLLBACK on any error.

    IMMEDIATE takes the write lock up front, so a writer waits (busy_timeout) instead of
    failing halfway; everything inside commits together or not at all.
    """
    return _transaction(conn, "BEGIN IMMEDIATE")


def scratch_transaction(conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
    """A deferred transaction for work in the temporary database only (a load staging its
    records): it takes no lock on the file, so no other writer waits for it."""
    return _transaction(conn, "BEGIN")


def read_snapshot(conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
    """A deferred transaction that only reads: every statement in it sees one snapshot of
    the file (an export of several tables), and no writer waits for it."""
    return _transaction(conn, "BEGIN")


class CommitHooks:
    """What a tool does around its writes' commits (app/tools/cli.py sets them while a
    tool runs; nothing by default): ``committing`` runs just before a write's COMMIT, and
    ``beginning`` before any transaction begins.

    The tools use them to hold SIGINT and SIGTERM from a write's COMMIT until the next
    transaction or the tool's end: a stop that comes once the write is made is too late
    to undo it, and must not end the tool saying that nothing was written.
    """

    def committing(self) -> None:
        """Called just before a write transaction's COMMIT."""

    def beginning(self) -> None:
        """Called before any transaction begins."""


commit_hooks = CommitHooks()


@contextmanager
def _transaction(conn: sqlite3.Connection, begin: str) -> Iterator[sqlite3.Connection]:
    commit_hooks.beginning()
    conn.execute(begin)
    try:
        if begin == "BEGIN IMMEDIATE" and isinstance(conn, Writer):
            conn.check_in_place()  # holding the write lock: no swap can come after this
        yield conn
        if begin == "BEGIN IMMEDIATE":
            commit_hooks.committing()
        conn.execute("COMMIT")
    except BaseException:
        # After some errors (a full disk, I/O) SQLite has already rolled back, and a ROLLBACK
        # of its own would fail and hide the cause: the first error is the one to report.
        with suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a script into complete statements (triggers contain semicolons)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s]


# The token that changes with every committed load (ETags are made from it).
TOKEN = "SELECT value FROM meta WHERE key = 'data_token'"


def data_token(conn: sqlite3.Connection) -> str:
    """The token that changes with every committed load (ETags are made from it)."""
    row = conn.execute(TOKEN).fetchone()
    return str(row[0]) if row else ""


def bump_data_version(conn: sqlite3.Connection) -> None:
    """Mark a committed change of data: new ETags from the next read on; and the rows the
    write changed take their places in the change feeds."""
    place_changes(conn)
    conn.execute(
        "UPDATE meta SET value = CASE key WHEN 'data_version' THEN CAST(value AS INTEGER) + 1"
        " ELSE lower(hex(randomblob(16))) END WHERE key IN ('data_version', 'data_token')"
    )


def upgrade_if_older(path: str | Path, lock_wait: float = 5.0) -> bool:
    """Migrate an existing file of an older schema version in place; True if it did.

    The server only reads, so this runs before it starts (like the first-start load).
    ``lock_wait``: seconds to wait for a writer, which may be upgrading the file in its
    own write meanwhile (then there is nothing left to do).
    """
    file = Path(path)
    if not file.is_file():
        return False
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return False  # check_readable reports it
    if not 0 < version < SCHEMA_VERSION:
        return False
    conn = connect_writer(file, schema_in_write=True)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(lock_wait * 1000)}")
        return ensure_schema(conn)
    finally:
        conn.close()


OBJECTS = "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')"


@functools.cache
def schema_objects() -> frozenset[tuple[str, str]]:
    """Every table, index and trigger a file of this schema version holds: a new one's."""
    conn = sqlite3.connect(":memory:")
    try:
        ensure_schema(conn, Rules())
        return frozenset(conn.execute(OBJECTS))
    finally:
        conn.close()


def check_readable(path: str | Path) -> str:
    """Open the file afresh, read-only, and return its data token; raise if unusable."""
    file = Path(path)
    if not file.is_file():
        raise DatabaseError(f"database file {file} does not exist")
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:  # an empty file, or another program's database
                raise DatabaseError(
                    f"{file} holds no database of this service: make one with reporting-load"
                )
            if version != SCHEMA_VERSION:
                raise DatabaseError(
                    f"{file} has schema version {version};"
                    f" this version of the service reads {SCHEMA_VERSION}"
                )
            missing = sorted(schema_objects() - set(conn.execute(OBJECTS)))
            if missing:  # dropped behind the writers' back: every read of them would fail
                names = ", ".join(f"{kind} {name}" for kind, name in missing)
                raise DatabaseError(f"{file} lacks what its schema version holds: {names}")
            token = data_token(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DatabaseError(
            without_shm(file) or f"database file {file} is not readable: {exc}"
        ) from exc
    if not token:
        raise DatabaseError(f"database file {file} has no data token")
    return token


def without_shm(file: Path) -> str:
    """Why a file that failed to open could not be read, when it is for want of its -shm:
    SQLite reads a WAL file through it, and cannot make it in a read-only directory."""
    shm = file.with_name(f"{file.name}-shm")
    if shm.exists() or os.access(file.parent, os.W_OK, effective_ids=True):
        return ""
    with suppress(OSError), file.open("rb") as header:
        if header.read(20)[18:19] == b"\x02":  # the write version of a WAL file
            return (
                f"database file {file} cannot be read in a read-only directory: SQLite reads"
                f" it through {shm.name}, which it cannot create there (make the directory"
                " writable, or serve a copy switched out of WAL mode: PRAGMA journal_mode ="
                " DELETE)"
            )
    return ""


def check_integrity(path: str | Path) -> None:
    """Refuse a damaged file at start rather than fail on the first unlucky query."""
    file = Path(path)
    try:
        conn = sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise DatabaseError(f"database file {file} is not readable: {exc}") from exc
    if problems != ["ok"]:
        raise DatabaseError(f"database file {file} is damaged: {' '.join(problems[0].split())}")
