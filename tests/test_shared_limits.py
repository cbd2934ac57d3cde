"""Rate limits shared through Redis: the in-process numbers, and failing open (contract.md 6, 15).

Pins: the Redis limits give the very decisions of the in-process ones for the same
requests (so the same RateLimit-* and Retry-After values), refilling on Redis's clock;
their state is namespaced under ``reporting:rl:`` and expires once a bucket is full;
while Redis does not answer (nothing listening, a peer that never replies, a frozen
redis-server) requests are served unlimited without rate-limit headers, and after the
first timeout none of them waits on Redis; ``/readyz`` says ``degraded`` while its
status stays the database's, a warning comes at most once a minute, and the limits are
enforced again by themselves once a background probe hears Redis.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import redis

from app.config import Config
from app.web.ratelimit import Limits, MemoryLimits, Verdict
from app.web.sharedlimit import (
    PREFIX,
    RETRY_SECONDS,
    WARN_SECONDS,
    SharedLimits,
    connect,
    refusal_at_start,
)

from .support.clients import MakeClient
from .support.clock import FakeClock
from .support.factories import API, KEY_1, get
from .support.servers import (
    GUARD_SECONDS,
    Launcher,
    RedisServer,
    free_port,
    require_redis_server,
)

pytestmark = pytest.mark.system  # a real redis-server (or a port where none listens)

MakeLimits = Callable[..., Limits]
OWN = f"{API}/campaigns/1/events"
HERE, THERE = "192.0.2.1", "192.0.2.9"
PROBE = 0.05  # seconds between the probe's pings in these tests
GUARD = 30.0  # seconds; only so that a broken probe cannot hang the suite
T = TypeVar("T")


def settings(url: str, **overrides: float) -> Config:
    """Small limits that do not refill during a test unless it says so."""
    values = {"rate_burst": 20, "rate_per_second": 0.001, "auth_failures_per_minute": 10}
    return Config(redis_url=url, **{**values, **overrides})  # type: ignore[arg-type]


@pytest.fixture
async def make_limits(redis_url: str) -> AsyncIterator[MakeLimits]:
    """Build both kinds of limits over the same settings; Redis clients closed after."""
    clients: list[redis.asyncio.Redis] = []

    def make(kind: str, **overrides: float) -> Limits:
        config = settings(redis_url, **overrides)
        if kind == "memory":
            return MemoryLimits(config)
        clients.append(connect(redis_url))
        return SharedLimits(clients[-1], config)

    yield make
    for client in clients:
        await client.aclose()


async def scenario(limits: Limits) -> list[Verdict]:
    """One key past its burst, a second key, an address past its failures, then both."""
    verdicts = [await limits.admit(HERE, 1) for _ in range(25)]
    verdicts += [await limits.admit(HERE, 2) for _ in range(3)]
    verdicts += [await limits.fail(THERE) for _ in range(12)]
    verdicts.append(await limits.admit(THERE, 3))  # gated, however good the key
    verdicts.append(await limits.admit(HERE, 3))  # another address is not
    verdicts += [await limits.gate(THERE), await limits.gate(HERE)]  # looking spends nothing
    return verdicts


async def test_redis_gives_the_in_process_decisions(make_limits: MakeLimits) -> None:
    memory = await scenario(make_limits("memory"))
    shared = await scenario(make_limits("redis"))
    assert shared == memory
    # ...and those are the contract's numbers, not merely equal to each other.
    keyed = [v.bucket for v in memory[:25]]
    assert all(d is not None for d in keyed)
    assert [d.allowed for d in keyed if d] == [True] * 20 + [False] * 5
    assert [d.remaining for d in keyed if d] == [*range(19, -1, -1), 0, 0, 0, 0, 0]
    assert {d.retry_after for d in keyed[20:] if d} == {1000}  # 1 token at 0.001/s
    assert [v.bucket.remaining for v in memory[25:28] if v.bucket] == [19, 18, 17]
    failures = memory[28:40]
    assert failures[:10] == [Verdict()] * 10
    assert all(v.gate is not None and v.gate.retry_after == 6 for v in failures[10:])
    assert memory[40].gate is not None and memory[40].bucket is None
    assert memory[41].gate is None and memory[41].bucket is not None
    assert memory[42].gate == memory[40].gate and memory[43] == Verdict()


@pytest.mark.parametrize("per_second", [1.5, 6.0])
async def test_one_batch_of_requests_gets_the_whole_burst(
    make_limits: MakeLimits, per_second: float
) -> None:
    """Requests of one event-loop turn share one script call, so one instant on Redis's
    clock: a token of a fractional number of microseconds (1.5/s: 666,666.67) was stored
    rounded to the nearest, half a microsecond too long a token, and by the fourth the
    header said 15 left instead of 16; the last token of the burst was refused."""
    memory = make_limits("memory", rate_per_second=per_second)
    shared = make_limits("redis", rate_per_second=per_second)
    expected = [await memory.admit(HERE, 1) for _ in range(22)]
    together = await asyncio.gather(*(shared.admit(HERE, 1) for _ in range(22)))
    assert [v.bucket.remaining for v in together if v.bucket] == [*range(19, -1, -1), 0, 0]
    assert [v.bucket.allowed for v in together if v.bucket] == [True] * 20 + [False] * 2
    assert [v.bucket.remaining for v in expected if v.bucket] == [*range(19, -1, -1), 0, 0]
    gate = make_limits("redis", auth_failures_per_minute=9)  # a token of 6,666,666.67 us
    failures = await asyncio.gather(*(gate.fail(THERE) for _ in range(10)))
    assert [v.gate is None for v in failures] == [True] * 9 + [False]


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_tokens_come_back_at_the_refill_rate(make_limits: MakeLimits, kind: str) -> None:
    limits = make_limits(kind, rate_burst=2, rate_per_second=20)
    spent = [(await limits.admit(HERE, 1)).bucket for _ in range(3)]
    assert [d.allowed for d in spent if d] == [True, True, False]
    assert spent[2] is not None and spent[2].retry_after == 1
    await asyncio.sleep(0.06)  # more than one token's 50 ms
    again = (await limits.admit(HERE, 1)).bucket
    assert again is not None and again.allowed


async def test_state_is_namespaced_and_expires_when_full(
    make_limits: MakeLimits, redis_url: str
) -> None:
    limits = make_limits("redis", rate_burst=3, rate_per_second=10)
    await limits.admit(HERE, 7)
    await limits.fail(THERE)
    with redis.Redis.from_url(redis_url) as store:
        assert sorted(store.keys()) == [f"{PREFIX}auth:{THERE}".encode(), f"{PREFIX}key:7".encode()]
        assert 0 < store.pttl(f"{PREFIX}key:7") <= 100  # full again after one token's 0.1 s
        assert 0 < store.pttl(f"{PREFIX}auth:{THERE}") <= 6000  # 10 a minute
        await asyncio.sleep(0.15)
        assert store.keys() == [f"{PREFIX}auth:{THERE}".encode()]


async def test_an_instant_set_on_a_clock_ahead_waits_no_longer_than_an_empty_bucket(
    make_limits: MakeLimits, redis_url: str
) -> None:
    """Redis's clock stepped back an hour (or a failover to a host whose clock lags) left
    the key and the gate refused for that hour, while Retry-After said 1."""
    limits = make_limits("redis", rate_burst=2, rate_per_second=20, auth_failures_per_minute=1200)
    with redis.Redis.from_url(redis_url) as store:
        seconds, micros = store.time()
        hour_ahead = (seconds + 3600) * 1_000_000 + micros
        store.set(f"{PREFIX}key:1", hour_ahead, px=3_600_000)
        store.set(f"{PREFIX}auth:{THERE}", hour_ahead, px=3_600_000)
    refused, gated = await limits.admit(HERE, 1), await limits.admit(THERE, 2)
    assert refused.bucket is not None and not refused.bucket.allowed
    assert gated.gate is not None and gated.gate.retry_after == 1
    await asyncio.sleep(0.06)  # more than one token's 50 ms, of the key and of the gate
    again, opened = await limits.admit(HERE, 1), await limits.admit(THERE, 2)
    assert again.bucket is not None and again.bucket.allowed
    assert opened.bucket is not None and opened.bucket.allowed


@pytest.mark.parametrize("together", [1, 8], ids=["alone", "pipelined"])
async def test_script_loaded_again_when_redis_forgot_it(
    make_limits: MakeLimits, redis_url: str, together: int
) -> None:
    limits = make_limits("redis", rate_burst=20)
    assert (await limits.admit(HERE, 1)).bucket is not None
    with redis.Redis.from_url(redis_url) as store:
        store.script_flush()  # as after a restart
    verdicts = await asyncio.gather(*(limits.admit(HERE, 1) for _ in range(together)))
    assert sorted(v.bucket.remaining for v in verdicts if v.bucket) == list(
        range(19 - together, 19)
    )


async def test_fails_open_while_nothing_listens_then_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_redis_server()
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    clock = FakeClock()
    client = connect(url)
    limits = SharedLimits(client, settings(url, rate_burst=3), clock=clock, probe_seconds=PROBE)
    caplog.set_level(logging.INFO, logger="app.ratelimit")

    def warnings() -> int:
        return sum("not enforced" in r.getMessage() for r in caplog.records)

    try:
        for _ in range(3):  # every request is served, past the burst and the failures
            assert await limits.admit(HERE, 1) == Verdict()
            assert await limits.fail(HERE) == Verdict()
        assert await limits.state() == "degraded"
        assert warnings() == 1  # at most once a minute, however many requests
        clock.advance(WARN_SECONDS)
        await until(lambda: warnings() == 2)  # the probe still finds nothing
        server = RedisServer(tmp_path, port).start()
        try:
            await until(lambda: "enforced again" in caplog.text)  # the probe heard it
            back = await limits.admit(HERE, 1)
            assert back.bucket is not None and back.bucket.remaining == 2
            assert await limits.state() == "ok"
        finally:
            server.stop()
    finally:
        await limits.close()
        await client.aclose()


async def test_a_restarted_redis_is_used_at_once_by_connections_it_broke(tmp_path: Path) -> None:
    """A restart breaks every pooled connection; each is opened again when next used,
    never taken for an outage that would serve its request unlimited."""
    require_redis_server()
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = RedisServer(tmp_path, port).start()
    client = connect(url)
    limits = SharedLimits(client, settings(url, rate_burst=20), probe_seconds=PROBE)
    try:
        await asyncio.gather(*(client.ping() for _ in range(8)))  # eight at once: a pool of 8
        assert len(await client.client_list()) >= 8
        server.stop()
        server.start()  # empty: every bucket full again
        verdicts = [await limits.admit(HERE, 1) for _ in range(25)]
        assert [v.bucket is not None and v.bucket.allowed for v in verdicts] == [True] * 20 + [
            False
        ] * 5
        assert await limits.state() == "ok"
    finally:
        await limits.close()
        await client.aclose()
        server.stop()


async def test_a_redis_that_refuses_writes_is_not_one_that_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that answers but refuses to write (here a full memory; a read-only replica
    likewise) cannot keep a limit: requests are served unlimited, /readyz says degraded,
    and the limits hold again only once it takes writes."""
    require_redis_server()
    port = free_port()
    server = RedisServer(tmp_path, port).start()
    url = f"redis://127.0.0.1:{port}/0"
    client = connect(url)
    limits = SharedLimits(client, settings(url, rate_burst=3), probe_seconds=PROBE)
    caplog.set_level(logging.INFO, logger="app.ratelimit")
    admin = redis.Redis(host="127.0.0.1", port=port)
    try:
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")  # every write is refused
        for _ in range(5):  # past the burst: nothing is enforced
            assert await limits.admit(HERE, 1) == Verdict()
        for _ in range(10):  # the probe asks again and again, and is refused
            await asyncio.sleep(PROBE)
            assert await limits.state() == "degraded"
        assert "enforced again" not in caplog.text
        admin.config_set("maxmemory", "0")
        await until(lambda: "enforced again" in caplog.text)
        assert (await limits.admit(HERE, 1)).bucket is not None
        assert await limits.state() == "ok"
    finally:
        admin.close()
        await limits.close()
        await client.aclose()
        server.stop()


