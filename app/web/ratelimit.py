"""Rate limiting (contract.md section 6): token buckets and their registry, per key and per
client address (:mod:`app.web.clients` says who the client is)."""

from __future__ import annotations

import functools
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import NamedTuple, Protocol

from aiohttp import hdrs, web
from multidict import istr

from ..config import Config
from ..data.api_keys import ActiveKey
from ..keys import LIMITS, RATE_DECISION
from .errors import TooManyRequests

EPSILON = 1e-9  # tokens; absorbs float drift, so 0.1 s at 10/s refills one whole token
SWEEP_SECONDS = 5.0  # idle buckets are swept at most this often (clock time)
# The headers' names as istr, which the case-insensitive headers take without folding.
LIMIT, REMAINING = istr("RateLimit-Limit"), istr("RateLimit-Remaining")
RESET, POLICY, RATELIMIT = istr("RateLimit-Reset"), istr("RateLimit-Policy"), istr("RateLimit")


def _ceil(seconds: float) -> int:
    """Round up to whole seconds without float drift turning 2.0000000001 into 3."""
    return max(0, math.ceil(seconds - EPSILON))


class TokenBucket:
    """A token bucket fed the time by its caller, so it is pure and testable without a clock."""

    __slots__ = ("_stamp", "_tokens", "capacity", "per_second")

    def __init__(self, capacity: float, per_second: float, now: float) -> None:
        if capacity < 1 or per_second <= 0:
            raise ValueError("a token bucket needs capacity >= 1 and per_second > 0")
        self.capacity = capacity
        self.per_second = per_second
        self._tokens = capacity
        self._stamp = now

    def level(self, now: float) -> float:
        """Tokens held at `now`, refilled since the last take and capped at capacity."""
        elapsed = max(0.0, now - self._stamp)
        return min(self.capacity, self._tokens + elapsed * self.per_second)

    def take(self, now: float) -> bool:
        """Spend one token if there is one, so a request is allowed; False means refuse it."""
        level = self.level(now)
        allowed = level + EPSILON >= 1
        self._tokens = max(0.0, level - 1) if allowed else level
        self._stamp = max(now, self._stamp)
        return allowed

    def remaining(self, now: float) -> int:
        """Whole tokens left, as advertised in RateLimit-Remaining."""
        return math.floor(self.level(now) + EPSILON)

    def seconds_until_full(self, now: float) -> float:
        """Time until the bucket is full again, the basis of RateLimit-Reset."""
        return max(0.0, (self.capacity - self.level(now)) / self.per_second)

    def seconds_until_token(self, now: float) -> float:
        """Time until one token is available (0 if one is), the basis of Retry-After."""
        level = self.level(now)
        return 0.0 if level + EPSILON >= 1 else (1 - level) / self.per_second

    def is_full(self, now: float) -> bool:
        """A full bucket is the same as no bucket, so the registry may drop it."""
        return self.level(now) + EPSILON >= self.capacity


class Decision(NamedTuple):
    """The outcome of one rate-limit check and the state to advertise in headers.

    A named tuple: one is made for every request, and a tuple is the cheapest record.
    """

    allowed: bool
    limit: int
    remaining: int
    reset: int
    retry_after: int
    window: int

    def headers(self) -> dict[str, str]:
        """The RateLimit-* headers of contract.md section 6, plus Retry-After on refusal."""
        remaining, reset = str(self.remaining), str(self.reset)
        headers: dict[str, str] = {
            LIMIT: str(self.limit),
            REMAINING: remaining,
            RESET: reset,
            POLICY: _policy(self.limit, self.window),
            RATELIMIT: f'"default";r={remaining};t={reset}',
        }
        if not self.allowed:
            headers[hdrs.RETRY_AFTER] = str(self.retry_after)
        return headers


@functools.lru_cache(maxsize=64)  # one limit and window per limiter
def _policy(limit: int, window: int) -> str:
    return f'"default";q={limit};w={window}'


@functools.lru_cache(maxsize=64)  # one capacity and rate per limiter
def _limit_and_window(capacity: float, per_second: float) -> tuple[int, int]:
    """What a limiter advertises whatever its buckets hold: the burst, and the seconds an
    empty bucket takes to fill."""
    return math.floor(capacity), max(1, _ceil(capacity / per_second))


def decide(allowed: bool, level: float, capacity: float, per_second: float) -> Decision:
    """The whole-second header values of a bucket holding `level` tokens (both limiters)."""
    limit, window = _limit_and_window(capacity, per_second)
    return Decision(
        allowed,
        limit,
        math.floor(level + EPSILON),
        _ceil(max(0.0, capacity - level) / per_second),
        0 if allowed else max(1, _ceil(max(0.0, 1 - level) / per_second)),
        window,
    )


