"""Pagination headers (contract.md section 4): totals, page numbers and RFC 8288 links."""

from __future__ import annotations

import math

from yarl import URL

from .queries.common import Paging


def page_headers(url: URL, paging: Paging, total: int) -> dict[str, str]:
    """X-Total-Count, X-Page, X-Per-Page, X-Total-Pages and a Link header.

    Links are relative references (path and query) that keep every parameter of the
    request, so they never depend on a Host header the client chose.
    """
    total_pages = math.ceil(total / paging.per_page)
    last = max(total_pages, 1)
    pages = {"first": 1, "last": last}
    if paging.page > 1:
        pages["prev"] = min(paging.page - 1, last)
    if paging.page < total_pages:
        pages["next"] = paging.page + 1
    base = URL.build(path=url.raw_path, query_string=url.raw_query_string, encoded=True)
    links = ", ".join(
        f'<{base.update_query(page=number, per_page=paging.per_page)}>; rel="{rel}"'
        for rel, number in pages.items()
    )
    return {
        "X-Total-Count": str(total),
        "X-Page": str(paging.page),
        "X-Per-Page": str(paging.per_page),
        "X-Total-Pages": str(total_pages),
        "Link": links,
    }
