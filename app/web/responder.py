"""The listing responders: a page, the feed's window, a whole array, one record.

Each kind of answer has its responder, and every one starts with the same prelude, each
step once: the format the client asked for (406 when none fits); the data token, read
again only when it may have moved; the ETag; 304 when the client already holds this
answer (no listing query runs). Then it reads (what total is already known, for a
page), takes the headers of the snapshot the records came from (the prelude's ETag,
unless a load landed in between) and writes the body in its format
(:mod:`app.web.bodies`).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Generic, TypeVar

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from ..data.listings import Listing, Paging
from ..keys import ANSWERS, CALLER, COUNTS, DATA_VERSION, POOL, RECENT_PAGES, SHARES, STREAMS
from .bodies import array_response, finish
from .cursor import CursorPage
from .errors import PreconditionFailed, TooManyRequests, client_closed_response, client_gone
from .formats import CSV, RECORD, Body, Format, Offer, accept_header, join_lines
from .pagination import PAGING_NAMES, cursor_headers, page_headers

VARY = "Accept, Accept-Encoding"
# Parameters that never change a listing's total.
NOT_COUNTED = (*PAGING_NAMES, "format")

CountKey = tuple[int, bytes]
TagKey = tuple[int, bytes]  # the company, a digest of the URL's path and query and Accept
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TokenCache(Generic[K, V]):
    """Values that hold at one data token (data only changes with a load): the totals of
    filtered listings, the answers given; the most recent entries are kept, at most
    ``max_entries`` of them and, when ``size`` weighs them, at most ``max_bytes``."""

    def __init__(
        self, max_entries: int = 2048, max_bytes: int = 0, size: Callable[[V], int] | None = None
    ) -> None:
        self._values: OrderedDict[K, tuple[str, V]] = OrderedDict()
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._size = size
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> list[V]:
        """The values kept, oldest first: what the cache holds, for tests to weigh."""
        return [value for _, value in self._values.values()]

    def get(self, key: K, token: str) -> V | None:
        """The value kept for ``key`` at data token ``token``, if there is one."""
        found = self._values.get(key)
        return found[1] if found is not None and found[0] == token else None

    def put(self, key: K, token: str, value: V) -> None:
        old = self._values.pop(key, None)
        self._values[key] = (token, value)
        self._bytes += self._weight(value) - (0 if old is None else self._weight(old[1]))
        while len(self._values) > self._max_entries or self._bytes > self._max_bytes:
            _, (_, dropped) = self._values.popitem(last=False)
            self._bytes -= self._weight(dropped)

    def clear(self) -> None:
        """Forget every entry (what a new process would know)."""
        self._values.clear()
        self._bytes = 0

    def _weight(self, value: V) -> int:
        return 0 if self._size is None else self._size(value)


# A whole answer of at most KEPT_BODY_BYTES (body and headers) is kept with its ETag (see
# known_answer_middleware), within the process's budget (REPORTING_ANSWER_MEMORY_MB).
KEPT_BODY_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Known:
    """An answer this process gave at a data token: its ETag and, when it was read whole
    and small, what the view sent (body, headers, format), to be sent again."""

    etag: str
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()
    fmt: Format | None = None

    def size(self) -> int:
        """The bytes it holds: its headers count too (a page's Link repeats the query
        string up to four times, and may be far longer than a small body)."""
        return len(self.body or b"") + sum(len(k) + len(v) for k, v in self.headers)

    def response(self, request: web.Request) -> web.Response:
        """The view's 200 again (gzip as this request accepts)."""
        assert self.body is not None and self.fmt is not None
        return finish(request, web.Response(body=self.body, headers=self.headers), self.fmt)


class KnownAnswers(TokenCache[TagKey, Known]):
    """The answers this process gave by URL (TagKey), their bodies within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes=max_bytes, size=Known.size)
        self.largest = min(KEPT_BODY_BYTES, max_bytes)  # 0: ETags only


class StreamSlots:
    """Long answers each company is being sent at once, bounded.

    A client that never reads holds a pooled connection and its snapshot until the
    write timeout cuts it off; bounding them per company keeps one tenant from taking
    every connection from the others.
    """

    def __init__(self, per_company: int) -> None:
        self._per_company = per_company
        self._active: dict[int, int] = {}

    @asynccontextmanager
    async def hold(self, company_id: int) -> AsyncIterator[None]:
        """Take one of the company's slots for the block, or refuse with 429."""
        active = self._active.get(company_id, 0)
        if active >= self._per_company:
            raise TooManyRequests(
                "Too many long answers are being sent to this company at once; "
                "retry when one has finished.",
                headers={hdrs.RETRY_AFTER: "1"},
            )
        self._active[company_id] = active + 1
        try:
            yield
        finally:
            left = self._active[company_id] - 1
            if left:
                self._active[company_id] = left
            else:
                del self._active[company_id]


