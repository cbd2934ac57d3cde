"""Rate limits shared through Redis by every process and host (contract.md 6 and 15).

Each bucket is one Redis key holding its theoretical arrival time (GCRA): the instant,
on Redis's clock, at which the bucket will be full again. A missing key is a full
bucket, and every key expires when its bucket is full, so idle keys and addresses leave
nothing behind. One Lua script checks the address's failure gate and spends a token,
atomically and in one round trip; Python turns its answer into the very ``Decision``
the in-process limiter gives (``ratelimit.decide``), so both send the same headers.
The calls made during one turn of the event loop travel together in one pipeline
(``ScriptBatch``): each stays its own atomic script run, but a busy worker pays one
write and one read for many requests (redis-py has no automatic pipelining).

While Redis does not answer, requests are served unlimited (fail open): a warning at
most once a minute, ``/readyz`` says ``degraded``, and Redis is tried again every second.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, RedisError

from ..config import Config
from ..keys import CONFIG, LIMITS
from .ratelimit import EPSILON, Decision, Verdict, decide

log = logging.getLogger("app.ratelimit")

PREFIX = "reporting:rl:"
TIMEOUT_SECONDS = 0.5  # a Redis that takes longer counts as not answering
RETRY_SECONDS = 1.0  # while it does not answer, requests skip it for this long
WARN_SECONDS = 60.0  # at most one warning a minute while failing open
MICROS = 1_000_000
GATED, SPENT, EMPTY = 0, 1, 2  # the script's outcomes

# KEYS[1]: the address's failure gate; KEYS[2] (admit only): the key's bucket.
# ARGV: per bucket, in KEYS order, microseconds a token and the longest wait a spend
# may leave. Reply {outcome, microseconds until the bucket it names is full}.
SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])

local function wait_of(key)
  local tat = tonumber(redis.call('GET', key))
  if tat == nil or tat <= now then return 0 end
  return tat - now
end

local function spend(key, interval, longest)
  local wait = wait_of(key)
  if wait + interval > longest then return false, wait end
  wait = wait + interval
  redis.call('SET', key, string.format('%.0f', now + wait), 'PX', math.ceil(wait / 1000))
  return true, wait
end

local gate_interval, gate_longest = tonumber(ARGV[1]), tonumber(ARGV[2])
local gate_wait = wait_of(KEYS[1])
if gate_wait + gate_interval > gate_longest then return {0, gate_wait} end
if #KEYS == 1 then
  local _, wait = spend(KEYS[1], gate_interval, gate_longest)
  return {1, wait}
end
local spent, wait = spend(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
if spent then return {1, wait} end
return {2, wait}
"""


@dataclass(frozen=True, slots=True)
class Policy:
    """One bucket's burst and refill, in the script's terms and back."""

    capacity: float
    per_second: float

    def arguments(self) -> list[bytes]:
        """Microseconds a token, and the longest wait a spend may leave (level >= 1).

        Encoded once here, so that no request pays for turning floats into bytes.
        """
        interval = MICROS / self.per_second
        return [repr(value).encode() for value in (interval, (self.capacity + EPSILON) * interval)]

    def decision(self, allowed: bool, wait_us: int) -> Decision:
        """The decision of a bucket that is full again in ``wait_us`` microseconds."""
        level = self.capacity - wait_us / MICROS * self.per_second
        return decide(allowed, max(0.0, level), self.capacity, self.per_second)


Call = tuple[Sequence[str], Sequence[bytes], "asyncio.Future[Any]"]  # keys, args, reply


