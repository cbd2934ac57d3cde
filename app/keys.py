"""Typed keys for application and request state (no string keys, no module globals)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from aiohttp import web

if TYPE_CHECKING:
    from .config import Config
    from .data.api_keys import ActiveKey
    from .data.store import Store, Version
    from .web.auth import KeyCache
    from .web.params import QueryParsers
    from .web.ratelimit import Decision, Limits
    from .web.refresh import RecentPages
    from .web.responder import CountKey, KnownAnswers, PoolShares, StreamSlots, TokenCache


class Caller(NamedTuple):
    """Who is asking: the key that authenticated the request and the company it reads
    (a named tuple: one is made for every request, and a tuple is the cheapest record)."""

    key_id: int
    company_id: int


# The annotations give each key its type for mypy; at run time they are never evaluated,
# so this module imports none of the classes (they import it).
CONFIG: web.AppKey[Config] = web.AppKey("config")
POOL: web.AppKey[Store] = web.AppKey("pool")
KEY_CACHE: web.AppKey[KeyCache] = web.AppKey("key_cache")
LIMITS: web.AppKey[Limits] = web.AppKey("limits")
COUNTS: web.AppKey[TokenCache[CountKey, int]] = web.AppKey("counts")
ANSWERS: web.AppKey[KnownAnswers] = web.AppKey("answers")
PARSERS: web.AppKey[QueryParsers] = web.AppKey("parsers")
STREAMS: web.AppKey[StreamSlots] = web.AppKey("streams")
SHARES: web.AppKey[PoolShares] = web.AppKey("shares")
DATA_VERSION: web.AppKey[Version] = web.AppKey("data_version")
RECENT_PAGES: web.AppKey[RecentPages] = web.AppKey("recent_pages")
# Today's UTC date (the reports count overdue inscriptions): a clock tests can set.
TODAY: web.AppKey[Callable[[], dt.date]] = web.AppKey("today")

CALLER: web.RequestKey[Caller] = web.RequestKey("caller", Caller)
# The key itself: its owner, the companies and scopes it may read, its public facts.
API_KEY: web.RequestKey[ActiveKey] = web.RequestKey("api_key")
REQUEST_ID: web.RequestKey[str] = web.RequestKey("request_id", str)
CLIENT: web.RequestKey[str | None] = web.RequestKey("client")  # its address; None: unknown
RATE_DECISION: web.RequestKey[Decision] = web.RequestKey("rate_decision")
