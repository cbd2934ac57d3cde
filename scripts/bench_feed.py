"""Benchmark pieces for the event feed and the CSV/NDJSON formats (contract.md 13, 14).

``follow_feed`` walks the feed from the start to the end over HTTP, as a collector does,
one keep-alive connection, ``limit`` events a request, against the floor of reading the
same rows with the app's own SQL in one pass (bench_floors); ``body_problem`` checks a
CSV or NDJSON answer against the JSON floor's records.
"""

from __future__ import annotations

import csv
import http.client
import io
import json
import statistics
import time
from dataclasses import dataclass, field

from bench_floors import Floors

API = "/api/companies/v1"


@dataclass
class FeedRun:
    """One walk of the feed from start to end."""

    events: int = 0
    pages: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


@dataclass
class FeedFigures:
    """The feed followed over HTTP against its in-process floor, for the table."""

    run: FeedRun
    total: int  # events the company's feed holds
    floor_events: int
    floor_runs: list[float]  # seconds of each read, around the walks

    @property
    def floor_s(self) -> float:
        return statistics.median(self.floor_runs)

    def ratio(self) -> float:
        """The server's events/s over the floor's."""
        return (self.run.events / self.run.seconds) / (self.floor_events / self.floor_s)


def measure(port: int, key: str, floors: Floors, company: int, limit: int) -> FeedFigures:
    """The floor (while the server idles) 3 times, the walk over HTTP (median of 3), the
    floor twice more: the floor's median of 5."""
    floor_events, before = floors.feed(company, rounds=3)
    run = median_follow(port, key, limit, rounds=3)
    _, after = floors.feed(company, rounds=2)
    total = floors.feed_total(company)
    if run.events != total:
        run.problems.append(f"the walk gave {run.events:,} events, the feed holds {total:,}")
    return FeedFigures(run, total, floor_events, before + after)


def follow_feed(port: int, key: str, limit: int) -> FeedRun:
    """Follow Link rel=next from the start until an empty answer; count the events."""
    run = FeedRun()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    path = f"{API}/events?limit={limit}"
    started = time.perf_counter()
    try:
        while True:
            conn.request("GET", path, headers={"X-API-KEY": key})
            response = conn.getresponse()
            body = response.read()
            if response.status != 200:
                run.problems.append(f"{path} answered {response.status}")
                break
            count = body.count(b'"victim":')  # once a record
            run.events += count
            run.pages += 1
            if not count:
                break
            link = response.getheader("Link", "")
            path = link[1 : link.index(">")]
    finally:
        conn.close()
    run.seconds = time.perf_counter() - started
    return run


def median_follow(port: int, key: str, limit: int, rounds: int) -> FeedRun:
    """A warm-up walk, then the walk of median time among ``rounds``."""
    follow_feed(port, key, limit)
    runs = sorted((follow_feed(port, key, limit) for _ in range(rounds)), key=lambda r: r.seconds)
    return runs[len(runs) // 2]


def body_problem(kind: str, body: bytes, floor_json: str) -> str | None:
    """Why a CSV or NDJSON answer does not hold the floor's records, or None."""
    records = json.loads(floor_json)
    if kind == "ndjson":
        lines = body.decode("utf-8").split("\n")
        if lines[-1] != "" or [json.loads(line) for line in lines[:-1]] != records:
            return "the NDJSON lines differ from the database's array (the floor)"
        return None
    rows = list(csv.reader(io.StringIO(body.decode("utf-8"), newline="")))
    ids = [row[0] for row in rows[1:]]
    if rows[0][:3] != ["id", "type", "timestamp"] or ids != [str(r["id"]) for r in records]:
        return "the CSV rows differ from the database's array (the floor)"
    return None
