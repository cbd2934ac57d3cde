"""Typed keys for application and request state (no string keys, no module globals)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the key that authenticated the request and its company."""

    key_id: int
    company_id: int


CONFIG = web.AppKey("config", "Config")
POOL = web.AppKey("pool", "ReadPool")
KEY_CACHE = web.AppKey("key_cache", "KeyCache")
LIMITER = web.AppKey("limiter", "RateLimiter")
AUTH_FAILURES = web.AppKey("auth_failures", "RateLimiter")
COUNTS = web.AppKey("counts", "CountCache")
DATA_VERSION = web.AppKey("data_version", "DataVersion")

CALLER = web.RequestKey("caller", Caller)
REQUEST_ID = web.RequestKey("request_id", str)
RATE_DECISION = web.RequestKey("rate_decision", "Decision")