class PoolShares:
    """Pooled reads each company may run at once; the company's next ones wait their turn.

    A page of 500 campaigns holds a pooled connection for a good part of a second: one
    company sending such pages, each within its rate limit, would otherwise fill the pool
    and queue every other company's requests (and /readyz) behind its own.
    """

    def __init__(self, per_company: int) -> None:
        self._per_company = per_company
        self._turns: dict[int, asyncio.Semaphore] = {}
        self._users: dict[int, int] = {}  # holding or waiting, so idle companies are dropped

    @asynccontextmanager
    async def hold(self, company_id: int) -> AsyncIterator[None]:
        """Wait for one of the company's shares, and hold it for the block."""
        turns = self._turns.get(company_id)
        if turns is None:
            turns = self._turns[company_id] = asyncio.Semaphore(self._per_company)
        self._users[company_id] = self._users.get(company_id, 0) + 1
        try:
            async with turns:
                yield
        finally:
            left = self._users[company_id] - 1
            if left:
                self._users[company_id] = left
            else:
                del self._users[company_id], self._turns[company_id]


def pool_share(read_connections: int) -> int:
    """Pooled reads one company may run at once: half the pool, so others always find some."""
    return max(1, read_connections // 2)


async def respond_page(
    request: web.Request, listing: Listing, paging: Paging, offer: Offer, variant: str = ""
) -> web.StreamResponse:
    """One page of a listing, with its total and the page links (contract.md 4).

    ``variant`` goes into the ETag: what the answer depends on besides the data, the URL
    and the format (today's date, for the reports that count overdue inscriptions).
    """
    ready = await prelude(request, listing, offer, variant)
    if ready.not_modified is not None:
        return ready.not_modified
    app = request.app
    # A total is read once per data version: summed from a summary with the first page
    # (a department's may sum thousands of rows), or else counted; then kept.
    key = count_key(request, ready.company_id, variant)
    total = app[COUNTS].get(key, ready.token)
    known = None if total is None else (ready.token, total)
    started = time.perf_counter()
    async with app[SHARES].hold(ready.company_id):
        page = await app[POOL].page(ready.listing, paging, known)
    app[COUNTS].put(key, page.token, page.total)
    app[RECENT_PAGES].note(key, ready.listing, paging, time.perf_counter() - started)
    headers = await ready.headers(page.token)
    url = request.rel_url
    headers.update(page_headers(url.raw_path, url.raw_query_string, paging, page.total))
    return ready.respond(page.texts, headers)


async def respond_window(
    request: web.Request, listing: Listing, cursor: CursorPage, offer: Offer
) -> web.StreamResponse:
    """The feed's records after the cursor's position, with the next cursor (contract.md 13)."""
    ready = await prelude(request, listing, offer, "")
    if ready.not_modified is not None:
        return ready.not_modified
    async with request.app[SHARES].hold(ready.company_id):
        window = await request.app[POOL].window(ready.listing, cursor.limit)
    headers = await ready.headers(window.token)
    url = request.rel_url
    next_cursor = await cursor.next_cursor(window.last)
    headers.update(cursor_headers(url.raw_path, url.raw_query_string, next_cursor))
    return ready.respond(window.texts, headers)


async def respond_all(
    request: web.Request, listing: Listing, offer: Offer, variant: str = ""
) -> web.StreamResponse:
    """The whole listing: read whole when short, else streamed from one snapshot.

    A client that leaves mid-stream is answered 499 here, outside the store's snapshot:
    inside it, the PostgreSQL store would take the closed socket's OSError for an outage
    (503, "the database does not answer").
    """
    ready = await prelude(request, listing, offer, variant)
    if ready.not_modified is not None:
        return ready.not_modified
    slot = request.app[STREAMS].hold(ready.company_id)
    async with request.app[POOL].whole(ready.listing, ready.body.encode, slot) as result:
        headers = await ready.headers(result.token)
        try:
            return await array_response(request, ready.body, result, headers, ready.respond)
        except ConnectionError:
            if not client_gone(request):
                raise
    return client_closed_response()


async def respond_record(
    request: web.Request, listing: Listing, variant: str = ""
) -> web.StreamResponse:
    """Answer one JSON object: the listing's single record (404 when its guard fails)."""
    ready = await prelude(request, listing, RECORD, variant)
    if ready.not_modified is not None:
        return ready.not_modified
    async with request.app[SHARES].hold(ready.company_id):
        records = await request.app[POOL].one(listing)
    headers = await ready.headers(records.token)
    return ready.respond(records.texts, headers)


class Prelude:
    """What an answer settled before reading: its body layout, the data token, its ETag,
    and the listing to read (a CSV reads the exported rows, with the ids that tell merged
    files apart, as lines the database writes when the listing has them).

    ``not_modified`` is the 304 when the client already holds the answer.
    """

    __slots__ = (
        "body", "company_id", "etag", "listing", "not_modified", "request", "tag_key", "token",
        "variant",
    )  # fmt: skip

    def __init__(
        self, request: web.Request, listing: Listing, body: Body, variant: str, token: str
    ) -> None:
        self.request = request
        self.company_id = request[CALLER].company_id
        self.body = body
        self.listing = listing
        if body.format is CSV:
            lines = listing.csv_lines()
            self.listing = listing.exported() if lines is None else lines
            self.body = body if lines is None else replace(body, encode=join_lines)
        self.variant = f"{body.format.name}|{variant}"
        # An answer that depends on nothing but the data, the company, the URL and Accept
        # (no date) can be known by those: see known_answer_middleware.
        known = not variant and request.method == hdrs.METH_GET
        self.tag_key = tag_key(request, self.company_id) if known else None
        self.at(token)
        self.not_modified: web.Response | None = None

    def at(self, token: str) -> None:
        """Take ``token`` as the data's version: the ETag is this answer's at that token."""
        self.token = token
        self.etag = make_etag(token, self.company_id, self.request, self.variant)

    def remember(self) -> None:
        """Keep the ETag of an answer the company may read (its records were read, or its
        guard checked), so that the next 304 of it needs no view."""
        answers = self.request.app[ANSWERS]
        if self.tag_key is not None and answers.get(self.tag_key, self.token) is None:
            answers.put(self.tag_key, self.token, Known(self.etag))

    def respond(self, texts: list[bytes], headers: dict[str, str]) -> web.Response:
        """The records read whole as the answer, kept with its ETag when it is small."""
        body = self.body.whole(texts)
        answers = self.request.app[ANSWERS]
        if self.tag_key is not None:
            known = Known(self.etag, body, tuple(headers.items()), self.body.format)
            if known.size() <= answers.largest:
                answers.put(self.tag_key, self.token, known)
        return finish(self.request, web.Response(body=body, headers=headers), self.body.format)

    async def headers(self, token: str) -> dict[str, str]:
        """ETag and Vary of the snapshot the records came from; CSV comes as a file."""
        if token != self.token:  # a load landed after the prelude
            await refresh_version(self.request.app, token)
            self.at(token)
        self.remember()
        headers: dict[str, str] = {hdrs.ETAG: self.etag, hdrs.VARY: VARY}
        if self.body.format is CSV:
            headers[hdrs.CONTENT_DISPOSITION] = f'attachment; filename="{csv_name(self.request)}"'
        return headers


async def prelude(request: web.Request, listing: Listing, offer: Offer, variant: str) -> Prelude:
    """Format, data token, ETag and 304, once each, before any listing query.

    A record that does not exist for this company is 404 before any 304, even for
    ``If-None-Match: *``.
    """
    body = offer.negotiate(request)
    ready = Prelude(request, listing, body, variant, await refresh_version(request.app))
    if if_match_fails(request):
        if listing.guard is not None:  # a free or foreign id is 404, If-Match or not
            await request.app[POOL].check_guard(listing.guard)
        raise PreconditionFailed(IF_MATCH_DETAIL)
    if etag_matches(request, ready.etag):
        if listing.guard is not None:  # a record of the company's own: else nothing to read
            await request.app[POOL].check_guard(listing.guard)
        ready.remember()
        ready.not_modified = not_modified(ready.etag)
    return ready


def not_modified(etag: str) -> web.Response:
    return web.Response(status=304, headers={hdrs.ETAG: etag, hdrs.VARY: VARY})


@web.middleware
async def known_answer_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A GET this process answered for the company, with the same Accept, at the current
    data token, is answered without the view: 304 when the client holds its ETag, else
    the same 200 from memory when that was read whole and small.

    Only answers the company was given are known (never a 404's), and only those that
    depend on nothing else (no date), so each is the one the view would give. If-Match,
    which comes before If-None-Match, is left to the view.
    """
    caller = request.get(CALLER)
    if (
        caller is not None
        and request.method == hdrs.METH_GET
        and hdrs.IF_MATCH not in request.headers
    ):
        app = request.app
        token = await refresh_version(app)
        known = app[ANSWERS].get(tag_key(request, caller.company_id), token)
        if known is not None and etag_matches(request, known.etag):
            return not_modified(known.etag)
        if known is not None and known.body is not None:
            # Data a load committed before the request is in its answer: the token is
            # read afresh for a 200 (a 304 takes the one the process knew).
            now = await app[POOL].known_token()
            if now == token:
                return known.response(request)
            if now is not None:
                await refresh_version(app, now)
    return await handler(request)


def tag_key(request: web.Request, company_id: int) -> TagKey:
    """A digest keeps each entry small, whatever the length of the URL and the header.

    Accept is taken whole (every line), as negotiation reads it: two requests whose
    first lines agree may still ask for different formats. Bytes of a header that are not
    UTF-8 come as lone surrogates, which a strict encoding refuses (a 500).
    """
    url, accept = request.rel_url.raw_path_qs, accept_header(request)
    text = f"{url}\n{accept}".encode(errors="surrogatepass")
    return company_id, hashlib.blake2b(text, digest_size=16).digest()


async def refresh_version(app: web.Application, seen: str = "") -> str:
    """The data token: the one place the app's data version moves.

    It is read again when the version says it may have moved (the pool reopens when the
    file was replaced), or when a snapshot showed another token (``seen``). That token is
    never taken as it is: a read that waited for a connection may show a load older than
    one the version already knows, and tokens have no order, so the version would move
    back (304s for changed answers, kept answers sent again) until the next look.
    """
    version = app[DATA_VERSION]
    if (seen and seen != version.token) or version.is_stale():
        version.update(await app[POOL].current_token())
    return version.token


def make_etag(token: str, company_id: int, request: web.Request, variant: str) -> str:
    """A weak validator for this company's view of this URL at this data version, as
    this release of the service writes it.

    ``variant`` is whatever else the answer depends on: the format an Accept header
    chose, today's date for a report that counts overdue inscriptions.
    """
    url = request.rel_url.raw_path_qs
    digest = hashlib.blake2b(
        f"{release()}|{token}|{company_id}|{url}|{variant}".encode(), digest_size=12
    ).hexdigest()
    return f'W/"{digest}"'


PACKAGE = Path(__file__).resolve().parents[1]


@functools.cache
def release() -> str:
    """A digest of the code and files this server runs (the whole ``app`` package).

    A release may change an answer's bytes without changing the data (a field added, a
    figure counted otherwise): its ETags then differ from the last release's, so a client
    holding an old answer gets the new one, not a 304. Every process of one release, on
    any host, makes the same digest.
    """
    digest = hashlib.blake2b(digest_size=16)
    for path in sorted(PACKAGE.rglob("*")):
        inside = path.relative_to(PACKAGE)
        if path.is_file() and "__pycache__" not in inside.parts:
            digest.update(f"{inside.as_posix()}\0".encode())
            digest.update(hashlib.blake2b(path.read_bytes()).digest())
    return digest.hexdigest()


IF_MATCH_DETAIL = (
    "If-Match compares entity tags strongly and this service's are weak: only"
    " If-Match: * holds (RFC 9110 13.1.1)."
)


def if_match_fails(request: web.Request) -> bool:
    """Whether If-Match (every line of it) is false (RFC 9110 13.1.1): it compares
    strongly, and every ETag here is weak, so no list of tags holds; ``*`` holds for any
    answer there is."""
    header = ",".join(request.headers.getall(hdrs.IF_MATCH, ())).strip()
    return bool(header) and header != "*"


def etag_matches(request: web.Request, etag: str) -> bool:
    """Weak comparison against If-None-Match (RFC 9110 13.1.2); a list sent on several
    lines is one list (RFC 9110 5.3)."""
    header = ",".join(request.headers.getall(hdrs.IF_NONE_MATCH, ()))
    if not header:
        return False
    if header.strip() == "*":
        return True
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return etag.removeprefix("W/") in tags


def csv_name(request: web.Request) -> str:
    """``campaigns-1-events.csv`` for /api/companies/v1/campaigns/1/events."""
    resource = request.path.rsplit("/v1/", 1)[-1].strip("/")
    return f"{resource.replace('/', '-')}.csv"


def count_key(request: web.Request, company_id: int, variant: str = "") -> CountKey:
    """The company and a digest of the path, every parameter the total depends on and
    what else the answer does (``variant``: a filter by today's date counts anew the next
    day, the webhook listings with each write of the sender).

    A digest keeps each cache entry small whatever the length of the query string.
    """
    items = sorted((k, v) for k, v in request.query.items() if k not in NOT_COUNTED)
    digest = hashlib.blake2b(repr((request.path, items, variant)).encode(), digest_size=16).digest()
    return company_id, digest
