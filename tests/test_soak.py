"""Issue 7 item 4 against ``python -m app``: contract.md 2, 6, 7 and 8 under load and abuse.

A 20-second soak at 64 connections over every endpoint (filters, pages, 304
revalidations, 400s, 401s and 404s) gets exactly the expected status every time, never a
5xx or a dropped connection, and the server's RSS stays flat after warm-up; idle and
stalled connections do not block other clients; a key guesser from one address meets
429 after the default 10 failures and never a 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import aiohttp
import pytest

from .support.factories import API, KEY_1, KEYS, sample
from .support.servers import GUARD_SECONDS, UNLIMITED, AppProcess, Launcher, fetch

pytestmark = pytest.mark.system  # starts server processes (make test-fast skips it)

SOAK_SECONDS = 20.0
WARMUP_SECONDS = 5.0
CONNECTIONS = 64
RSS_SLACK_KIB = 15 * 1024
IDLE_CONNECTIONS = 200


@dataclass(frozen=True)
class Probe:
    """One request of the mix and the status the contract gives it."""

    path: str
    expected: int
    company: int | None = 1
    etag: str | None = None

    def headers(self) -> dict[str, str]:
        """The key of the probe's company and, for revalidations, If-None-Match."""
        headers = {"X-API-KEY": KEYS[self.company]} if self.company else {}
        return headers | ({"If-None-Match": self.etag} if self.etag else {})


def request_mix() -> list[Probe]:
    """Probes over the three endpoints, their statuses computed from the fixture."""
    probes: list[Probe] = []
    for campaign in sample()["campaigns"]:
        own, other = campaign["company_id"], 3 - campaign["company_id"]
        events = f"{API}/campaigns/{campaign['id']}/events"
        probes += [Probe(events, 200, own), Probe(events, 404, other)]
        probes.append(
            Probe(f"{events}?filter[type]=click,open&filter[with_captcha]=false", 200, own)
        )
        probes.append(Probe(f"{events}?page=2&per_page=5", 200, own))
    for person in sample()["employees"][::9]:
        own, other = person["company_id"], 3 - person["company_id"]
        events = f"{API}/victimsapi/{person['id']}/events"
        probes += [Probe(events, 200, own), Probe(f"{events}?per_page=3", 200, own)]
        probes.append(Probe(events, 404, other))
    inscriptions = f"{API}/course-inscriptions"
    department = quote(sample()["employees"][0]["department"])
    probes += [
        Probe(f"{inscriptions}?per_page=50&page=2", 200, 2),
        Probe(f"{inscriptions}?filter[department]={department}&per_page=20", 200),
        Probe(f"{inscriptions}?filter[from_inscription_date]=2025-03-01", 200),
        Probe(f"{inscriptions}?filter[type]=open", 400),
        Probe(f"{API}/campaigns/1/events?filter[type]=bogus", 400),
        Probe(f"{API}/campaigns/1/events?per_page=501", 400),
        Probe(f"{API}/victimsapi/abc/events", 400),
        Probe(f"{API}/campaigns/999999/events", 404),
        Probe(f"{API}/nowhere", 404),
        Probe(inscriptions, 401, None),
    ]
    return probes


async def with_revalidations(session: aiohttp.ClientSession, probes: list[Probe]) -> list[Probe]:
    """Add an If-None-Match twin (304) for every 200 probe, with its current ETag."""
    twins = []
    for probe in probes:
        if probe.expected == 200:
            async with session.get(probe.path, headers=probe.headers()) as resp:
                assert resp.status == 200, probe
                twins.append(Probe(probe.path, 304, probe.company, resp.headers["ETag"]))
    return probes + twins


