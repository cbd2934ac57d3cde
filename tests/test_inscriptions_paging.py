"""GET /course-inscriptions: pagination, its headers and links (contract.md 3 and 4).

Expected pages are slices of the plain-Python oracle in test_inscriptions.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from aiohttp import ClientResponse
from aiohttp.test_utils import TestClient
from yarl import URL

from app.data.listings import Paging
from app.web.pagination import page_headers

from .support.factories import KEY_1, assert_problem
from .support.inscriptions import Filters, expected, get, query_params
from .support.stores import on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

# A quoted comma, an OR list and a date bound: every link must carry all of them.
FILTERS: Filters = {
    "department": ["Research, Development", "Engineering", "Sales", "Finance"],
    "from_inscription_date": "2025-02-01",
}
LINK = re.compile(r'<([^>]*)>\s*;\s*rel="([^"]+)"')


def links(response: ClientResponse) -> dict[str, URL]:
    """The Link header (RFC 8288) as rel -> URL."""
    return {
        rel: URL(target, encoded=True) for target, rel in LINK.findall(response.headers["Link"])
    }


def filter_pairs(url: URL) -> list[tuple[str, str]]:
    """A URL's query without the paging parameters, decoded and sorted."""
    return sorted((k, v) for k, v in url.query.items() if k not in ("page", "per_page"))


async def fetch(client: TestClient, url: URL) -> ClientResponse:
    """Follow a link with the client, as an API user would."""
    assert not url.absolute or url.host == client.host, url
    return await client.get(url.relative() if url.absolute else url, headers={"X-API-KEY": KEY_1})


@pytest.mark.parametrize("per_page", [1, 7, 25, 500])
async def test_following_next_concatenates_to_whole_list(client: TestClient, per_page: int) -> None:
    """Pages joined in order are exactly the filtered list, whatever the page size."""
    want = expected(1, FILTERS)
    assert len(want) > 25
    response = await get(client, [*query_params(FILTERS), ("per_page", str(per_page))])
    seen: list[Any] = []
    pages = 0
    while True:
        assert response.status == 200
        pages += 1
        seen.extend(await response.json())
        following = links(response)
        if "next" not in following:
            break
        response = await fetch(client, following["next"])
    assert seen == want
    assert pages == math.ceil(len(want) / per_page)


def page_numbers(page: int, total_pages: int) -> dict[str, int]:
    """Which rels a page must link to, and the page each one names."""
    rels = {"first": 1, "last": total_pages}
    if page > 1:
        rels["prev"] = page - 1
    if page < total_pages:
        rels["next"] = page + 1
    return rels


@pytest.mark.parametrize("where", ["first", "middle", "last", "past-the-end"])
async def test_headers_and_links_on_each_kind_of_page(client: TestClient, where: str) -> None:
    """X-Total-Count, X-Page, X-Per-Page, X-Total-Pages and Link, every link followed."""
    want = expected(1, FILTERS)
    per_page = 7
    total_pages = math.ceil(len(want) / per_page)
    assert total_pages >= 4
    page = {"first": 1, "middle": 2, "last": total_pages, "past-the-end": total_pages + 1}[where]
    request = [*query_params(FILTERS), ("page", str(page)), ("per_page", str(per_page))]
    response = await get(client, request)
    assert response.status == 200
    assert await response.json() == want[(page - 1) * per_page : page * per_page]
    assert response.headers["X-Total-Count"] == str(len(want))
    assert response.headers["X-Page"] == str(page)
    assert response.headers["X-Per-Page"] == str(per_page)
    assert response.headers["X-Total-Pages"] == str(total_pages)
    found = links(response)
    numbers = page_numbers(page, total_pages)
    assert set(found) == set(numbers)
    for rel, target in found.items():
        assert filter_pairs(target) == sorted(query_params(FILTERS)), rel
        followed = await fetch(client, target)
        assert followed.status == 200
        assert followed.headers["X-Page"] == str(numbers[rel]), rel
        assert followed.headers["X-Per-Page"] == str(per_page), rel
        number = numbers[rel]
        assert await followed.json() == want[(number - 1) * per_page : number * per_page], rel


