"""Pagination headers: totals, page numbers and RFC 8288 links (contract.md 4); the feed's
next cursor and link (contract.md 13)."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from urllib.parse import quote, unquote_plus

from ..data.listings import Paging

PAGING_NAMES = ("page", "per_page")
# Left as sent in a link target: RFC 3986 unreserved characters, "%" of an escape that is
# already there, and the query's own structure ("&", "=", "+" for a space, "/", "?", ":",
# "@"). Everything else is percent-encoded: "<", ">" and '"' would end the target or
# start a parameter, "," and ";" split naive Link parsers, and "[" and "]" make curl
# want -g. Encoding them changes nothing the server reads back.
_SAFE = "/?:@&=+"
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


def link_target(text: str) -> str:
    """A path or query made safe inside ``<...>`` of a Link header, meaning unchanged."""
    text = _STRAY_PERCENT.sub("%25", text)
    return quote(text, safe=_SAFE + "%", errors="surrogateescape")


# A page's headers are remembered when its path and query string are short: a Link
# repeats them up to four times, percent-encoded, so long ones would make each entry of
# the cache hundreds of KiB.
KEPT_URL_LENGTH = 512


def page_headers(path: str, raw_query: str, paging: Paging, total: int) -> Mapping[str, str]:
    """The page's headers (see _page_headers), remembered when its URL is short."""
    if len(path) + len(raw_query) <= KEPT_URL_LENGTH:
        return _kept_page_headers(path, raw_query, paging, total)
    return _page_headers(path, raw_query, paging, total)


def _page_headers(path: str, raw_query: str, paging: Paging, total: int) -> Mapping[str, str]:
    """X-Total-Count, X-Page, X-Per-Page, X-Total-Pages and a Link header.

    Links are relative references (path and query) that keep every other parameter of
    the request exactly as sent, so they never depend on a Host header the client chose.
    Clients ask for the same pages again, and a page's headers change only with its
    total: each set is built once and shared, read-only.
    """
    total_pages = math.ceil(total / paging.per_page)
    last = max(total_pages, 1)
    pages = {"first": 1, "last": last}
    if paging.page > 1:
        pages["prev"] = min(paging.page - 1, last)
    if paging.page < total_pages:
        pages["next"] = paging.page + 1
    kept = _kept(raw_query, PAGING_NAMES)
    base = f"{link_target(path)}?{link_target(kept)}per_page={paging.per_page}&page="
    links = ", ".join(f'<{base}{number}>; rel="{rel}"' for rel, number in pages.items())
    return MappingProxyType(
        {
            "X-Total-Count": str(total),
            "X-Page": str(paging.page),
            "X-Per-Page": str(paging.per_page),
            "X-Total-Pages": str(total_pages),
            "Link": links,
        }
    )


_kept_page_headers = functools.lru_cache(maxsize=1024)(_page_headers)


def cursor_headers(path: str, raw_query: str, cursor: str) -> dict[str, str]:
    """X-Next-Cursor and a Link to the next page, keeping every other parameter as sent."""
    kept = link_target(_kept(raw_query, ("cursor",)))
    link = f'<{link_target(path)}?{kept}cursor={cursor}>; rel="next"'
    return {"X-Next-Cursor": cursor, "Link": link}


def _kept(raw_query: str, dropped: tuple[str, ...]) -> str:
    """The query's parameters but ``dropped``, still encoded, each followed by ``&``."""
    return "".join(
        f"{part}&"
        for part in raw_query.split("&")
        if part and unquote_plus(part.split("=", 1)[0]) not in dropped
    )
