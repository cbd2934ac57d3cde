"""One company cannot take the read pool from the others (operations: pooled reads).

A company runs at most half the pooled connections at once; its further pooled reads
wait their turn behind its own, while another company's requests (and /readyz) find a
connection. The benchmark's neighbour row measures what this buys in latency.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

from app.keys import SHARES
from app.web.responder import PoolShares, pool_share

from .support.clients import MakeClient
from .support.factories import API, KEY_2, get

OWN_REPORT = f"{API}/campaigns/1"  # company 1's, read on a pooled connection
OTHER_REPORT = f"{API}/campaigns/3"  # company 2's


async def settle() -> None:
    """Let every task that can run go as far as it can."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_company_gets_half_the_pool() -> None:
    assert [pool_share(n) for n in (1, 2, 3, 4, 8)] == [1, 1, 1, 2, 4]


async def test_a_company_waits_for_its_own_shares_only() -> None:
    shares = PoolShares(2)
    entered: list[str] = []

    async def read(name: str, company_id: int, release: asyncio.Event) -> None:
        async with shares.hold(company_id):
            entered.append(name)
            await release.wait()

    done = asyncio.Event()
    first = [asyncio.create_task(read(f"1.{n}", 1, done)) for n in range(3)]
    await settle()
    assert entered == ["1.0", "1.1"]  # the third waits its company's turn
    other = asyncio.create_task(read("2.0", 2, done))
    await settle()
    assert entered == ["1.0", "1.1", "2.0"]  # another company does not wait
    done.set()
    await asyncio.gather(*first, other)
    assert entered[-1] == "1.2"


async def test_a_company_at_its_share_does_not_hold_up_another(make_client: MakeClient) -> None:
    client = await make_client(read_connections=4)
    shares = client.server.app[SHARES]
    async with AsyncExitStack() as held:  # company 1 runs two long reads, say
        for _ in range(pool_share(4)):
            await held.enter_async_context(shares.hold(1))
        waiting = asyncio.create_task(get(client, OWN_REPORT))
        assert (await get(client, OTHER_REPORT, key=KEY_2)).status == 200
        assert (await client.get("/readyz")).status == 200
        await settle()
        assert not waiting.done()  # company 1's third read waits for its own turn
    assert (await waiting).status == 200
