"""Pagination headers (contract.md section 4): totals, page numbers and RFC 8288 links."""

from __future__ import annotations

import math
from urllib.parse import unquote_plus

from ..data.listings import Paging

PAGING_NAMES = ("page", "per_page")


def page_headers(path: str, raw_query: str, paging: Paging, total: int) -> dict[str, str]:
    """X-Total-Count, X-Page, X-Per-Page, X-Total-Pages and a Link header.

    Links are relative references (path and query) that keep every other parameter of
    the request exactly as sent, so they never depend on a Host header the client chose.
    """
    total_pages = math.ceil(total / paging.per_page)
    last = max(total_pages, 1)
    pages = {"first": 1, "last": last}
    if paging.page > 1:
        pages["prev"] = min(paging.page - 1, last)
    if paging.page < total_pages:
        pages["next"] = paging.page + 1
    kept = "".join(
        f"{part}&"
        for part in raw_query.split("&")
        if part and unquote_plus(part.split("=", 1)[0]) not in PAGING_NAMES
    )
    base = f"{path}?{kept}per_page={paging.per_page}&page="
    links = ", ".join(f'<{base}{number}>; rel="{rel}"' for rel, number in pages.items())
    return {
        "X-Total-Count": str(total),
        "X-Page": str(paging.page),
        "X-Per-Page": str(paging.per_page),
        "X-Total-Pages": str(total_pages),
        "Link": links,
    }