async def until(condition: Callable[[], bool]) -> None:
    """Let the loop run (the probe) until ``condition`` holds; a guard against hanging only."""
    for _ in range(int(GUARD / PROBE)):
        if condition():
            return
        await asyncio.sleep(PROBE)
    raise AssertionError("never happened")


def at_once(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end without letting it wait: it must not await any I/O."""
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise AssertionError("it waited (on Redis)")


@contextmanager
def frozen(server: RedisServer) -> Iterator[None]:
    """Redis stopped by SIGSTOP for the block (its process hangs, its port accepts)."""
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


async def test_a_frozen_redis_is_waited_for_once_then_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After the first timeout no request waits on a hung Redis; the probe brings it back."""
    require_redis_server()
    server = RedisServer(tmp_path).start()
    clock = FakeClock()
    client = connect(server.url)
    limits = SharedLimits(client, settings(server.url), clock=clock, probe_seconds=PROBE)
    try:
        assert (await limits.admit(HERE, 1)).bucket is not None
        with frozen(server):
            assert await limits.admit(HERE, 1) == Verdict()  # the one wait: its timeout
            for _ in range(20):
                clock.advance(RETRY_SECONDS)  # however long the outage lasts
                assert at_once(limits.admit(HERE, 1)) == Verdict()
                assert at_once(limits.fail(THERE)) == Verdict()
                assert at_once(limits.state()) == "degraded"
        await until(lambda: "enforced again" in caplog.text)  # the probe heard it
        assert await limits.state() == "ok"
        back = await limits.admit(HERE, 1)
        assert back.bucket is not None  # counted in Redis again, which ran the timed-out
        assert back.bucket.remaining in (17, 18)  # script on waking, perhaps, but no other
    finally:
        await limits.close()
        await client.aclose()
        server.stop()


async def test_the_app_serves_at_once_while_redis_is_frozen(
    make_client: MakeClient, tmp_path: Path
) -> None:
    require_redis_server()
    server = RedisServer(tmp_path).start()
    try:
        client = await make_client(redis_url=server.url, rate_burst=3, rate_per_second=0.001)
        assert "RateLimit" in (await get(client, OWN)).headers
        with frozen(server):
            answers = [await get(client, OWN) for _ in range(10)]  # past the burst
            assert [a.status for a in answers] == [200] * 10
            ready = await client.get("/readyz")
            assert await ready.json() == {"status": "ready", "rate_limit": "degraded"}
        for _ in range(int(GUARD / PROBE)):  # until the probe has heard Redis again
            if (await (await client.get("/readyz")).json())["rate_limit"] == "ok":
                break
            await asyncio.sleep(PROBE)
        statuses = [(await get(client, OWN)).status for _ in range(3)]
        assert statuses[0] == 200 and statuses[-1] == 429  # the burst, counted in Redis again
    finally:
        server.stop()


async def test_fails_open_when_redis_never_answers(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as listener:  # accepts connections (the backlog), never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        url = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
        client = connect(url)
        limits = SharedLimits(client, settings(url, rate_burst=1))
        try:
            for _ in range(3):
                assert await limits.admit(HERE, 1) == Verdict()
            assert await limits.state() == "degraded"
        finally:
            await client.aclose()
    assert "does not answer (TimeoutError)" in caplog.text


async def test_app_serves_unlimited_while_redis_is_silent(make_client: MakeClient) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"
    client = await make_client(redis_url=dead, rate_burst=2, auth_failures_per_minute=2)
    answers = [await get(client, OWN) for _ in range(5)]
    assert [a.status for a in answers] == [200] * 5
    assert not [h for a in answers for h in a.headers if h.lower().startswith("ratelimit")]
    guesses = [await get(client, OWN, key="rk_wrong_" + "x" * 40) for _ in range(5)]
    assert [g.status for g in guesses] == [401] * 5
    ready = await client.get("/readyz")
    assert ready.status == 200  # the status stays about the database
    assert await ready.json() == {"status": "ready", "rate_limit": "degraded"}


@pytest.mark.parametrize("shared", [False, True], ids=["memory", "redis"])
async def test_readyz_says_the_limits_are_enforced(
    make_client: MakeClient, request: pytest.FixtureRequest, shared: bool
) -> None:
    url = str(request.getfixturevalue("redis_url")) if shared else ""
    client = await make_client(redis_url=url)
    ready = await client.get("/readyz")
    assert ready.status == 200
    assert await ready.json() == {"status": "ready", "rate_limit": "ok"}
    assert (await get(client, OWN, key=KEY_1)).status == 200


async def test_the_redis_password_never_reaches_the_log(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    url = f"redis://:s3cret-pass@127.0.0.1:{port}/3"
    client = connect(url)
    try:
        assert await SharedLimits(client, settings(url)).admit(HERE, 1) == Verdict()
    finally:
        await client.aclose()
    assert f"redis://127.0.0.1:{port}/3 does not answer" in caplog.text
    assert "s3cret" not in caplog.text


@pytest.mark.system
@pytest.mark.parametrize(
    ("url_of", "said"),
    [
        (lambda url: url.removesuffix("/0") + "/99", "has no such database"),
        (lambda url: url.replace("redis://", "redis://nobody:wrong@"), "refuses these credentials"),
    ],
    ids=["database-99", "unknown-user"],
)
def test_a_redis_that_refuses_the_settings_stops_the_start(
    redis_url: str, sample_db: Path, launcher: Launcher, url_of: Callable[[str], str], said: str
) -> None:
    """Such a Redis would never take a limit: serving would be unlimited for good, where an
    outage (nothing listening yet) only fails open until Redis answers."""
    app = launcher.start(sample_db, "--redis-url", url_of(redis_url))
    assert app.proc.wait(timeout=GUARD_SECONDS) == 2
    out, err = app.output_text()
    [line] = err.strip().splitlines()
    assert line.startswith("error: Redis at redis://127.0.0.1:") and said in line, line
    assert "wrong" not in line and "Serving" not in out


@pytest.mark.system
def test_a_redis_user_that_may_not_run_the_script_stops_the_start(
    redis_url: str, sample_db: Path, launcher: Launcher
) -> None:
    """``+@read +@write`` may SET the probe key but not load or run the limits' script:
    such a server started, then served every request unlimited for good."""
    with redis.Redis.from_url(redis_url) as store:
        store.acl_setuser("writer", enabled=True, passwords=["+pw"], keys=["*"],
                          commands=["+@read", "+@write"])  # fmt: skip
    try:
        app = launcher.start(
            sample_db, "--redis-url", redis_url.replace("redis://", "redis://writer:pw@")
        )
        assert app.proc.wait(timeout=GUARD_SECONDS) == 2
        out, err = app.output_text()
        [line] = err.strip().splitlines()
        assert line.startswith("error: Redis at redis://127.0.0.1:"), line
        assert "refuses these credentials" in line and "script" in line, line
        assert "Serving" not in out
    finally:
        with redis.Redis.from_url(redis_url) as store:
            store.acl_deluser("writer")


@pytest.mark.system
def test_a_redis_not_answering_yet_lets_the_server_start(
    sample_db: Path, launcher: Launcher
) -> None:
    require_redis_server()
    app = launcher.serve(sample_db, "--redis-url", f"redis://127.0.0.1:{free_port()}/0")
    assert app.proc.poll() is None


WITHOUT_SCRIPTING = ("--rename-command", "EVALSHA", "")  # a hardening some operators apply


async def test_a_redis_without_scripting_stops_the_start(tmp_path: Path) -> None:
    """It takes the probe key's write but can never run a limit: served unlimited for good."""
    require_redis_server()
    server = RedisServer(tmp_path, options=WITHOUT_SCRIPTING).start()
    try:
        line = await refusal_at_start(server.url)
    finally:
        server.stop()
    assert line is not None and "lacks a command the limits need" in line, line


async def test_a_redis_that_takes_writes_but_not_the_script_is_not_usable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe and /readyz ask for the script too: a write alone said the limits held
    again (``ok``, ``enforced again``) while every request was served unlimited."""
    require_redis_server()
    server = RedisServer(tmp_path, options=WITHOUT_SCRIPTING).start()
    client = connect(server.url)
    limits = SharedLimits(client, settings(server.url), probe_seconds=PROBE)
    caplog.set_level(logging.INFO, logger="app.ratelimit")
    try:
        assert await limits.admit(HERE, 1) == Verdict()
        for _ in range(5):  # the probe asks again and again, and the script is refused
            await asyncio.sleep(2 * PROBE)
            assert await limits.state() == "degraded"
        assert "enforced again" not in caplog.text
    finally:
        await limits.close()
        await client.aclose()
        server.stop()
