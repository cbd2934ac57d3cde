"""The two events endpoints: success headers and pagination (contract.md 4, 5 and 7).

Without a paging parameter the whole array comes with the JSON headers and an ETag and
no page headers; with ``page`` or ``per_page`` (either one) the pages tile the list, with
X-Total-Count, X-Page, X-Per-Page, X-Total-Pages and Link headers whose targets keep
the filters. Expected pages are slices of the plain-Python oracle in test_events.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL

from .support.events import (
    CAPTCHA,
    KINDS,
    OWN_ID,
    TYPE,
    Params,
    assert_same,
    campaign_events,
    employee_events,
    expected,
    fetch,
)
from .support.factories import API, KEY_1
from .support.stores import on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

PAGE_HEADERS = ("X-Total-Count", "X-Page", "X-Per-Page", "X-Total-Pages", "Link")
FILTERS = {"campaigns": [(TYPE, "Open,click"), (CAPTCHA, "false")], "victimsapi": []}


def filtered(kind: str) -> list[dict[str, Any]]:
    """The whole answer for the filters of FILTERS."""
    if kind == "campaigns":
        return campaign_events(1, ("open", "click"), without_captcha=True)
    return employee_events(7)


@pytest.mark.parametrize("kind", KINDS)
async def test_whole_array_without_paging_and_success_headers(
    client: TestClient, kind: str
) -> None:
    """No paging parameter: the whole array, JSON headers, an ETag, no page headers."""
    resp, body = await fetch(client, kind, OWN_ID[kind], FILTERS[kind])
    assert_same(body, filtered(kind))
    assert resp.headers["Content-Type"] == "application/json; charset=utf-8"
    assert resp.headers["ETag"]
    assert not set(PAGE_HEADERS) & set(resp.headers)


def parse_links(header: str) -> dict[str, URL]:
    """The rel -> target map of an RFC 8288 Link header."""
    return {rel: URL(target) for target, rel in re.findall(r'<([^>]*)>;\s*rel="([^"]+)"', header)}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("per_page", [1, 5, 7, 500])
async def test_pages_concatenate_with_headers_and_links(
    client: TestClient, kind: str, per_page: int
) -> None:
    """Pages tile the list; headers and every Link (filters kept) are right."""
    whole = filtered(kind)
    pages = math.ceil(len(whole) / per_page)
    got: list[Any] = []
    for page in range(1, pages + 2):
        params = [*FILTERS[kind], ("per_page", str(per_page)), ("page", str(page))]
        resp, body = await fetch(client, kind, OWN_ID[kind], params)
        assert resp.status == 200
        assert_same(body, whole[(page - 1) * per_page : page * per_page])
        got += body
        numbers = [resp.headers.get(h) for h in PAGE_HEADERS[:4]]
        assert numbers == [str(n) for n in (len(whole), page, per_page, pages)]
        links = parse_links(resp.headers["Link"])
        wanted = {"first": 1, "last": pages} | ({"prev": min(page - 1, pages)} if page > 1 else {})
        wanted |= {"next": page + 1} if page < pages else {}
        assert {rel: int(url.query["page"]) for rel, url in links.items()} == wanted
        if page in (1, pages // 2 + 1, pages, pages + 1):
            for url in links.values():
                assert url.path == f"{API}/{kind}/{OWN_ID[kind]}/events"
                rest = sorted((k, v) for k, v in url.query.items() if k != "page")
                assert rest == sorted([*FILTERS[kind], ("per_page", str(per_page))])
                target = int(url.query["page"])
                followed = await client.get(url, headers={"X-API-KEY": KEY_1})
                wanted_page = whole[(target - 1) * per_page : target * per_page]
                assert_same(await followed.json(), wanted_page)
    assert_same(got, whole)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("params", [[("page", "1")], [("per_page", "3")]])
async def test_either_paging_parameter_paginates(
    client: TestClient, kind: str, params: Params
) -> None:
    """page alone or per_page alone switches pagination on, with defaults."""
    resp, body = await fetch(client, kind, OWN_ID[kind], params)
    per_page = int(params[0][1]) if params[0][0] == "per_page" else 100
    assert_same(body, expected(kind, OWN_ID[kind])[:per_page])
    assert resp.headers["X-Per-Page"] == str(per_page)
    assert resp.headers["X-Total-Count"] == str(len(expected(kind, OWN_ID[kind])))
