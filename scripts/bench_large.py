"""The benchmark at two sizes: ``bench_large.py --db STANDARD --large LARGE`` or ``--smoke``.

Every report, stats, page and stream row of ``bench.py`` runs on the standard set and on
the large one (the generator's ``--scale 10``: ten times the people, events, targets and
inscriptions, the same campaigns and courses), one request at a time on one keep-alive
connection, each row's rounds alternating between the two servers (both running, one
process each) so that the machine's noise weighs on both sides alike. Each side's first
request of a row is timed on its own; the median of the next ones is the row's time. Then
1,000 events are loaded into a copy of each set, three times, alternating, in-process.
Prints one table with the growth of each row and a verdict per target; exits 1 on an
error or unexpected status, never for a missed target.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import http.client
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench  # noqa: E402
import bench_report  # noqa: E402
import benchlib as lib  # noqa: E402
from bench_page import keep  # noqa: E402

from app.tools.cli import ToolError  # noqa: E402
from app.tools.loader import load_files  # noqa: E402
from app.web.refresh import WATCH_SECONDS  # noqa: E402

ROWS = "abcdklghijopqwxy"  # reports (g-j), stats (o-q, w-y), pages (a, b), streams (c, d, k, l)
# (w) to (y) take the documented slower path over the raw rows: no report target for them.
REPORTS, PAGES, STREAMS = "ghijopq", "abghjopqwxy", "cd"
TARGET_MS = 15.0  # a report or stats row on the large set
TARGET_GROWTH = 2.0  # a report or stats row: large time over standard time
TARGET_FIRST = 3.0  # a page on the large set: its first request over the next ones
TARGET_STREAM = 11.0  # (c), (d): ten times the records, at most 11 times the time
TARGET_LOAD = 3.0  # 1,000 events into the large set over the same into the standard set
MIN_ROUNDS, MAX_ROUNDS = 3, 200  # requests a row after the first, on each side
LOAD_EVENTS, LOAD_ROUNDS = 1000, 3
SCALE = 10


@dataclass
class Side:
    """One data set's server and what was measured on it, row by row."""

    name: str
    db: str
    key: str
    port: int = 0
    copy: Path = Path()  # what the server serves and the loads write: a copy of db
    opening: list[float] = field(default_factory=list)  # seconds, by row: a new process's
    after_loads: list[list[float]] = field(default_factory=list)  # by row: after each load
    first: list[float] = field(default_factory=list)  # seconds, by row: their median
    times: list[list[float]] = field(default_factory=list)  # seconds of the next requests
    loads: list[float] = field(default_factory=list)  # seconds per batch of events
    problems: list[str] = field(default_factory=list)


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def spread(times: list[float]) -> str:
    """The median and the range of ``times`` (seconds) as one cell."""
    ends = (min(times) * 1000, max(times) * 1000)
    low, high = (f"{v:.3g}" if v < 100 else f"{v:,.0f}" for v in ends)
    return f"{bench_report.ms(median_ms(times))} ({low}-{high}, {len(times)}×)"


def timed_get(conn: http.client.HTTPConnection, path: str, key: str) -> tuple[int, float]:
    """One request, its whole body read in pieces: status and seconds. The connection is
    open before the clock starts, so every request is timed on a keep-alive connection,
    the first one too. A connection the server closed while idle (its keep-alive timeout,
    while the other side was asked) is opened again and the request sent again, timed
    afresh."""
    for attempt in (1, 2):
        if conn.sock is None:
            conn.connect()
        started = time.perf_counter()
        try:
            conn.request("GET", path, headers={"X-API-KEY": key})
            response = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            conn.close()
            if attempt == 2:
                raise
            continue
        while response.read(1 << 20):
            pass
        return response.status, time.perf_counter() - started
    raise AssertionError("unreachable")


def ask(side: Side, conn: http.client.HTTPConnection, s: bench.Scenario) -> float:
    """One request of the row, timed; an unexpected status is the side's problem."""
    status, seconds = timed_get(conn, s.path, side.key)
    if status != s.status:
        side.problems.append(f"{s.label}: answered {status}, expected {s.status}")
    return seconds


def connections(sides: list[Side]) -> list[http.client.HTTPConnection]:
    return [http.client.HTTPConnection("127.0.0.1", side.port, timeout=600) for side in sides]


def ask_once(sides: list[Side], s: bench.Scenario) -> list[float]:
    """Each side's one request of the row (its first since the last load), timed."""
    conns = connections(sides)
    try:
        return [ask(side, conn, s) for side, conn in zip(sides, conns, strict=True)]
    finally:
        for conn in conns:
            conn.close()