async def test_defaults_are_page_one_of_one_hundred(client: TestClient) -> None:
    """Without page or per_page the endpoint still paginates (contract.md 3, 4)."""
    response = await get(client, [])
    assert response.status == 200
    total = len(expected(1))
    assert response.headers["X-Page"] == "1"
    assert response.headers["X-Per-Page"] == "100"
    assert response.headers["X-Total-Count"] == str(total)
    assert response.headers["X-Total-Pages"] == str(math.ceil(total / 100))
    assert set(links(response)) == {"first", "last"}


async def test_filter_with_page_two_of_twenty_five(client: TestClient) -> None:
    """reporting-api.md 4.3 rule 1: a department filter, per_page 25 and page 2."""
    filters = {"department": ["Engineering", "Sales"]}
    want = expected(1, filters)
    assert 25 < len(want) < 50
    response = await get(client, [*query_params(filters), ("per_page", "25"), ("page", "2")])
    assert response.status == 200
    assert await response.json() == want[25:]


async def test_far_past_the_end_and_empty_results(client: TestClient) -> None:
    """A page far beyond the last is 200 []; a filter matching nothing counts 0."""
    response = await get(client, [("page", "999"), ("per_page", "500")])
    assert response.status == 200
    assert await response.json() == []
    assert response.headers["X-Total-Count"] == str(len(expected(1)))
    assert response.headers["X-Page"] == "999"
    assert "next" not in links(response)
    response = await get(client, [("filter[name]", "Nobody")])
    assert response.status == 200
    assert await response.json() == []
    assert response.headers["X-Total-Count"] == "0"
    assert "next" not in links(response) and "prev" not in links(response)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ([("page", "0")], "page"),
        ([("page", "-1")], "page"),
        ([("page", "1.5")], "page"),
        ([("page", "abc")], "page"),
        ([("per_page", "0")], "per_page"),
        ([("per_page", "501")], "per_page"),
        ([("per_page", "abc")], "per_page"),
        ([("per_page", "")], "per_page"),
        ([("page", "1"), ("page", "2")], "page"),
        ([("per_page", "5"), ("per_page", "5")], "per_page"),
    ],
)
async def test_bad_paging_parameter_is_400(
    client: TestClient, params: list[tuple[str, str]], name: str
) -> None:
    """page >= 1, per_page 1..500, each given once; else 400 naming it (contract.md 3)."""
    body = await assert_problem(await get(client, params), 400)
    assert list(body["errors"]) == [name]


def test_a_pages_headers_are_built_once_for_its_total() -> None:
    """Clients ask for the same pages again: a page's headers are built once for its
    total and shared read-only; another total gives its own."""
    path, query = "/api/companies/v1/course-inscriptions", "filter%5Bcountry%5D=Chile&page=2"
    first = page_headers(path, query, Paging(2, 10), 95)
    assert page_headers(path, query, Paging(2, 10), 95) is first
    grown = page_headers(path, query, Paging(2, 10), 105)
    assert (first["X-Total-Pages"], grown["X-Total-Pages"]) == ("10", "11")
    assert grown["X-Total-Count"] == "105" and 'page=11>; rel="last"' in grown["Link"]
    with pytest.raises(TypeError):
        first["X-Page"] = "3"  # type: ignore[index]


def test_a_long_urls_page_headers_are_not_remembered() -> None:
    """A Link repeats the query string up to four times: the headers of a long one are
    built for each request, so the cache's entries stay small whatever clients send."""
    path, query = "/api/companies/v1/victimsapi", "filter%5Bdepartment%5D=" + "a" * 3000
    assert page_headers(path, query, Paging(2, 1), 9) is not page_headers(
        path, query, Paging(2, 1), 9
    )
    assert page_headers(path, query, Paging(2, 1), 9) == page_headers(path, query, Paging(2, 1), 9)
