"""``reporting-api`` / ``python -m app``: read the configuration, prepare the database, serve.

Every setting or start-up problem ends in one line on stderr and exit code 2; the
"Serving on" banner is printed only once the socket is bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import asyncpg

from .config import Config, base_url, load_config, masked_url, unknown_settings
from .data.pg import schema as pg_schema
from .data.pg.session import connect
from .data.pg.store import check_schema
from .data.schema import DatabaseError, check_integrity, check_readable, upgrade_if_older
from .main import create_app
from .tools.loader import SAMPLE_FIXTURE, LoadError, load_files
from .tools.pg_loader import load_pg
from .web.logs import setup_logging
from .web.processes import serve_workers
from .web.server import serve

log = logging.getLogger("app")
# What a role that may only read (or a hot standby) gets when it tries to upgrade.
READ_ONLY = (asyncpg.InsufficientPrivilegeError, asyncpg.ReadOnlySQLTransactionError)
# Seconds a start on an older file waits for a writer: a load or a generation upgrades it
# in its write, which may take minutes (a PostgreSQL start waits on its lock as long).
# It waits a second at a time, so that Ctrl-C stops it (SQLite's wait holds signals).
UPGRADE_WAIT = 3600.0
WAITING = "Waiting for a write to {} to finish: it upgrades the file."


async def prepare_postgresql(config: Config) -> bool:
    """Check the PostgreSQL database; load the sample into one without a schema (True).

    Like the SQLite file's first start, these are the only writes the server's process
    makes, before it serves: an older schema is upgraded when the role may (a read-only
    role simply needs a database the loader prepared or upgraded).
    """
    try:
        conn = await connect(config.database_url, timeout=10)
    # InterfaceError: a setting of the URL the driver refuses only now (sslmode=verify-ca
    # without the root certificate).
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseError(f"cannot connect to PostgreSQL: {exc}") from None
    try:
        if await pg_schema.schema_version(conn) is not None or not config.bootstrap:
            with contextlib.suppress(*READ_ONLY):  # check_schema says what to do
                if await pg_schema.upgrade_if_older(conn):
                    print("Upgraded the PostgreSQL database to the current schema.", flush=True)
            await check_schema(conn)
            return False
    finally:
        await conn.close()
    await load_pg(config.database_url, [SAMPLE_FIXTURE])
    return True


def upgrade_when_free(db: str) -> bool:
    """``upgrade_if_older``, waiting up to UPGRADE_WAIT for a writer that holds the file
    (and may be upgrading it in its write: then nothing is left to do); True if it did."""
    deadline = time.monotonic() + UPGRADE_WAIT
    told = False
    while True:
        try:
            return upgrade_if_older(db, lock_wait=1.0)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            if not told:
                print(WAITING.format(db), flush=True)
                told = True


def prepare_database(config: Config) -> list[dict[str, object]]:
    """Create the database from the sample data on first start; return the sample keys."""
    if config.database_url:
        if not asyncio.run(prepare_postgresql(config)):
            return []
        return list(json.loads(SAMPLE_FIXTURE.read_text(encoding="utf-8")).get("api_keys", []))
    if Path(config.db).is_dir():
        raise DatabaseError(f"database file {config.db} is a directory")
    if Path(config.db).exists() or not config.bootstrap:
        if upgrade_when_free(config.db):
            print(f"Upgraded {config.db} to the current schema.", flush=True)
        check_readable(config.db)
        check_integrity(config.db)
        return []
    folder = Path(config.db).parent
    if not folder.is_dir():
        raise DatabaseError(f"cannot create {config.db}: the directory {folder} does not exist")
    load_files(config.db, [SAMPLE_FIXTURE])
    document = json.loads(SAMPLE_FIXTURE.read_text(encoding="utf-8"))
    return list(document.get("api_keys", []))


def banner(config: Config) -> None:
    """Say where the API is served: called once the socket is bound, never before."""
    base = base_url(config.host, config.port)
    print(f"Serving the reporting API on {base}  (API docs: {base}/api/docs)", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGINT or SIGTERM; in-flight requests finish first."""
    config = load_config(argv)
    setup_logging(config.log_level, config.log_format)
    for warning in unknown_settings(os.environ):
        log.warning(warning)
    if config.redis_url:
        from .web.sharedlimit import refusal_at_start  # redis's client: only when asked for

        refusal = asyncio.run(refusal_at_start(config.redis_url))
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            return 2
    try:
        sample_keys = prepare_database(config)
    except (DatabaseError, LoadError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError, asyncpg.PostgresError) as exc:
        where = masked_url(config.database_url) or config.db  # never the password
        print(f"error: database {where}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # waiting for a writer, say: what it began rolls back
        print("stopped before serving", file=sys.stderr)
        return 130
    if sample_keys:
        where = "the PostgreSQL database" if config.database_url else config.db
        print(f"Created {where} from {SAMPLE_FIXTURE.name}. Sample API keys:", flush=True)
        for entry in sample_keys:
            kind = "company" if entry.get("company_id") else "partner"
            print(f"  {kind} {entry[f'{kind}_id']}: {entry['key']}", flush=True)
    try:
        if config.workers > 1:
            factory = functools.partial(create_app, config)
            serve_workers(config, factory, lambda: banner(config))
        else:
            asyncio.run(serve(create_app(config), config.host, config.port, lambda: banner(config)))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"error: cannot serve on {config.host}:{config.port}: {reason}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
