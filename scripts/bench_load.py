"""The load scenario of the benchmark: the data set, from JSON, into a new database with
``scripts/load_fixtures.py``, as a user would run it.

The benchmark's database is written out as a fixture (``app.tools.export``), then
loaded into a new file by a separate process whose wall time and peak RSS are taken. In the
same run: the time ijson alone takes to parse the file (the floor of any streaming load),
and the peak RSS of loading the small sample file, so that memory growth with the file's
size shows. The target is 50,000 rows/s; the memory target is growth no larger
than the two page caches the loader configures (``CACHE_MIB`` + ``TEMP_CACHE_MIB``) plus 40 MB.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import ijson

from app.tools.export import export_fixture
from app.tools.generator import generated_key
from app.tools.loader import CACHE_MIB, SAMPLE_FIXTURE, TEMP_CACHE_MIB

ROOT = Path(__file__).resolve().parent.parent
TARGET_ROWS_PER_S = 50_000
CACHES_MB = CACHE_MIB + TEMP_CACHE_MIB
JUDGED_FROM = 100_000  # records: the rate target applies to a standard-sized load
TARGET_CLASSIFY_SHARE = 0.15  # of the load's CPU time: deciding the events' verdicts
# Runs the loader's command line and reports its own peak RSS (KiB), CPU seconds and those
# spent deciding verdicts (app.data.automation.classify, timed where the loader finds it)
# on the last stderr line. The peak is the process's VmHWM: Linux's ru_maxrss keeps, across
# exec, the size of the process that forked it (the benchmark, hundreds of MB by then).
WRAPPER = (
    "import resource, runpy, sys, time\n"
    "def peak_kib():\n"
    "    try:\n"
    "        with open('/proc/self/status') as status:\n"
    "            return next(int(l.split()[1]) for l in status if l.startswith('VmHWM:'))\n"
    "    except (OSError, StopIteration):\n"
    "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "import app.data.automation as automation\n"
    "decide, spent = automation.classify, [0.0]\n"
    "def timed(*args, **kwargs):\n"
    "    started = time.process_time()\n"
    "    try: return decide(*args, **kwargs)\n"
    "    finally: spent[0] += time.process_time() - started\n"
    "automation.classify = timed\n"
    "sys.argv = ['load_fixtures.py', *sys.argv[1:]]\n"
    "try: runpy.run_path(sys.argv[0], run_name='__main__')\n"
    "finally:\n"
    "    use = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    print('peak', peak_kib(), use.ru_utime + use.ru_stime, spent[0], file=sys.stderr)\n"
)


def run_load(fixture: Path, db: Path) -> tuple[float, int, int, float, float]:
    """Load ``fixture`` into a new ``db`` in a process: wall seconds, records, peak RSS KiB,
    CPU seconds (on a shared machine the wall time also counts waiting for a core) and
    those of them spent deciding the verdicts."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(fixture), "--db", str(db), "--no-progress"],
        cwd=ROOT / "scripts",
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"the load failed: {done.stderr.strip()[-500:]}")
    records = int(re.search(r"loaded ([\d,]+) records", done.stdout)[1].replace(",", ""))  # type: ignore[index]
    _, peak, cpu, classify = done.stderr.strip().splitlines()[-1].split()
    return seconds, records, int(peak), float(cpu), float(classify)


def parse_seconds(fixture: Path) -> float:
    """The floor: ijson's C parser reading every event of the file, nothing else."""
    started = time.perf_counter()
    with fixture.open("rb") as stream:
        for _ in ijson.basic_parse(stream, use_float=True):
            pass
    return time.perf_counter() - started


def report(db: str, seed: int, work: Path) -> list[str]:
    """Export, time the floor and the load, and return the markdown lines of the section."""
    fixture = work / "bench-load.json"
    companies = range(1, 100)
    export_fixture(db, fixture, {c: generated_key(c, seed) for c in companies})
    size_mb = fixture.stat().st_size / 1e6
    floors = [parse_seconds(fixture)]  # three times, around the two loads
    seconds, records, peak, cpu, classify = run_load(fixture, work / "loaded.sqlite3")
    floors.append(parse_seconds(fixture))
    _, small_records, small_peak, *_ = run_load(SAMPLE_FIXTURE, work / "sample.sqlite3")
    floors.append(parse_seconds(fixture))
    floor = statistics.median(floors)
    share = classify / cpu
    classified = "ok" if share <= TARGET_CLASSIFY_SHARE else "MISSED"
    rate = records / seconds
    growth = (peak - small_peak) / 1024
    verdict = "ok" if rate >= TARGET_ROWS_PER_S else "MISSED"
    if records < JUDGED_FROM:  # start-up time dominates a small load: nothing to judge
        verdict = "- (small set)"
    memory = "ok" if growth <= CACHES_MB + 40 else "MISSED"
    return [
        "",
        "Loading the same data set from JSON into a new database (`scripts/load_fixtures.py`,"
        f" one process; the file: {size_mb:,.0f} MB, {records:,} records):",
        "",
        "| scenario | records | seconds (CPU) | rows/s | reference | ratio | target | ok/MISSED |",
        "|---|---|---|---|---|---|---|---|",
        f"| load into a new database | {records:,} | {seconds:.1f} ({cpu:.1f}) | {rate:,.0f} |"
        f" ijson parse alone {floor:.2f} s ({min(floors):.2f}-{max(floors):.2f},"
        f" median of 3) = {records / floor:,.0f}/s |"
        f" {rate / TARGET_ROWS_PER_S:.2f} of 50,000/s | ≥ 50,000 rows/s | {verdict} |",
        f"| peak RSS of that load | | | | sample ({small_records:,} records):"
        f" {small_peak / 1024:.0f} MB | {peak / 1024:.0f} MB (+{growth:.0f} MB) |"
        f" growth ≤ {CACHES_MB + 40} MB | {memory} |",
        f"| classification inside that load (the events' verdicts) | | {classify:.2f} CPU |"
        f" | the load's CPU {cpu:.1f} s | {share:.1%} | ≤ {TARGET_CLASSIFY_SHARE:.0%} |"
        f" {classified} |",
        "",
        f"Records per CPU-second of the loader: {records / cpu:,.0f} (the wall-time rate also"
        " counts waiting for a core on a shared machine).",
    ]
