"""The neighbour scenario of the benchmark: one tenant's heavy pages against another's answers.

Company 1 asks for pages of 500 campaigns on several connections at once (every request
within its rate limit: the limit is raised), while company 2 asks for one of its campaign
reports, then /readyz, on one connection. Each latency is measured twice, alone and
under that load, on one server process; the ratio of their medians is what a tenant
feels of its neighbour. Pooled reads are bounded per company, so the ratio should stay
within a small factor (on 2 cores, the heavy pages also take CPU the others need).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import benchlib as lib

API = "/api/companies/v1"
HEAVY = f"{API}/campaigns?per_page=500"
HEAVY_CONNECTIONS = 4
TARGET = 3.0  # loaded p50 over alone p50


def other_campaign(db: str, company: int) -> int:
    """A campaign of ``company``: the report its neighbour's load must not slow down."""
    with sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT min(id) FROM campaigns WHERE company_id = ?", (company,)
        ).fetchone()
    if row is None or row[0] is None:
        raise SystemExit(f"the database has no campaign of company {company}")
    return int(row[0])


def latencies(port: int, path: str, key: str, seconds: float) -> tuple[float, float]:
    """p50 of ``path`` (company 2's key) and of /readyz, one connection each in turn."""
    url = f"http://127.0.0.1:{port}"
    own = lib.run_wrk(f"{url}{path}", {"X-API-KEY": key}, 1, seconds)
    ready = lib.run_wrk(f"{url}/readyz", {}, 1, seconds)
    return own.p50_ms, ready.p50_ms


def report(
    db: str, keys: dict[int, str], work: Path, root: Path, seconds: float, judged: bool = True
) -> list[str]:
    """Measure alone and under company 1's load; the markdown lines of the section.

    On a tiny data set (the smoke run) a page of 500 is as quick as any request: the
    load is then the event loop's, not the pool's, and the ratio is shown unjudged.
    """
    path = f"{API}/campaigns/{other_campaign(db, 2)}"
    port = lib.free_port()
    server = lib.Process(lib.server_args(db, port), port, work / "server-neighbour.log", root)
    try:
        server.wait_ready("/readyz")
        alone = latencies(port, path, keys[2], seconds)
        heavy_url = f"http://127.0.0.1:{port}{HEAVY}"
        load = threading.Thread(  # runs 1 s longer than the two probes together
            target=lib.run_wrk,
            args=(heavy_url, {"X-API-KEY": keys[1]}, HEAVY_CONNECTIONS, 2 * seconds + 1),
        )
        load.start()
        try:
            loaded = latencies(port, path, keys[2], seconds)
        finally:
            load.join()
    finally:
        server.stop()
    ratio = loaded[0] / alone[0]
    verdict = ("ok" if ratio <= TARGET else "MISSED") if judged else "- (small set)"
    return [
        "",
        f"A neighbour's load (one process): company 1 asks for `campaigns?per_page=500` on"
        f" {HEAVY_CONNECTIONS} connections at once while company 2 asks, on one connection:",
        "",
        "| company 2 asks for | p50 alone | p50 under the load | ratio | target | ok/MISSED |",
        "|---|---|---|---|---|---|",
        f"| its campaign report | {alone[0]:.1f} ms | {loaded[0]:.1f} ms | {ratio:.2f} |"
        f" ≤ {TARGET:g} | {verdict} |",
        f"| /readyz | {alone[1]:.1f} ms | {loaded[1]:.1f} ms | {loaded[1] / alone[1]:.2f} |"
        " - | - |",
    ]
