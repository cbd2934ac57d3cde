"""Caching and compression of the documentation (contract.md 7 and 8; issue 12 item 6).

docs/interface.md says every 200 under /api/ has an ETag: the OpenAPI document, the Swagger UI
page and its assets too. If-None-Match gives 304; text over 1 KiB is gzipped for clients
that accept it, with `Vary: Accept-Encoding`; the tag changes when the bytes do.
"""

from __future__ import annotations

import gzip
import re

import pytest
from aiohttp.test_utils import TestClient

from .support.clients import MakeClient, get_raw

SPEC = "/api/docs/openapi.json"
PAGE = "/api/docs"


async def docs_urls(client: TestClient) -> list[str]:
    """The page, the document and every asset the page loads."""
    page = await (await client.get(PAGE)).text()
    assets = re.findall(r'(?:src|href)="(/api/docs/[^"]+)"', page)
    assert any(a.endswith(".js") for a in assets) and any(a.endswith(".css") for a in assets)
    return [PAGE, SPEC, *assets]


async def test_every_docs_answer_has_an_etag_and_revalidates(client: TestClient) -> None:
    for url in await docs_urls(client):
        response, body = await get_raw(client, url, **{"Accept-Encoding": "identity"})
        assert response.status == 200, url
        etag = response.headers["ETag"]
        assert re.fullmatch(r'W/"[0-9a-f]+"', etag), (url, etag)
        assert "Accept-Encoding" in response.headers.getall("Vary"), url
        again, empty = await get_raw(client, url, **{"If-None-Match": etag})
        assert (again.status, empty, again.headers["ETag"]) == (304, b"", etag), url
        stale = {"If-None-Match": 'W/"other"', "Accept-Encoding": "identity"}
        other, body_again = await get_raw(client, url, **stale)
        assert other.status == 200 and body_again == body, url
        head = await client.head(url)
        assert head.status == 200 and head.headers["ETag"] == etag, url


@pytest.mark.parametrize("url", [SPEC, "/api/docs/static/swagger-ui-bundle.js"])
async def test_text_is_gzipped_when_accepted(client: TestClient, url: str) -> None:
    plain, plain_body = await get_raw(client, url, **{"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in plain.headers and len(plain_body) > 1024
    packed, packed_body = await get_raw(client, url, **{"Accept-Encoding": "gzip, deflate"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed_body) == plain_body
    assert len(packed_body) < len(plain_body) / 2
    assert packed.headers["ETag"] == plain.headers["ETag"]  # weak: the same representation
    assert packed.headers["Content-Type"] == plain.headers["Content-Type"]


async def test_every_text_asset_over_1_kib_is_gzipped(client: TestClient) -> None:
    for url in await docs_urls(client):
        plain, body = await get_raw(client, url, **{"Accept-Encoding": "identity"})
        packed, _ = await get_raw(client, url, **{"Accept-Encoding": "gzip"})
        textual = plain.content_type.startswith(("text/", "application/json"))
        want = "gzip" if textual and len(body) > 1024 else None
        assert packed.headers.get("Content-Encoding") == want, (url, plain.content_type)


async def test_the_document_tag_follows_its_bytes(make_client: MakeClient) -> None:
    """The document states the rate limit, so a different limit is a different tag."""
    first = await make_client(rate_burst=7)
    second = await make_client(rate_burst=7)
    third = await make_client(rate_burst=8)
    tags = [(await c.get(SPEC)).headers["ETag"] for c in (first, second, third)]
    assert tags[0] == tags[1] != tags[2]
