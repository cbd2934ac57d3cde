"""The Lua script behind the shared limits, and the batch that calls it (contract.md 15).

Each bucket is one Redis key holding its theoretical arrival time (GCRA): the instant,
in whole microseconds on Redis's clock (rounded down), at which the bucket will be full
again. A missing key is a full bucket, an instant further ahead than an empty bucket's
an empty bucket (Redis's clock stepped back), and every key expires when its bucket is
full again. For each request the script looks at the address's failure gate and, while
it is open, spends a token of the key's bucket (or, after a failed authentication, of
the gate itself).

The requests that reach the limits during one turn of a worker's event loop go to Redis
together, in one EVALSHA: each request still makes one round trip, and the script runs
them in order and atomically, but a busy worker pays for one command instead of many.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import NoScriptError, RedisError

GATED, PASSED, EMPTY = 0, 1, 2  # the outcomes the script reports per request
ADMIT, FAIL, CHECK = b"a", b"f", b"c"  # what a request asks of it

# ARGV[1..4]: microseconds a token and the longest wait a spend may leave, for the gates
# and for the key buckets; then per request what it asks: "a" admit (spend a token of the
# key, KEYS: its address's gate and its key's bucket), "f" a failed authentication (spend
# one of the gate's, KEYS: the gate), "c" only check the gate (KEYS: the gate). Reply: per
# request, its outcome and the microseconds until the bucket it names is full.
SCRIPT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local gate_interval, gate_longest = tonumber(ARGV[1]), tonumber(ARGV[2])
local key_interval, key_longest = tonumber(ARGV[3]), tonumber(ARGV[4])

local function wait_of(key, longest)
  local tat = tonumber(redis.call('GET', key))
  if tat == nil or tat <= now then return 0 end
  if tat - now > longest then
    -- set on a clock ahead of this one (Redis's clock stepped back, a failover to a host
    -- whose clock lags): no bucket is emptier than empty, so it refills from empty now
    tat = math.floor(now + longest)
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil(longest / 1000))
  end
  return tat - now
end

local function spend(key, interval, longest)
  local wait = wait_of(key, longest)
  if wait + interval > longest then return false, wait end
  wait = wait + interval
  -- whole microseconds, rounded down: rounding to the nearest added up to half a
  -- microsecond a token, so the tokens of one batch (one 'now') came out a hair short
  local full = math.floor(now + wait)
  redis.call('SET', key, string.format('%.0f', full), 'PX', math.ceil(wait / 1000))
  return true, wait
end

local replies, k = {}, 1
for i = 5, #ARGV do
  local kind, gate = ARGV[i], KEYS[k]
  local outcome, wait = 0, wait_of(gate, gate_longest)
  if wait + gate_interval <= gate_longest then
    local spent = true
    if kind == 'f' then
      spent, wait = spend(gate, gate_interval, gate_longest)
    elseif kind == 'a' then
      spent, wait = spend(KEYS[k + 1], key_interval, key_longest)
    end
    outcome = spent and 1 or 2
  end
  k = k + (kind == 'a' and 2 or 1)
  replies[#replies + 1] = outcome
  replies[#replies + 1] = wait
end
return replies
"""


class ScriptBatch:
    """Collects the requests of one event-loop turn and runs the script once for them."""

    def __init__(self, client: Redis, policies: Sequence[bytes]) -> None:
        self._client = client
        self._sha = client.register_script(SCRIPT).sha.encode()
        self._policies = list(policies)  # the four numbers of ARGV[1..4], encoded once
        self._keys: list[str] = []
        self._kinds: list[bytes] = []
        self._replies: list[asyncio.Future[tuple[int, int]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, kind: bytes, *keys: str) -> tuple[int, int]:
        """(outcome, microseconds until full) for one request; raises Redis's errors."""
        loop = asyncio.get_running_loop()
        if not self._replies:  # the first request of this turn sends them all after it
            loop.call_soon(self._send_all)
        self._keys += keys
        self._kinds.append(kind)
        reply: asyncio.Future[tuple[int, int]] = loop.create_future()
        self._replies.append(reply)
        return await reply

    def _send_all(self) -> None:
        batch = (self._keys, self._kinds, self._replies)
        self._keys, self._kinds, self._replies = [], [], []
        task = asyncio.ensure_future(self._send(*batch))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _send(
        self, keys: list[str], kinds: list[bytes], replies: list[asyncio.Future[Any]]
    ) -> None:
        command = ("EVALSHA", self._sha, len(keys), *keys, *self._policies, *kinds)
        try:
            try:
                flat = await self._client.execute_command(*command)
            except NoScriptError:  # Redis restarted: its script cache is empty
                await self._client.script_load(SCRIPT)
                flat = await self._client.execute_command(*command)
        except (RedisError, OSError) as exc:
            for reply in replies:
                if not reply.done():
                    reply.set_exception(exc)
            return
        for index, reply in enumerate(replies):
            if not reply.done():
                reply.set_result((int(flat[2 * index]), int(flat[2 * index + 1])))
