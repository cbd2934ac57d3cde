"""Rate limits shared through Redis by every process and host (contract.md 6 and 15).

The buckets live in Redis, one key each under ``reporting:rl:`` (``limitscript`` holds
the script and the batching). Python turns the script's answer into the very
``Decision`` the in-process limiter gives (``ratelimit.decide``), so both send the same
headers.

While Redis does not answer, or answers but refuses to write (a read-only replica, a
full memory), requests are served unlimited (fail open): a warning at most once a minute
and ``/readyz`` says ``degraded``. A request finds that out once, by waiting for Redis's
timeout; from then on requests do not ask Redis at all, and a background probe writes a
key of its own and runs the script every second until Redis does both (a write, as every
limit is: a ping alone would call a read-only replica usable; the script, since a Redis that
takes writes but not the script, its scripting renamed away or the user's commands changed,
enforces nothing), so a Redis that hangs costs one wait, not one a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, NoPermissionError, RedisError, ResponseError
from redis.exceptions import ConnectionError as ConnectionClosed

from ..config import Config
from ..keys import CONFIG, LIMITS
from .limitscript import ADMIT, CHECK, FAIL, GATED, PASSED, SCRIPT, ScriptBatch
from .ratelimit import EPSILON, Decision, Verdict, decide

log = logging.getLogger("app.ratelimit")

PREFIX = "reporting:rl:"
TIMEOUT_SECONDS = 1.0  # a Redis that takes longer counts as not answering (a loaded
# 2-core machine stalls a process for half a second now and then: that is no outage)
RETRY_SECONDS = 1.0  # while it does not answer, the probe pings it this often
WARN_SECONDS = 60.0  # at most one warning a minute while failing open
MICROS = 1_000_000
PROBE_KEY = f"{PREFIX}probe"  # what the probe and /readyz write to learn Redis takes writes


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


class SharedLimits:
    """The ``Limits`` of every process that uses the same Redis."""

    def __init__(
        self,
        client: Redis,
        config: Config,
        clock: Callable[[], float] = time.monotonic,
        probe_seconds: float = RETRY_SECONDS,
    ) -> None:
        per_minute = config.auth_failures_per_minute
        self.keys = Policy(config.rate_burst, config.rate_per_second)
        self.gate_policy = Policy(per_minute, per_minute / 60.0)
        self._client = client
        self._batch = ScriptBatch(client, [*self.gate_policy.arguments(), *self.keys.arguments()])
        self._where = describe(config.redis_url)
        self._clock = clock
        self._probe_seconds = probe_seconds
        self._probe: asyncio.Task[None] | None = None  # runs while Redis is skipped
        self._next_warning = 0.0
        self._warned = False  # this outage was announced, so announce its end

    async def admit(self, address: str, key_id: int) -> Verdict:
        reply = await self._run(ADMIT, f"{PREFIX}auth:{address}", f"{PREFIX}key:{key_id}")
        if reply is None:
            return Verdict()
        outcome, wait = reply
        if outcome == GATED:
            return Verdict(gate=self.gate_policy.decision(False, wait))
        return Verdict(bucket=self.keys.decision(outcome == PASSED, wait))

    async def fail(self, address: str) -> Verdict:
        return self._gated(await self._run(FAIL, f"{PREFIX}auth:{address}"))

    async def gate(self, address: str) -> Verdict:
        return self._gated(await self._run(CHECK, f"{PREFIX}auth:{address}"))

    def _gated(self, reply: tuple[int, int] | None) -> Verdict:
        if reply is None or reply[0] != GATED:
            return Verdict()
        return Verdict(gate=self.gate_policy.decision(False, reply[1]))

    async def state(self) -> str:
        """Ask Redis (unless the probe is asking), so /readyz tells the truth."""
        if self._probe is not None:
            return "degraded"
        try:
            await self._usable()
        except (RedisError, OSError) as exc:
            self._silent(exc)
            return "degraded"
        self._answered()
        return "ok"

    async def _run(self, kind: bytes, *keys: str) -> tuple[int, int] | None:
        """The script's answer, or None to fail open while Redis does not answer."""
        if self._probe is not None:
            return None
        try:
            return await self._batch.run(kind, *keys)
        except (RedisError, OSError) as exc:
            self._silent(exc)
            return None

    async def close(self) -> None:
        """Stop the probe, if one runs (the app's cleanup)."""
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
            self._probe = None

    def _silent(self, exc: BaseException) -> None:
        """Redis did not answer: skip it until the probe hears it again."""
        self._warn(exc)
        if self._probe is None:
            self._probe = asyncio.get_running_loop().create_task(self._ask_until_answered())

    async def _usable(self) -> None:
        """Raise unless Redis takes a write now and runs the script (the key lapses by itself)."""
        await self._client.set(PROBE_KEY, b"1", px=int(self._probe_seconds * 2000) + 1000)
        await self._batch.run(CHECK, PROBE_KEY)  # reads only: the probe key is a full gate

    async def _ask_until_answered(self) -> None:
        """Ask Redis every ``probe_seconds`` until it is usable, then let requests use it."""
        while True:
            await asyncio.sleep(self._probe_seconds)
            try:
                await self._usable()
            except (RedisError, OSError) as exc:
                self._warn(exc)
                continue
            self._probe = None
            self._answered()
            return

    def _warn(self, exc: BaseException) -> None:
        """Say that the limits are not enforced, at most once a minute."""
        now = self._clock()
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
    """A client that gives up quickly (we fail open instead of waiting).

    A command whose connection turns out closed is sent once more, on a new connection:
    a restart of Redis closes every pooled connection, and each would otherwise be
    taken, when next used, for an outage that serves its request unlimited. A timeout is
    never tried again (a Redis that hangs costs one wait).
    """
    return Redis.from_url(
        url,
        socket_timeout=TIMEOUT_SECONDS,
        socket_connect_timeout=TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1, supported_errors=(ConnectionClosed,)),
    )


