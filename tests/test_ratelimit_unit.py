"""Unit tests of the rate-limit logic pinning contract.md section 6 (Rate limiting)."""

from __future__ import annotations

import random

import pytest

from app.config import parse_networks
from app.web.clients import client_address
from app.web.ratelimit import SWEEP_SECONDS, Decision, RateLimiter, TokenBucket

from .support.clock import FakeClock


def make_limiter(
    capacity: float = 20, per_second: float = 10, max_entries: int = 100_000
) -> tuple[RateLimiter, FakeClock]:
    clock = FakeClock()
    return RateLimiter(capacity, per_second, clock=clock, max_entries=max_entries), clock


def drain(limiter: RateLimiter, key: object, times: int) -> list[Decision]:
    return [limiter.hit(key) for _ in range(times)]


def test_bucket_starts_full_and_refills_to_capacity() -> None:
    bucket = TokenBucket(3, 1, now=0.0)
    assert bucket.is_full(0.0) and bucket.remaining(0.0) == 3
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.remaining(0.0) == 0
    assert bucket.seconds_until_token(0.0) == pytest.approx(1.0)
    assert bucket.seconds_until_full(0.0) == pytest.approx(3.0)
    assert bucket.seconds_until_token(1.0) == 0.0
    assert bucket.remaining(1.5) == 1
    assert bucket.remaining(100.0) == 3 and bucket.is_full(100.0)