class ScriptBatch:
    """Runs the script for every call of one event-loop turn in one pipeline round trip."""

    def __init__(self, client: Redis) -> None:
        self._client = client
        self._sha = client.register_script(SCRIPT).sha.encode()
        self._calls: list[Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, keys: Sequence[str], args: Sequence[bytes]) -> Any:
        """The script's reply for these keys; raises what Redis or the connection raised."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.append((keys, args, future))
        if len(self._calls) == 1:  # the first call of this turn sends them all after it
            loop.call_soon(self._send_all)
        return await future

    def _send_all(self) -> None:
        calls, self._calls = self._calls, []
        task = asyncio.ensure_future(self._send(calls))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(self, calls: list[Call]) -> None:
        try:
            replies = await self._evalsha(calls)
            if any(isinstance(reply, NoScriptError) for reply in replies):
                await self._client.script_load(SCRIPT)  # Redis restarted: its cache is empty
                replies = await self._evalsha(calls)
        except (RedisError, OSError) as exc:
            replies = [exc] * len(calls)
        for (_, _, future), reply in zip(calls, replies, strict=True):
            if future.done():
                continue
            if isinstance(reply, BaseException):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _evalsha(self, calls: list[Call]) -> list[Any]:
        """One reply (or error) per call; a lone call goes without a pipeline (cheaper)."""
        commands = [("EVALSHA", self._sha, len(keys), *keys, *args) for keys, args, _ in calls]
        if len(commands) == 1:
            try:
                return [await self._client.execute_command(*commands[0])]
            except NoScriptError as exc:
                return [exc]
        pipe = self._client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute(raise_on_error=False))


class SharedLimits:
    """The ``Limits`` of every process that uses the same Redis."""

    def __init__(
        self, client: Redis, config: Config, clock: Callable[[], float] = time.monotonic
    ) -> None:
        per_minute = config.auth_failures_per_minute
        self.keys = Policy(config.rate_burst, config.rate_per_second)
        self.gate = Policy(per_minute, per_minute / 60.0)
        self._client = client
        self._batch = ScriptBatch(client)
        self._gate_args = self.gate.arguments()
        self._both_args = [*self._gate_args, *self.keys.arguments()]
        self._where = describe(config.redis_url)
        self._clock = clock
        self._retry_at = 0.0  # skip Redis until then (it did not answer)
        self._next_warning = 0.0
        self._warned = False  # this outage was announced, so announce its end

    async def admit(self, address: str, key_id: int) -> Verdict:
        keys = [f"{PREFIX}auth:{address}", f"{PREFIX}key:{key_id}"]
        reply = await self._run(keys, self._both_args)
        if reply is None:
            return Verdict()
        outcome, wait = reply
        if outcome == GATED:
            return Verdict(gate=self.gate.decision(False, wait))
        return Verdict(bucket=self.keys.decision(outcome == SPENT, wait))

    async def fail(self, address: str) -> Verdict:
        reply = await self._run([f"{PREFIX}auth:{address}"], self._gate_args)
        if reply is None or reply[0] != GATED:
            return Verdict()
        return Verdict(gate=self.gate.decision(False, reply[1]))

    async def state(self) -> str:
        """Ask Redis (unless it was just found silent), so /readyz tells the truth."""
        if self._clock() < self._retry_at:
            return "degraded"
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            self._silent(exc)
            return "degraded"
        self._answered()
        return "ok"

    async def _run(self, keys: Sequence[str], args: Sequence[bytes]) -> list[int] | None:
        """The script's reply, or None to fail open while Redis does not answer."""
        if self._clock() < self._retry_at:
            return None
        try:
            reply = await self._batch.run(keys, args)
        except (RedisError, OSError) as exc:
            self._silent(exc)
            return None
        if self._warned:
            self._answered()
        return [int(reply[0]), int(reply[1])]

    def _silent(self, exc: BaseException) -> None:
        """Redis did not answer: skip it for a while and say so, at most once a minute."""
        now = self._clock()
        self._retry_at = now + RETRY_SECONDS
        if now >= self._next_warning:
            self._next_warning = now + WARN_SECONDS
            self._warned = True
            log.warning(
                "rate limits not enforced: Redis at %s does not answer (%s); serving unlimited",
                self._where,
                exc.__class__.__name__,
            )

    def _answered(self) -> None:
        if self._warned:
            self._warned = False
            log.warning("rate limits enforced again: Redis at %s answers", self._where)


def describe(url: str) -> str:
    """Where Redis is, for the log: the URL without its credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or "localhost"
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


def connect(url: str) -> Redis:
    """A client that gives up quickly and never retries on its own (we fail open instead)."""
    return Redis.from_url(
        url,
        socket_timeout=TIMEOUT_SECONDS,
        socket_connect_timeout=TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
    )


async def shared_limits_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the Redis client for the app's lifetime (it connects on first use)."""
    config = app[CONFIG]
    client = connect(config.redis_url)
    app[LIMITS] = SharedLimits(client, config)
    log.info("rate limits shared through Redis at %s", describe(config.redis_url))
    try:
        yield
    finally:
        await client.aclose()


def setup_shared_limits(app: web.Application, config: Config) -> None:
    """Keep the limits in Redis, shared by every process (``config.redis_url``)."""
    app.cleanup_ctx.append(shared_limits_ctx)