def measure_row(sides: list[Side], s: bench.Scenario, budget: float) -> None:
    """Rounds alternating between the sides until the budget is spent (at least
    MIN_ROUNDS, at most MAX_ROUNDS)."""
    conns = connections(sides)
    try:
        for side in sides:
            side.times.append([])
        started, rounds = time.perf_counter(), 0
        while rounds < MIN_ROUNDS or (
            time.perf_counter() - started < budget and rounds < MAX_ROUNDS
        ):
            for side, conn in zip(sides, conns, strict=True):
                side.times[-1].append(ask(side, conn, s))
            rounds += 1
    finally:
        for conn in conns:
            conn.close()


WARM_UP = f"{bench.API}/key"  # the key's own facts: no row reads them, nor any listing


# After the load, for AFTER_LOAD_SECONDS: a report no row asks for. A server looks for
# a new data version every WATCH_SECONDS, then reads the pages it served last again; a
# second more lets it finish, as it would between a load and the next dashboard's visit.
AFTER_LOAD = f"{bench.API}/campaigns/2"
AFTER_LOAD_SECONDS = WATCH_SECONDS + 1.0


def warm_up(sides: list[Side], path: str = WARM_UP, seconds: float = 0.0) -> None:
    """Requests of ``path`` to the servers in turn, once or for ``seconds``, before the
    rows: the first row's first request would otherwise also pay the process's first
    request, or the wake of a process that sat idle through the load (on this kind of
    virtual machine the next request after a second of idling runs many times slower,
    whatever it asks)."""
    conns = connections(sides)
    until = time.perf_counter() + seconds
    try:
        while True:
            for side, conn in zip(sides, conns, strict=True):
                timed_get(conn, path, side.key)
            if time.perf_counter() >= until:
                break
    finally:
        for conn in conns:
            conn.close()


def events_batch(db: Path, company: int, events: int) -> dict[str, list[dict[str, object]]]:
    """A fixture of ``events`` new events in company's last campaign, by its targets, after
    every id the database holds: the same shape of load whatever the set's size."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        campaign, launch = conn.execute(
            "SELECT id, launch_date FROM campaigns WHERE company_id = ? ORDER BY id DESC LIMIT 1",
            (company,),
        ).fetchone()
        people = [e for (e,) in conn.execute(
            "SELECT employee_id FROM campaign_targets WHERE campaign_id = ? ORDER BY 1 LIMIT ?",
            (campaign, events),
        )]  # fmt: skip
        (top,) = conn.execute("SELECT coalesce(max(id), 0) FROM campaign_events").fetchone()
    start = dt.datetime.fromisoformat(launch) + dt.timedelta(days=30)
    kinds = ("open", "click", "report", "fail")
    records = [
        {"id": top + 1 + i, "campaign_id": campaign, "employee_id": people[i % len(people)],
         "type": kinds[i % 4], "with_captcha": False,
         "timestamp": (start + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
        for i in range(events)
    ]  # fmt: skip
    return {"campaign_events": records}


def copy_sets(sides: list[Side], work: Path) -> None:
    """Each side's set copied into ``work``: the servers serve the copies, the loads
    write them."""
    for side in sides:
        side.copy = work / f"load-{side.name}.sqlite3"
        for suffix in ("", "-wal"):
            if Path(side.db + suffix).exists():
                shutil.copyfile(side.db + suffix, f"{side.copy}{suffix}")


def load_batch(sides: list[Side], work: Path, batch: int) -> None:
    """LOAD_EVENTS new events loaded into each side's copy, one side after the other; the
    load's own time, in this process."""
    for side in sides:
        fixture = work / f"events-{side.name}-{batch}.json"
        fixture.write_text(json.dumps(events_batch(side.copy, bench.COMPANY, LOAD_EVENTS)))
        started = time.perf_counter()
        try:
            load_files(side.copy, [fixture])
        except ToolError as exc:  # refused: the row shows no time, the run fails
            side.problems.append(f"the load of {LOAD_EVENTS:,} events: {exc}")
            continue
        side.loads.append(time.perf_counter() - started)


@contextlib.contextmanager
def servers(sides: list[Side], work: Path) -> Iterator[None]:
    """Each side's server on its copy, one process, started and stopped by its PID."""
    processes = []
    try:
        for side in sides:
            side.port = lib.free_port()
            args = lib.server_args(str(side.copy), side.port)
            processes.append(lib.Process(args, side.port, work / f"server-{side.name}.log", ROOT))
        for process in processes:
            process.wait_ready("/readyz", timeout=1800)  # an upgrade of a large set may run
        yield
    finally:
        for process in processes:
            process.stop()