@pytest.mark.parametrize(("capacity", "per_second"), [(0, 1), (0.5, 1), (1, 0), (1, -1)])
def test_bucket_rejects_useless_parameters(capacity: float, per_second: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(capacity, per_second, now=0.0)


def test_burst_then_refusal() -> None:
    limiter, _ = make_limiter()
    decisions = drain(limiter, "k", 21)
    assert all(d.allowed for d in decisions[:20])
    assert [d.remaining for d in decisions[:3]] == [19, 18, 17]
    assert not decisions[20].allowed
    assert decisions[20].remaining == 0


def test_refill_over_time_without_float_drift() -> None:
    limiter, clock = make_limiter()
    drain(limiter, "k", 20)
    for _ in range(10):
        clock.advance(0.1)
        assert limiter.hit("k").allowed
        assert not limiter.hit("k").allowed
    clock.advance(2.0)
    assert limiter.peek("k").remaining == 20


@pytest.mark.parametrize(
    ("per_second", "retry_after"), [(10, 1), (0.5, 2), (1000, 1), (0.1, 10), (1 / 6, 6)]
)
def test_retry_after_is_whole_seconds_until_one_token(per_second: float, retry_after: int) -> None:
    limiter, _ = make_limiter(capacity=20, per_second=per_second)
    drain(limiter, "k", 20)
    refused = limiter.hit("k")
    assert not refused.allowed
    assert refused.retry_after == retry_after


def test_retry_after_rounds_up_partial_refill_and_is_never_zero() -> None:
    limiter, clock = make_limiter(capacity=20, per_second=0.5)
    drain(limiter, "k", 20)
    clock.advance(1.5)
    assert limiter.hit("k").retry_after == 1
    clock.advance(0.49)
    refused = limiter.hit("k")
    assert not refused.allowed and refused.retry_after == 1
    clock.advance(0.01)
    allowed = limiter.hit("k")
    assert allowed.allowed and allowed.retry_after == 0


def test_reset_remaining_and_window_values() -> None:
    limiter, clock = make_limiter(capacity=20, per_second=10)
    assert (limiter.peek("k").remaining, limiter.peek("k").reset) == (20, 0)
    first = limiter.hit("k")
    assert (first.limit, first.remaining, first.reset, first.window) == (20, 19, 1, 2)
    last = drain(limiter, "k", 19)[-1]
    assert (last.remaining, last.reset) == (0, 2)
    clock.advance(0.55)
    assert (limiter.peek("k").remaining, limiter.peek("k").reset) == (5, 2)
    clock.advance(0.5)
    assert (limiter.peek("k").remaining, limiter.peek("k").reset) == (10, 1)


def test_window_for_slow_limits() -> None:
    per_minute, _ = make_limiter(capacity=10, per_second=10 / 60)
    assert per_minute.hit("1.2.3.4").window == 60
    fast, _ = make_limiter(capacity=1, per_second=100)
    assert fast.hit("k").window == 1


def test_headers_exact_when_allowed() -> None:
    limiter, _ = make_limiter()
    assert limiter.hit("k").headers() == {
        "RateLimit-Limit": "20",
        "RateLimit-Remaining": "19",
        "RateLimit-Reset": "1",
        "RateLimit-Policy": '"default";q=20;w=2',
        "RateLimit": '"default";r=19;t=1',
    }


def test_headers_exact_when_refused() -> None:
    limiter, _ = make_limiter(capacity=20, per_second=0.5)
    refused = drain(limiter, "k", 21)[-1]
    assert refused.headers() == {
        "RateLimit-Limit": "20",
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": "40",
        "RateLimit-Policy": '"default";q=20;w=40',
        "RateLimit": '"default";r=0;t=40',
        "Retry-After": "2",
    }


def test_keys_are_isolated() -> None:
    limiter, _ = make_limiter()
    drain(limiter, 1, 20)
    assert not limiter.hit(1).allowed
    other = limiter.hit(2)
    assert other.allowed and other.remaining == 19
    assert limiter.peek(1).remaining == 0


def test_peek_creates_no_state_and_consumes_nothing() -> None:
    limiter, _ = make_limiter()
    unseen = limiter.peek("never-seen")
    assert len(limiter) == 0
    assert unseen == Decision(
        allowed=True, limit=20, remaining=20, reset=0, retry_after=0, window=2
    )
    limiter.hit("k")
    assert limiter.peek("k").remaining == limiter.peek("k").remaining == 19
    assert len(limiter) == 1


def test_peek_of_exhausted_key_is_refused_with_retry_after() -> None:
    limiter, _ = make_limiter()
    drain(limiter, "k", 20)
    peeked = limiter.peek("k")
    assert not peeked.allowed and peeked.retry_after == 1
    assert "Retry-After" in peeked.headers()


def test_random_keys_keep_memory_bounded_and_idle_buckets_are_dropped() -> None:
    limiter, clock = make_limiter(max_entries=1000)
    rng = random.Random(6)
    peak = 0
    for _ in range(100_000):
        clock.advance(0.0005)
        assert limiter.hit(rng.getrandbits(64)).allowed
        peak = max(peak, len(limiter))
    assert 0 < peak <= 1000
    clock.advance(limiter.window + SWEEP_SECONDS)
    limiter.peek("anyone")
    assert len(limiter) == 0


def test_idle_buckets_are_dropped_by_the_periodic_sweep() -> None:
    limiter, clock = make_limiter()
    drain(limiter, "idle", 20)
    clock.advance(1.0)
    limiter.hit("busy")
    clock.advance(SWEEP_SECONDS)
    limiter.hit("busy")
    assert len(limiter) == 1
    assert limiter.peek("idle").remaining == 20


def test_eviction_at_capacity_drops_least_recently_touched() -> None:
    limiter, _ = make_limiter(max_entries=3)
    for key in ("a", "b", "c", "a"):
        limiter.hit(key)
    limiter.hit("d")
    assert len(limiter) == 3
    assert limiter.peek("b").remaining == 20  # evicted: back to a full bucket
    assert limiter.peek("a").remaining == 18


PROXIES = parse_networks("10.0.0.0/8, fd00::/8")


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "trusted", "expected"),
    [
        (None, "1.2.3.4", PROXIES, "unknown"),
        ("203.0.113.9", "1.2.3.4", (), "203.0.113.9"),  # no proxy configured: XFF ignored
        ("203.0.113.9", "1.2.3.4", PROXIES, "203.0.113.9"),  # untrusted peer: XFF ignored
        ("10.0.0.1", None, PROXIES, "10.0.0.1"),
        ("10.0.0.1", "", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "1.2.3.4", PROXIES, "1.2.3.4"),
        ("10.0.0.1", "6.6.6.6, 1.2.3.4 ,10.9.9.9", PROXIES, "1.2.3.4"),  # right-most untrusted
        ("10.0.0.1", "10.1.1.1, 10.2.2.2", PROXIES, "10.1.1.1"),  # all trusted: left-most
        ("10.0.0.1", "1.2.3.4, garbage, 10.2.2.2", PROXIES, "10.2.2.2"),  # garbage ends walk
        ("10.0.0.1", "1.2.3.4, unknown", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "1.2.3.4,", PROXIES, "10.0.0.1"),  # empty entry is not an address
        ("fd00::1", "2001:DB8::7, fd12::3", PROXIES, "2001:db8::7"),  # IPv6
        ("::ffff:10.0.0.1", "1.2.3.4", PROXIES, "1.2.3.4"),  # IPv4-mapped peer
        ("unix-socket", "1.2.3.4", PROXIES, "unix-socket"),
        # A hop with its port, as some proxies write it: the port is not the client.
        ("10.0.0.1", "1.2.3.4:51234", PROXIES, "1.2.3.4"),
        ("10.0.0.1", "6.6.6.6, 1.2.3.4:80, 10.9.9.9:443", PROXIES, "1.2.3.4"),
        ("10.0.0.1", "[2001:db8::7]:443", PROXIES, "2001:db8::7"),
        ("10.0.0.1", "[2001:db8::7]", PROXIES, "2001:db8::7"),
        ("10.0.0.1", "[fd12::3]:8080, 10.2.2.2", PROXIES, "fd12::3"),  # all trusted
        ("10.0.0.1", "1.2.3.4:http", PROXIES, "10.0.0.1"),  # not a port: not an address
        ("10.0.0.1", "1.2.3.4:", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "1.2.3.4:\u00b2", PROXIES, "10.0.0.1"),  # digits are ASCII digits
        ("10.0.0.1", "[2001:db8::7]:\u0663", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "[2001:db8::7]x", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "[2001:db8::7", PROXIES, "10.0.0.1"),
        ("10.0.0.1", "[1.2.3.4]:80", PROXIES, "1.2.3.4"),
    ],
)
def test_client_address(
    peer: str | None, forwarded_for: str | None, trusted: tuple, expected: str
) -> None:
    assert client_address(peer, forwarded_for, trusted) == expected


def test_parse_networks() -> None:
    assert parse_networks("") == ()
    assert parse_networks(" , ") == ()
    assert [str(n) for n in parse_networks("127.0.0.1, 10.0.0.0/8,::1")] == [
        "127.0.0.1/32",
        "10.0.0.0/8",
        "::1/128",
    ]


@pytest.mark.parametrize("text", ["10.0.0.0/33", "proxy.local", "10.0.0.1/8"])
def test_parse_networks_rejects_bad_entries_clearly(text: str) -> None:
    with pytest.raises(ValueError, match="invalid trusted proxy network"):
        parse_networks(f"127.0.0.1, {text}")


def test_refusal_is_none_until_the_bucket_is_empty() -> None:
    """The failed-authentication gate asks only "is this address refused now?"."""
    clock = FakeClock()
    limiter = RateLimiter(2, 1.0, clock=clock)
    assert limiter.refusal("a") is None and len(limiter) == 0
    limiter.hit("a")
    assert limiter.refusal("a") is None
    limiter.hit("a")
    refused = limiter.refusal("a")
    assert refused is not None and refused.retry_after == 1
    clock.advance(1.0)
    assert limiter.refusal("a") is None
