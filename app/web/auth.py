"""API-key authentication (contract.md sections 1 and 2).

The key is looked up by its SHA-256 hash. Known keys are cached for a couple of
seconds, so a revoked key stops working well within the contract's 5 seconds (an
expiring key is cached no longer than it has left, so it stops on time); unknown
keys are never cached (random keys must not create state) and each failure spends a
token of the client address's failure bucket, so keys cannot be guessed at speed.

The key is resolved before the limits are asked, so that one call (one round trip when
they live in Redis) both checks the address's gate and spends the right token. While the
gate is shut every answer is the same 429, whatever the key.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from aiohttp.typedefs import Handler
from multidict import istr

from ..data.api_keys import CACHE_SECONDS, ActiveKey, hash_key
from ..data.store import Store
from ..keys import API_KEY, CALLER, CLIENT, KEY_CACHE, POOL, Caller
from .access import (
    CHALLENGE,
    HTTP_WHITESPACE,
    PARTNERS_API,
    company_of,
    require_partner,
    require_scope,
)
from .clients import address_key
from .errors import BadRequest, Unauthorized
from .ratelimit import check_gate, check_limits

PROTECTED_PREFIXES = ("/api/companies/", f"{PARTNERS_API}/")
X_API_KEY = istr("X-API-KEY")  # as istr: the headers take it without folding it again


class KeyCache:
    """Active keys seen recently, by hash; entries expire so revocations take effect."""

    def __init__(self, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self._entries: dict[str, tuple[ActiveKey, float]] = {}
        self._max_entries = max_entries
        self._clock = clock

    async def resolve(self, store: Store, key: str) -> ActiveKey | None:
        """The key's facts (owner, companies, scopes), or None when it is unknown, revoked
        or expired: a partner's companies are remembered as long as its key.

        A miss is one primary-key lookup (SQLite: on the event loop's own connection).
        """
        key_hash = hash_key(key)
        now = self._clock()
        entry = self._entries.get(key_hash)
        if entry is not None and entry[1] > now:
            return entry[0]
        found = await store.find_caller(key_hash)
        if found is None:
            self._entries.pop(key_hash, None)
            return None
        if len(self._entries) >= self._max_entries:
            self._entries = {h: e for h, e in self._entries.items() if e[1] > now}
            if len(self._entries) >= self._max_entries:
                self._entries.clear()
        # A key that expires sooner is remembered only until it expires, not a moment longer.
        seconds = CACHE_SECONDS if found.seconds_left is None else found.seconds_left
        self._entries[key_hash] = (found, now + min(CACHE_SECONDS, seconds))
        return found


def needs_key(request: web.Request) -> bool:
    """Only the API's resources need a key; unknown paths and bad methods go on to 404/405."""
    return request.path.startswith(PROTECTED_PREFIXES) and request.match_info.http_exception is None


def presented_key(request: web.Request) -> str:
    """The X-API-KEY value trimmed of HTTP whitespace only; given more than once, a 400.

    A proxy that appends its own key must not be overridden by one the client sent first,
    so two headers are refused rather than one chosen. Other Unicode spaces stay part of
    the key (and make it unknown).
    """
    keys = request.headers.getall(X_API_KEY, ())
    if len(keys) > 1:
        raise BadRequest(
            "Send exactly one X-API-KEY header.",
            errors={"X-API-KEY": [f"Given {len(keys)} times; send it once."]},
        )
    return keys[0].strip(HTTP_WHITESPACE) if keys else ""


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Resolve X-API-KEY to its company and apply the limits: 401, or 429 (contract.md 2, 6);
    then what the key may read: 403 without the route's scope, then the company it reads
    (400 for a bad X-Company-ID, 404 for a company not its own), all before the handler
    validates any parameter.

    The failed-authentication gate counts per client address, an IPv6 client per /64.
    """
    if not needs_key(request):
        return await handler(request)
    app = request.app
    address = address_key(request[CLIENT] or "unknown")
    try:
        key = presented_key(request)
    except BadRequest:
        await check_gate(request, address)  # a gated address gets its 429 first
        raise
    found = await app[KEY_CACHE].resolve(app[POOL], key) if key else None
    await check_limits(request, address, found)  # the gate, then a token of key or address
    if found is None:
        raise Unauthorized(
            "Missing or invalid X-API-KEY header.", headers={"WWW-Authenticate": CHALLENGE}
        )
    request[API_KEY] = found
    require_scope(request, found)
    if request.path.startswith(PARTNERS_API):
        # The partners' API answers for the partner: its ETags, totals and shares are
        # kept under the partner's id negated, apart from every company's.
        request[CALLER] = Caller(key_id=found.key_id, company_id=-require_partner(found))
    else:
        company_id = company_of(request, found)
        if company_id is not None:
            request[CALLER] = Caller(key_id=found.key_id, company_id=company_id)
    return await handler(request)


def setup_auth(app: web.Application) -> None:
    """Install the key cache; the middleware is placed by create_app."""
    app[KEY_CACHE] = KeyCache()