class RateLimiter:
    """Buckets per key (API-key id or client address) with bounded memory."""

    def __init__(
        self,
        capacity: float,
        per_second: float,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 100_000,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        TokenBucket(capacity, per_second, 0.0)  # validates the parameters early
        self.capacity = capacity
        self.per_second = per_second
        self.max_entries = max_entries
        self.window = max(1, _ceil(capacity / per_second))
        self._clock = clock
        self._buckets: OrderedDict[Hashable, TokenBucket] = OrderedDict()
        self._next_sweep = clock() + SWEEP_SECONDS

    def __len__(self) -> int:
        """Number of buckets held, so tests and metrics can see memory stays bounded."""
        return len(self._buckets)

    def hit(self, key: Hashable) -> Decision:
        """Spend a token for `key` and say whether the request may proceed."""
        now = self._clock()
        if now >= self._next_sweep:  # amortised: at most every SWEEP_SECONDS
            self._sweep(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            self._make_room(now)
            bucket = self._buckets[key] = TokenBucket(self.capacity, self.per_second, now)
        else:
            self._buckets.move_to_end(key)
        return self._decide(bucket, now, bucket.take(now))

    def peek(self, key: Hashable) -> Decision:
        """Report the state for `key` without spending a token or creating state (it may sweep)."""
        now = self._clock()
        if now >= self._next_sweep:  # amortised: at most every SWEEP_SECONDS
            self._sweep(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = TokenBucket(self.capacity, self.per_second, now)
        return self._decide(bucket, now, bucket.remaining(now) >= 1)

    def refusal(self, key: Hashable) -> Decision | None:
        """The refusal `key` would meet now, or None; cheap when `key` has no bucket."""
        if key not in self._buckets:
            return None
        decision = self.peek(key)
        return None if decision.allowed else decision

    def _decide(self, bucket: TokenBucket, now: float, allowed: bool) -> Decision:
        """Turn a bucket's state into the whole-second values the headers carry."""
        return decide(allowed, bucket.level(now), self.capacity, self.per_second)

    def _sweep(self, now: float) -> None:
        """Drop full buckets from the least recently touched end until one is not full."""
        self._next_sweep = now + SWEEP_SECONDS
        buckets = self._buckets
        while buckets:
            key = next(iter(buckets))
            if not buckets[key].is_full(now):
                break
            del buckets[key]

    def _make_room(self, now: float) -> None:
        """Before adding a bucket at the limit, sweep, then evict the least recently touched."""
        if len(self._buckets) < self.max_entries:
            return
        self._sweep(now)
        while len(self._buckets) >= self.max_entries:
            self._buckets.popitem(last=False)


class Verdict(NamedTuple):
    """What the limits say of one request; both None while they fail open."""

    gate: Decision | None = None  # the address is refused for its failed authentications
    bucket: Decision | None = None  # the caller's key bucket after this request's token


class Limits(Protocol):
    """The per-key buckets and the per-address failure gate (contract.md 6 and 15).

    Asked once per request, so that a shared store answers in one round trip: each call
    looks at the address's gate first and spends a token only while the gate is open.
    """

    async def admit(self, address: str, key_id: int) -> Verdict:
        """An authenticated request: the gate's refusal, else spend a token of the key."""
        ...

    async def fail(self, address: str) -> Verdict:
        """A failed authentication: the gate's refusal, else spend one of the address's."""
        ...

    async def gate(self, address: str) -> Verdict:
        """The gate's refusal, spending nothing (a request refused before its key is read)."""
        ...

    async def state(self) -> str:
        """``ok``, or ``degraded`` while the limits cannot be enforced (served unlimited)."""
        ...


class MemoryLimits:
    """The limits of one process, in its own memory: the default for a single worker."""

    def __init__(self, config: Config, clock: Callable[[], float] = time.monotonic) -> None:
        per_minute = config.auth_failures_per_minute
        self.keys = RateLimiter(config.rate_burst, config.rate_per_second, clock)
        self.failures = RateLimiter(per_minute, per_minute / 60.0, clock)

    async def admit(self, address: str, key_id: int) -> Verdict:
        gate = self.failures.refusal(address)
        return Verdict(gate=gate) if gate else Verdict(bucket=self.keys.hit(key_id))

    async def fail(self, address: str) -> Verdict:
        gate = self.failures.refusal(address)
        if gate is None:
            self.failures.hit(address)
        return Verdict(gate=gate)

    async def gate(self, address: str) -> Verdict:
        return Verdict(gate=self.failures.refusal(address))

    async def state(self) -> str:
        return "ok"


def setup_ratelimit(app: web.Application, config: Config) -> None:
    """Keep the limits in this process (a shared store is set up by ``setup_shared_limits``)."""
    app[LIMITS] = MemoryLimits(config)


async def check_limits(request: web.Request, address: str, caller: ActiveKey | None) -> None:
    """Ask the limits once for this request: 429 when refused, else its state for the headers.

    Called by the authentication middleware once the key is resolved, so that a failed
    authentication spends a token of the address and a good one a token of its key.
    """
    limits = request.app[LIMITS]
    if caller is None:
        verdict = await limits.fail(address)
    else:
        verdict = await limits.admit(address, caller.key_id)
    refuse_if_gated(verdict)
    if verdict.bucket is not None:
        request[RATE_DECISION] = verdict.bucket
        if not verdict.bucket.allowed:
            raise TooManyRequests("The rate limit of this API key is exhausted.")


async def check_gate(request: web.Request, address: str) -> None:
    """429 while the address's gate is shut; spends nothing (a request refused anyway)."""
    refuse_if_gated(await request.app[LIMITS].gate(address))


def refuse_if_gated(verdict: Verdict) -> None:
    """The gate's 429, whatever the key, so a guess is never confirmed while it is shut."""
    if verdict.gate is not None:
        raise TooManyRequests(
            "Too many failed authentications from this address.",
            headers={"Retry-After": str(verdict.gate.retry_after)},
        )


def add_ratelimit_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every response to an authenticated request carries its rate-limit state."""
    decision = request.get(RATE_DECISION)
    if decision is not None:
        response.headers.update(decision.headers())
