"""The store the web wing reads through: SQLite's ReadPool or PostgreSQL's PgStore.

One small seam: the responder, authentication and the health check only use what is
named here, and each backend answers with the same bytes (the records' JSON is built
by the database in either case).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from .api_keys import ActiveKey
from .listings import ChunkEncoder, Guard, Listing, Page, Paging, Records, Window
from .schema import DatabaseError


class NotAvailable(Exception):
    """The store cannot answer this listing (PostgreSQL: its record's JSON has no port)."""


class Unavailable(DatabaseError):
    """The database does not answer now (stopped, unreachable or too slow): retry later."""


class RecordStream(Protocol):
    """A long listing being read from one snapshot: the first chunk, then the rest."""

    token: str
    first: bytes

    def rest(self) -> AsyncIterator[bytes]: ...


class Version(Protocol):
    """The data token last seen, and whether it is time to read it again."""

    token: str

    def is_stale(self) -> bool: ...

    def update(self, token: str) -> None: ...


class Store(Protocol):
    """Reads for the serving process; every one from a single snapshot."""

    async def current_token(self) -> str:
        """The data token now (reopening a replaced SQLite file first)."""
        ...

    async def known_token(self) -> str | None:
        """The data token now when the store can tell without a round trip (SQLite: one
        read on the loop; PostgreSQL: what the loader's notifications said), else None."""
        ...

    async def ready(self) -> None:
        """Raise DatabaseError unless the database answers."""
        ...

    async def find_caller(self, key_hash: str) -> ActiveKey | None:
        """The key with this hash if it is neither revoked nor expired."""
        ...

    async def check_guard(self, guard: Guard | None) -> None:
        """Raise RecordNotFound unless the company owns the record."""
        ...

    async def page(
        self, listing: Listing, paging: Paging, known: tuple[str, int] | None
    ) -> Page: ...

    async def window(self, listing: Listing, limit: int) -> Window:
        """Records after a feed position (``listing.key``), at most ``limit``, one snapshot."""
        ...

    async def cursor_secret(self) -> bytes:
        """The database's secret for signing feed cursors."""
        ...

    async def feed_mark(self, seq: int) -> str | None:
        """The mark a feed cursor at ``seq`` is signed with; None past the change sequence."""
        ...

    async def webhooks_version(self) -> str:
        """The version of what the webhook listings show: the webhook tool's and sender's
        writes move it, loads do not."""
        ...

    async def one(self, listing: Listing) -> Records: ...

    def whole(
        self,
        listing: Listing,
        encode: ChunkEncoder,
        stream_slot: AbstractAsyncContextManager[object] | None = None,
    ) -> AbstractAsyncContextManager[Records | RecordStream]: ...

    async def close(self) -> None: ...