async def refusal_at_start(url: str) -> str | None:
    """Why the Redis at ``url`` will never take the limits, in one line; None otherwise.

    Asked once, before serving: a Redis that does not answer yet is an outage (the server
    starts and fails open until it answers), but one that refuses these settings (a wrong
    user or password, a user without the commands, a database number it does not have)
    would leave every request unlimited for good.
    """
    client = connect(url)
    try:
        await client.set(PROBE_KEY, b"1", px=int(RETRY_SECONDS * 2000) + 1000)
        # Every limit is the script, loaded again after a restart of Redis: a user that may
        # SET but not SCRIPT LOAD or EVALSHA (``+@read +@write`` has neither) took every
        # request for an outage, for good. Checking the probe key writes nothing.
        await client.script_load(SCRIPT)
        await ScriptBatch(client, Policy(1, 1).arguments() * 2).run(CHECK, PROBE_KEY)
    except (AuthenticationError, NoPermissionError) as exc:
        return f"Redis at {describe(url)} refuses these credentials: {exc}"
    except ResponseError as exc:
        if "DB index" in str(exc):
            return f"Redis at {describe(url)} has no such database: {exc}"
        if "unknown command" in str(exc):  # scripting renamed away (``rename-command``)
            return f"Redis at {describe(url)} lacks a command the limits need: {exc}"
    except (RedisError, OSError):
        pass  # an outage: failing open is the documented answer to it
    finally:
        await client.aclose()
    return None


async def shared_limits_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the Redis client for the app's lifetime (it connects on first use)."""
    config = app[CONFIG]
    client = connect(config.redis_url)
    limits = SharedLimits(client, config)
    app[LIMITS] = limits
    log.info("rate limits shared through Redis at %s", describe(config.redis_url))
    try:
        yield
    finally:
        await limits.close()
        await client.aclose()


def setup_shared_limits(app: web.Application, config: Config) -> None:
    """Keep the limits in Redis, shared by every process (``config.redis_url``)."""
    app.cleanup_ctx.append(shared_limits_ctx)
