"""Pages read again after a load, before their clients ask.

Data only changes when a writer runs, and a load empties what the server had at the old
data version: the totals it had counted, and the pages each database connection held
(SQLite drops a connection's cache and its map of the file when another connection has
written). The first request of a page after a load would pay for both. So each process
remembers the pages it served last (the listing, the page, the total's cache key) and,
when it sees the data version move (it looks every WATCH_SECONDS), reads each of them
again, one at a time, as a request would: a total no summary holds is counted once,
into the count cache at the new version, and the page is read where the next request
will read it. A request that comes first counts as it would have.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator

from aiohttp import web

from ..data.listings import Listing, Paging
from ..keys import COUNTS, POOL, RECENT_PAGES
from .responder import CountKey, refresh_version

log = logging.getLogger("app.refresh")

RECENT = 64  # pages remembered per process: what dashboards poll, not every URL seen
WATCH_SECONDS = 1.0  # how often an idle process looks whether a load landed
# A page that took longer than this to read is not read again: its first request costs
# about what its next ones do (the stats' slower path over the raw rows, say), and it
# would hold a pooled connection for as long after every load.
SLOW_SECONDS = 0.05

PageKey = tuple[CountKey, int, int]  # the total's key, the page and its size


class RecentPages:
    """The pages served last (the most recent RECENT), to read again after a load."""

    def __init__(self, size: int = RECENT) -> None:
        self._pages: OrderedDict[PageKey, tuple[Listing, Paging]] = OrderedDict()
        self._size = size

    def note(self, key: CountKey, listing: Listing, paging: Paging, seconds: float) -> None:
        """Remember a page just served, unless it took longer than SLOW_SECONDS to read."""
        if seconds > SLOW_SECONDS:
            return
        page_key = (key, paging.page, paging.per_page)
        self._pages[page_key] = (listing, paging)
        self._pages.move_to_end(page_key)
        if len(self._pages) > self._size:
            self._pages.popitem(last=False)

    def pages(self) -> list[tuple[CountKey, Listing, Paging]]:
        """The pages remembered, the most recent last."""
        return [(key, listing, paging) for (key, _, _), (listing, paging) in self._pages.items()]


async def read_again(app: web.Application, token: str) -> None:
    """Read every page remembered at data version ``token``: each total into the count
    cache, each page where a request reads it. A page that fails (its record gone, a
    file being replaced) is skipped; a newer load stops the round (the next one reads
    them at its version)."""
    pool, counts = app[POOL], app[COUNTS]
    for key, listing, paging in app[RECENT_PAGES].pages():
        try:
            total = counts.get(key, token)
            page = await pool.page(listing, paging, None if total is None else (token, total))
            if page.token != token:
                return
            counts.put(key, page.token, page.total)
            if total is None and not listing.summed:  # counted on a pooled connection:
                await pool.page(listing, paging, (page.token, page.total))  # now as known
        except Exception as exc:  # one page's failure stops no other
            log.debug("page not read again after a load: %s", exc)


async def watch(app: web.Application) -> None:
    """Look for a new data version every WATCH_SECONDS; read the pages again at each."""
    seen = ""
    while True:
        try:
            token = await refresh_version(app)
        except Exception as exc:  # the store may be away for a while
            log.debug("data version not read: %s", exc)
        else:
            if seen and token != seen:
                await read_again(app, token)
            seen = token
        await asyncio.sleep(WATCH_SECONDS)


async def refresh_ctx(app: web.Application) -> AsyncIterator[None]:
    """The watcher, for the app's life (after the store is open)."""
    task = asyncio.create_task(watch(app))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
