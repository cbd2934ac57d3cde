"""The benchmark's markdown report: the table for both setups, then what each row asked.

Kept apart from ``bench.py`` (which runs the scenarios) so that each is small enough to
read on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import benchlib as lib
from bench_feed import API

if TYPE_CHECKING:
    from bench import Scenario, Setup

MB = 1024  # KiB in a MiB
RSS_TARGET_MB = 40.0  # (d), (k), (l): peak RSS above idle
FEED_TARGET = 0.5  # (m): of the in-process floor's events/s
# (a): server CPU per request at most this x floor time, with two workers and on one process
CPU_TARGETS = {"workers": 1.25, "one process": 1.4}


def ms(value: float) -> str:
    """Milliseconds, three significant digits below 100."""
    return f"{value:.3g} ms" if value < 100 else f"{value:,.0f} ms"


def describe_errors(r: lib.WrkResult) -> str:
    """The error cell: statuses >= 400 and socket errors of the timed run."""
    parts = [f"{r.non_2xx_3xx} status>=400"] if r.non_2xx_3xx else []
    parts += [f"{n} socket {kind}" for kind, n in r.socket_errors.items()]
    parts += [] if r.requests else ["no request completed"]
    return ", ".join(parts) or "0"


def kept_table(kept: list[tuple[str, Scenario, Scenario]], top: float) -> list[str]:
    """The rows asked again of one process that keeps its answers (the default), beside
    the same rows above, where every request ran its view."""
    if not kept:
        return []
    lines = [
        "",
        "Answers sent again from memory: one process keeping the answers it gave (the"
        " server's default; every row above ran its view), each row's URL asked again and"
        " again, against the same reference as above.",
        "",
        "| scenario | server | req/s | CPU/req | p50 | its view's req/s | speed-up | reference"
        " | ratio |",
        "|" + "---|" * 9,
    ]
    for server, viewed, s in kept:
        assert s.result is not None and viewed.result is not None
        ceiling = s.reference == "ceiling"
        reference = f"ceiling {top:,.0f}/s" if ceiling else f"floor {floor_cell(s)}"
        cells = [s.label, server, f"{s.result.rps:,.0f}", ms(s.cpu_s * 1000)]
        cells += [ms(s.result.p50_ms), f"{viewed.result.rps:,.0f}"]
        cells += [f"{s.result.rps / viewed.result.rps:.2f}", reference, f"{s.ratio(top):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def floor_cell(s: Scenario) -> str:
    """The floor's median time and the range of its measurements."""
    runs = s.reference_runs
    return f"{ms(s.floor_s * 1000)} ({min(runs) * 1000:.3g}-{max(runs) * 1000:.3g})"