def rss_kib(pid: int) -> int:
    """The process's resident set size, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@dataclass
class Tally:
    """What the soak saw: statuses, wrong statuses, client-side failures."""

    statuses: Counter[int] = field(default_factory=Counter)
    wrong: Counter[tuple[str, int]] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    per_worker: Counter[int] = field(default_factory=Counter)


async def soak_worker(
    session: aiohttp.ClientSession, probes: list[Probe], deadline: float, index: int, tally: Tally
) -> None:
    """Send the mix round-robin from a different start until the deadline."""
    for step in range(10_000_000):
        if time.monotonic() >= deadline:
            return
        probe = probes[(index * 7 + step) % len(probes)]
        try:
            async with session.get(probe.path, headers=probe.headers()) as resp:
                await resp.read()
                status = resp.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            tally.failures[type(exc).__name__] += 1
            continue
        tally.statuses[status] += 1
        tally.per_worker[index] += 1
        if status != probe.expected:
            tally.wrong[probe.path, status] += 1


@pytest.fixture
def server(sample_db: Path, launcher: Launcher) -> AppProcess:
    """The app over the sample, rate limits raised (stopped by PID in teardown)."""
    return launcher.serve(sample_db, *UNLIMITED)


async def test_soak(server: AppProcess, record_property: Callable[[str, object], None]) -> None:
    tally = Tally()
    connector = aiohttp.TCPConnector(limit=CONNECTIONS)
    timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
    async with aiohttp.ClientSession(server.base, connector=connector, timeout=timeout) as session:
        probes = await with_revalidations(session, request_mix())
        start = time.monotonic()
        workers = [
            asyncio.create_task(soak_worker(session, probes, start + SOAK_SECONDS, i, tally))
            for i in range(CONNECTIONS)
        ]
        await asyncio.sleep(WARMUP_SECONDS)
        warm = rss_kib(server.proc.pid)
        await asyncio.gather(*workers)
        end = rss_kib(server.proc.pid)
    total = sum(tally.statuses.values())
    record_property("soak_requests", total)
    print(f"soak: {total} requests, statuses {dict(tally.statuses)}, RSS {warm} -> {end} KiB")
    assert not tally.failures, tally.failures
    assert not [s for s in tally.statuses if s >= 500], tally.statuses
    assert not tally.wrong, tally.wrong
    assert len(tally.per_worker) == CONNECTIONS
    assert {200, 304, 400, 401, 404} <= set(tally.statuses)
    assert end <= warm + RSS_SLACK_KIB, f"RSS grew from {warm} to {end} KiB"
    assert server.proc.poll() is None


def socket_count(pid: int) -> int:
    """How many sockets the process holds open."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # closed while we looked
            count += os.readlink(fd).startswith("socket:")
    return count


async def held_sockets(pid: int, at_least: int) -> int:
    """Wait (bounded) until the server process holds that many sockets: it accepted them."""
    deadline = time.monotonic() + GUARD_SECONDS
    while True:
        count = socket_count(pid)
        if count >= at_least or time.monotonic() > deadline:
            assert count >= at_least, count
            return count
        await asyncio.sleep(0.05)


async def test_idle_and_stalled_connections_do_not_block(server: AppProcess) -> None:
    address = urlsplit(server.base)
    opened = []
    try:
        for i in range(IDLE_CONNECTIONS + 5):
            _, writer = await asyncio.open_connection(address.hostname, address.port)
            if i >= IDLE_CONNECTIONS:  # half a request line, then nothing
                writer.write(f"GET {API}/campaigns/1/ev".encode())
                await writer.drain()
            opened.append(writer)
        await held_sockets(server.proc.pid, IDLE_CONNECTIONS)
        timeout = aiohttp.ClientTimeout(total=GUARD_SECONDS)
        async with aiohttp.ClientSession(server.base, timeout=timeout) as session:

            async def one(probe: Probe) -> int:
                async with session.get(probe.path, headers=probe.headers()) as resp:
                    await resp.read()
                    return resp.status

            probes = request_mix()
            statuses = await asyncio.gather(*(one(p) for p in probes))
        assert statuses == [p.expected for p in probes]
        assert fetch(f"{server.base}/readyz")[0] == 200
    finally:
        for writer in opened:
            writer.close()
    assert server.proc.poll() is None


def test_key_guessing_meets_429_and_never_200(sample_db: Path, launcher: Launcher) -> None:
    running = launcher.serve(sample_db)  # default limit on failed authentications
    statuses = []
    for attempt in range(300):
        # The real key, guessed while the address is blocked, must not be confirmed.
        key = KEY_1 if attempt == 150 else "rk_" + secrets.token_urlsafe(32)
        url = f"{running.base}{API}/campaigns/1/events"
        statuses.append(fetch(url, {"X-API-KEY": key})[0])
    assert statuses[:10] == [401] * 10
    assert statuses[10] == 429
    assert statuses[150] == 429
    assert set(statuses) <= {401, 429}