def verdicts(letter: str, standard: Side, large: Side, row: int) -> list[str]:
    """The target cell and the verdict cell of one row."""
    time_ms = median_ms(large.times[row])
    growth = time_ms / median_ms(standard.times[row])
    first = large.first[row] * 1000 / time_ms
    checks = []
    if letter in REPORTS:
        checks += [(f"≤ {TARGET_MS:g} ms", time_ms <= TARGET_MS)]
        checks += [(f"growth ≤ {TARGET_GROWTH:g}", growth <= TARGET_GROWTH)]
    if letter in STREAMS:
        checks += [(f"growth ≤ {TARGET_STREAM:g}", growth <= TARGET_STREAM)]
    if letter in PAGES:
        checks += [(f"first ≤ {TARGET_FIRST:g}× next", first <= TARGET_FIRST)]
    if not checks:
        return ["-", "-"]
    return ["; ".join(t for t, _ in checks), "; ".join("ok" if m else "MISSED" for _, m in checks)]


def render(rows: list[bench.Scenario], standard: Side, large: Side, budget: float) -> str:
    """The markdown report: the rows, the load, how it was measured, the requests."""
    head = "| scenario | standard: first | standard: median (min-max) | large: new process"
    lines = [head + " | large: first | large: median (min-max) | growth | first ÷ next (large)"
             " | target | ok/MISSED |", "|" + "---|" * 10]  # fmt: skip
    ms = bench_report.ms
    for row, s in enumerate(rows):
        growth = median_ms(large.times[row]) / median_ms(standard.times[row])
        first = large.first[row] / statistics.median(large.times[row])
        cells = [s.label, spread(standard.after_loads[row]), spread(standard.times[row])]
        cells += [ms(large.opening[row] * 1000), spread(large.after_loads[row])]
        cells += [spread(large.times[row])]
        cells += [f"{growth:.2f}", f"{first:.2f}", *verdicts(s.label[1], standard, large, row)]
        lines.append("| " + " | ".join(cells) + " |")
    requests = [f"- {s.label[:3]} `{s.path}`" for s in rows]
    loads = [side.loads or [float("nan")] for side in (standard, large)]
    load = statistics.median(loads[1]) / statistics.median(loads[0])
    verdict = "ok" if load <= TARGET_LOAD else "MISSED"
    lines.append(f"| load of {LOAD_EVENTS:,} events (in-process) | | {spread(loads[0])} | |"
                 f" | {spread(loads[1])} | {load:.2f} | | growth ≤ {TARGET_LOAD:g}"
                 f" | {verdict} |")  # fmt: skip
    notes = [
        "",
        "Times are one request at a time on one keep-alive connection, measured by the client"
        " on 127.0.0.1 from sending the request to the body's last byte (so the server's time"
        " plus loopback). Both servers (one process each) serve a copy of their set. First,"
        " each row is asked once of each, in the order of the table: new process, the"
        " large set's time (the process was warmed by one request that reads no listing,"
        f" `/key`). Then, {LOAD_ROUNDS} times: a batch of the load below is loaded into both"
        " copies, so that no total is counted and no answer known at the new data version;"
        f" each server is asked campaign 2's report in turn for {AFTER_LOAD_SECONDS:g} s (no"
        " row asks for it; a server looks for a new data version every"
        f" {WATCH_SECONDS:g} s, then reads the pages it served last again); each row is asked"
        " once of each server. first: the median of those first requests after a load, the"
        f" range in brackets. Then, row by row: at least {MIN_ROUNDS} and up to {MAX_ROUNDS}"
        f" requests alternating between the two servers for about {budget:g} s; the median"
        " of those is the row's time, the range in brackets. growth: the large set's median"
        " over the standard set's; first ÷ next: the large set's first request after a load"
        " (median) over its median.",
        f"Targets: report and stats rows (g)-(j), (o)-(q) at most {TARGET_MS:g} ms on the large"
        f" set and at most {TARGET_GROWTH:g} times their standard time; the first request of"
        f" a page (a), (b), (g), (h), (j), (o)-(q), (w)-(y) at most {TARGET_FIRST:g} times the"
        f" next ones on the large set; streams (c), (d) at most {TARGET_STREAM:g} times their"
        " standard time (ten times the events); (k), (l) are shown only, and so are the times"
        " of (w)-(y), the stats' slower path over the raw rows.",
        f"Load: {LOAD_EVENTS:,} new events of company 1's last campaign (by its targets) loaded"
        f" with the loader into a copy of each set, {LOAD_ROUNDS} batches alternating between"
        " the copies (as above), timed in-process (no interpreter start-up); target: the"
        " large set's"
        f" median at most {TARGET_LOAD:g} times the standard set's.",
        "",
        "Requests:",
        *requests,
    ]
    for side in (standard, large):
        notes += [f"  - ERROR ({side.name}): {p}" for p in side.problems]
    return "\n".join(lines + notes) + "\n"


