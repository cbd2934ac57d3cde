"""A small load costs what it touched: the writers' plans (issue 25 item 2).

Every writer keeps the summaries and the verdicts in its own transaction, from temporary
tables of what it touched. SQLite keeps no statistics of those tables, so left to itself
it may walk a whole table of events, targets or summaries and look each row up in the
small temporary one: a load of a few events then costs what the company's history holds.
The refresh and the classification of a write of one event are traced, then run again
statement by statement with EXPLAIN QUERY PLAN before each, on the same database.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from app.data import automation, stats_summary, summaries
from app.data.schema import connect_writer

from .support.factories import make_sample_db

# The tables that grow with the data (each touched row must be sought in them).
GROWING = {
    "campaign_events", "campaign_targets", "employees", "inscriptions", "section_results",
    "stats_sends", "stats_groups", "stats_inscriptions", "stats_phishing", "stats_campaigns",
    "stats_seconds", "stats_seconds_hours", "stats_training", "send_firsts",
    "employee_phishing", "campaign_first_instants", "campaign_first_hours",
}  # fmt: skip
ALIASED = re.compile(r"(?:FROM|JOIN)\s+(?:main\.|temp\.)?(\w+)(?:\s+AS)?\s+(\w+)", re.I)
READS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE TEMP TABLE", "WITH")


def traced_write(db: Path) -> list[str]:
    """The statements the writers' refreshes run for the last event of the sample, as if
    it had just been loaded (in a transaction rolled back)."""
    statements: list[str] = []
    conn = connect_writer(db)
    try:
        (seq,) = conn.execute("SELECT max(seq) - 1 FROM campaign_events").fetchone()
        conn.set_trace_callback(statements.append)
        conn.execute("BEGIN IMMEDIATE")
        campaign = "SELECT campaign_id FROM campaign_events WHERE seq > ?"
        automation.classify(conn, automation.Rules(), campaign.replace("?", str(seq)), seq)
        stats_summary.refresh(conn, seq, stats_summary.Touched())
        summaries.refresh(conn, "", seq)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    return statements


def scans_of_growing_tables(db: Path, statements: list[str]) -> dict[str, list[str]]:
    """Run the statements again in order; each one's plan steps that scan a growing table."""
    found: dict[str, list[str]] = {}
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for statement in statements:
            # (WHERE 1 = 0: an empty table made in a table's shape reads nothing.)
            if statement.lstrip().upper().startswith(READS) and "WHERE 1 = 0" not in statement:
                steps = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]
                scans = [step for step in steps if step.startswith("SCAN ")]
                if {alias_table(statement, step) for step in scans} & GROWING:
                    found[" ".join(statement.split())[:200]] = scans
            conn.execute(statement)
    finally:
        conn.close()
    return found


def alias_table(statement: str, step: str) -> str:
    """The table a plan step scans, its alias resolved in the statement's text."""
    alias = step.split()[1]
    for table, name in ALIASED.findall(statement):
        if name == alias:
            return str(table)
    return alias


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    db = make_sample_db(tmp_path_factory.mktemp("plans"))
    return db, traced_write(db)


def test_the_trace_holds_each_refresh(written: tuple[Path, list[str]]) -> None:
    """The statements of all three writers' steps are there to be checked."""
    _, statements = written
    text = "\n".join(statements)
    for table in ("automation_events", "sumstats_mk", "stats_seconds_hours", "summary_new"):
        assert table in text


def test_a_small_write_scans_no_growing_table(written: tuple[Path, list[str]]) -> None:
    db, statements = written
    assert scans_of_growing_tables(db, statements) == {}