def render(
    info: dict[str, str],
    ceiling: Scenario,
    setups: list[Setup],
    seconds: float,
    feed_limit: int,
    kept: list[tuple[str, Scenario, Scenario]],
) -> str:
    """The report: every scenario once per setup, the answers sent again from memory, then
    the notes and the machine."""
    assert ceiling.result is not None
    top = ceiling.result.rps
    head = "| scenario | server | conns | req/s | CPU/req | p50 | p99 | reference | ratio"
    lines = [head + " | target | ok/MISSED | errors |", "|" + "---|" * 12]

    def row(s: Scenario, setup: str, reference: str, ratio: str, target: str, verdict: str) -> None:
        r = s.result
        assert r is not None
        rps = f"{r.rps:,.0f}" if r.rps >= 100 else f"{r.rps:.3g}"
        cpu = ms(s.cpu_s * 1000)
        cpu += f" +{s.redis_cpu_s * 1e6:.0f} µs Redis" if s.redis_cpu_s else ""
        cells = [s.label, setup, str(s.conns), rps, cpu, ms(r.p50_ms), ms(r.p99_ms)]
        cells += [reference, ratio, target, verdict, describe_errors(r)]
        lines.append("| " + " | ".join(cells) + " |")

    runs = ceiling.reference_runs
    spread = f"{len(runs)} runs: {min(runs):,.0f}-{max(runs):,.0f}/s, median of them"
    row(ceiling, "bare app", spread, "-", "-", "-")
    for index in range(len(setups[0].scenarios)):
        for setup in setups:
            s = setup.scenarios[index]
            if s.reference == "ceiling":
                reference = f"ceiling {top:,.0f}/s"
            elif s.against is not None and s.against.result is not None:
                reference = f"next request {ms(s.against.result.p50_ms)}"
            else:
                reference = f"floor {floor_cell(s)} = {1 / s.floor_s:,.0f}/s"
            sign = "≤" if s.by_latency else "≥"
            verdict = "ok" if s.met(top) else "MISSED"
            row(s, setup.label, reference, f"{s.ratio(top):.2f}", f"{sign} {s.target}", verdict)
    for setup in setups:
        followed = setup.followed
        assert followed is not None
        run, ratio = followed.run, followed.ratio()
        verdict = "ok" if ratio >= FEED_TARGET else "MISSED"
        lines.append(f"| (m) event feed, {feed_limit:,} a page, start to end ({run.events:,}"
                     f" events, {run.pages} requests, {run.seconds:.2f} s) | {setup.label} | 1"
                     f" | {run.pages / run.seconds:,.0f} | | | |"
                     f" floor {followed.floor_events / followed.floor_s:,.0f} events/s"
                     f" ({followed.floor_events / max(followed.floor_runs):,.0f}-"
                     f"{followed.floor_events / min(followed.floor_runs):,.0f})"
                     f" | {ratio:.2f} | ≥ {FEED_TARGET} | {verdict}"
                     f" | {len(run.problems)} |")  # fmt: skip
    for setup in (setup for setup in setups if not setup.database_url):
        a = setup.scenarios[0]
        cpu_ratio = a.cpu_s / a.floor_s
        target = CPU_TARGETS["workers" if setup.workers > 1 else "one process"]
        lines.append(
            f"| (a) CPU per request ÷ floor time | {setup.label} | | | {ms(a.cpu_s * 1000)} | | "
            f"| floor {floor_cell(a)} | {cpu_ratio:.2f} | ≤ {target}"
            f" | {'ok' if cpu_ratio <= target else 'MISSED'} | |"
        )
    for setup in setups:
        for s in (s for s in setup.scenarios if s.watch_rss):
            growth = (s.rss_peak - s.rss_idle) / MB
            verdict = "ok" if growth <= RSS_TARGET_MB else "MISSED"
            lines.append(f"| {s.label[:3]} peak RSS above idle | {setup.label} | 1 | | | |"
                         f" | idle {s.rss_idle / MB:.1f} MB | {growth:.1f} MB"
                         f" | ≤ {RSS_TARGET_MB:.0f} MB | {verdict} | |")  # fmt: skip
    lines += kept_table(kept, top)
    first = setups[0].scenarios
    notes = [
        "",
        f"Each row: one wrk thread (`wrk -t1 -cN -d{seconds:g}s --latency`) after a warm-up"
        " that counts every status; ratios come from this same run. The server writes its"
        " access log (the default), as users run it.",
        "References: each floor is measured 3 times around its row (before the warm-up,"
        " before the timed run, after it), the ceiling before each setup and after the last;"
        " the ratios use the median, the range of the measurements stands in brackets (ms,"
        " or req/s for the ceiling). The feed's floor: 5 reads, 3 before the walks and 2"
        " after.",
        "(a), (b): req/s × floor time, i.e. the share of the database's own rate the whole service"
        " reaches. (c), (d): p50 ÷ floor time at 1 connection, a lone big response against"
        " the database building it once (more connections would only queue on 2 cores)."
        " (e), (f): req/s ÷ the ceiling's req/s (the bare app, one process).",
        "CPU/req: user + system CPU time of every server process (gunicorn's arbiter and"
        " workers) during the timed run, divided by the requests it answered; the floor's"
        " CPU per request is its time. With Redis, Redis's own CPU per request is shown"
        " beside it.",
        "Strict floor (the same bytes joined with group_concat, no json() re-parse of each"
        " record; stricter than the floor defined above): "
        + "; ".join(
            f"{s.label[:3]} {ms(s.strict_s * 1000)}, ratio {s.floor_ratio(s.strict_s):.2f}"
            for s in first
            if s.strict_s
        )
        + " (1 process).",
        "(k), (l): the same p50 ÷ floor time, the floor being (d)'s JSON array: the cost of"
        " CSV or NDJSON over the least work for the same records in JSON.",
        f"(m): {feed_limit:,} events a request, Link rel=next followed from the start until an"
        " empty answer, one keep-alive connection (median of 3 walks after a warm-up); the"
        " floor reads the same rows with the app's SQL in one in-process statement.",
        *(
            [
                "PostgreSQL rows: the server started with `--database-url` (the data set"
                " copied into a PostgreSQL 15 cluster on 127.0.0.1); each floor is PostgreSQL"
                " building the same array with the app's PostgreSQL SQL"
                " (scripts/bench_floors.py pg_whole_array), fetched over one asyncpg connection."
            ]
            if any(setup.database_url for setup in setups)
            else []
        ),
        *(
            f"Server RSS ({setup.label}; with workers the largest worker's):"
            f" {setup.rss_start / MB:.1f} MB after start; peaks of (d), (k), (l): VmHWM after"
            " clear_refs, above the RSS just before the row."
            for setup in setups
        ),
        "",
        "Requests:",
    ]
    for s in [ceiling, *first]:
        counted = (s.result.statuses if s.result else None) or {}
        statuses = ", ".join(f"{c}×{n:,}" for c, n in sorted(counted.items()))
        notes.append(f"- {s.label}: `{s.path}` (warm-up statuses: {statuses or 'none'})")
    notes += [f"- (m) `{API}/events?limit={feed_limit}`, then each Link rel=next"]
    notes += [f"  - ERROR ({ceiling.label}): {p}" for p in ceiling.problems]
    for setup in setups:
        for s in setup.scenarios:
            notes += [f"  - ERROR ({s.label}, {setup.label}): {p}" for p in s.problems]
        if setup.followed is not None:
            notes += [f"  - ERROR ((m), {setup.label}): {p}" for p in setup.followed.run.problems]
    notes += ["", "Machine:", *[f"- {k}: {v}" for k, v in info.items()]]
    return "\n".join(lines + notes) + "\n"