def scenarios(standard: str, large: str, letters: str) -> list[bench.Scenario]:
    """The rows, their parameters picked from the standard set (the same requests on both
    sets); a stream's label gives its size on each."""
    with contextlib.closing(open_ro(standard)) as conn:
        rows = [s for s in bench.make_scenarios(conn) if s.label[1] in letters]
    with contextlib.closing(open_ro(large)) as conn:
        for s in rows:
            if s.label[1] in STREAMS:
                campaign = int(s.label.split()[2])
                (n,) = bench.first_row(conn, bench.CAMPAIGN_SIZE, campaign, bench.COMPANY)
                s.label = f"{s.label[:-1]}; large: {n:,})"
    return rows


def open_ro(db: str) -> sqlite3.Connection:
    return sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True)


def run(standard: Side, large: Side, budget: float, letters: str, work: Path) -> str:
    """Each row's first request in the new processes, then a load, then every row
    measured on both sets, alternating, then the other loads."""
    sides = [standard, large]
    rows = scenarios(standard.db, large.db, letters)
    info = lib.machine()
    copy_sets(sides, work)
    with servers(sides, work):
        warm_up(sides)
        for s in rows:
            for side, seconds in zip(sides, ask_once(sides, s), strict=True):
                side.opening.append(seconds)
                side.after_loads.append([])
        for batch in range(LOAD_ROUNDS):
            load_batch(sides, work, batch)
            warm_up(sides, AFTER_LOAD, AFTER_LOAD_SECONDS)
            for row, s in enumerate(rows):
                for side, seconds in zip(sides, ask_once(sides, s), strict=True):
                    side.after_loads[row].append(seconds)
        for side in sides:
            side.first = [statistics.median(firsts) for firsts in side.after_loads]
        for row, s in enumerate(rows):  # each row on stderr as it ends: a stopped run keeps it
            measure_row(sides, s, budget)
            print(f"{s.label}: " + ", ".join(f"{side.name} {spread(side.times[-1])}"
                  f" (first {side.first[row] * 1000:,.1f} ms)" for side in sides),
                  file=sys.stderr, flush=True)  # fmt: skip
    info["load"] += ", {:.2f} {:.2f} {:.2f} at the end".format(*os.getloadavg())
    lines = [f"Sets: standard `{standard.db}`, large `{large.db}`.", "", "Machine:"]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    return render(rows, standard, large, budget) + "\n" + "\n".join(lines) + "\n"


def smoke_sets(work: Path, seed: int) -> tuple[str, str]:
    """The smoke run's two sets: the tiny one and ten times it."""
    command = [sys.executable, str(ROOT / "scripts" / "generate_fixtures.py")]
    paths = []
    for scale in (1, SCALE):
        db = work / f"smoke-x{scale}.sqlite3"
        flags = [*bench.SMOKE_SIZES, "--scale", str(scale), "--seed", str(seed), "--no-progress"]
        run = [*command, "--db", str(db), *flags]
        subprocess.run(run, check=True, timeout=300, stdout=subprocess.DEVNULL)
        paths.append(str(db))
    return paths[0], paths[1]


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, run both sets, print (and keep) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--db", help="the standard set (make bench-data)")
    mode.add_argument(
        "--smoke", action="store_true", help="a tiny set and ten times it, (k) and (l) left out"
    )
    parser.add_argument("--large", help="the large set (make bench-data-large), with --db")
    parser.add_argument("--seed", type=int, default=1, help="the seed both sets were made with")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per row")
    parser.add_argument("--rows", default="", help=f"only these rows, by letter (of {ROWS})")
    parser.add_argument(
        "--name",
        default="bench-large",
        help="the report's name: bench-data/last-NAME.md and the docs page's NAME markers",
    )
    args = parser.parse_args(argv)
    if args.db and not args.large:
        parser.error("--db needs --large (the large set)")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    every = ROWS.replace("k", "").replace("l", "") if args.smoke else ROWS  # CSV is slow
    letters = "".join(c for c in every if not args.rows or c in args.rows)
    work_in = None if args.smoke else Path(args.large).resolve().parent  # copies beside it
    with tempfile.TemporaryDirectory(prefix="bench-large-", dir=work_in) as tmp:
        work = Path(tmp)
        db, large_db = smoke_sets(work, args.seed) if args.smoke else (args.db, args.large)
        standard = Side("standard", db, bench.company_key(db, args.seed))
        large = Side("large", large_db, bench.company_key(large_db, args.seed))
        budget = 0.3 if args.smoke else args.duration
        report = run(standard, large, budget, letters, work)
    clean = not standard.problems and not large.problems
    keep(ROOT, report, name=args.name, smoke=args.smoke, rows=args.rows, clean=clean)
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
