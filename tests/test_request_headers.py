"""Hostile request headers (the request-header rules of docs/interface.md and docs/operations.md).

contract.md 2: exactly one X-API-KEY (two are 400, checked where the 401 would be),
trimmed of HTTP whitespace only. contract.md 6: the client address comes from every
X-Forwarded-For line in order, and the failed-authentication gate counts an IPv6 client
per /64. contract.md 4: a Link target is percent-encoded, so no filter value can add a
link or a rel. contract.md 7: gzip only when Accept-Encoding gives it a q-value above 0;
Accept bytes that are not UTF-8 are a range like any other.
Every attack goes through the real app over a real socket.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from multidict import CIMultiDict
from requests.utils import parse_header_links

from app.web.bodies import coding_weights
from app.web.clients import address_key

from .support.clients import MakeClient, raw_request
from .support.factories import API, KEY_1, KEY_2, assert_problem, get

CAMPAIGN = f"{API}/campaigns/1/events"  # company 1, 71 events: well over 1 KiB
INSCRIPTIONS = f"{API}/course-inscriptions"


async def raw_get(client: TestClient, target: str, *lines: str) -> tuple[int, dict[str, str]]:
    """GET ``target`` exactly as written, with header ``lines`` as bytes; status, headers."""
    reader, writer = await asyncio.open_connection(client.server.host, client.server.port)
    try:
        head = "".join(f"{line}\r\n" for line in ("Host: x", *lines, "Connection: close"))
        writer.write(f"GET {target} HTTP/1.1\r\n{head}\r\n".encode())
        data = await reader.read()
    finally:
        writer.close()
    status_line, *rest = data.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in rest)}
    return int(status_line.split()[1]), headers


async def get_lines(
    client: TestClient, path: str, *pairs: tuple[str, str]
) -> aiohttp.ClientResponse:
    """GET with headers that may repeat (each pair its own line), body read."""
    response = await client.get(path, headers=CIMultiDict(pairs))
    await response.read()
    return response


# ---- X-API-KEY: exactly one, trimmed of HTTP whitespace only --------------------------


@pytest.mark.parametrize("second", [KEY_1, KEY_2, "", "rk_not_a_key"])
async def test_two_api_keys_are_400(client: TestClient, second: str) -> None:
    """A proxy that appends its key must not be overridden by one the client put first."""
    response = await get_lines(client, CAMPAIGN, ("X-API-KEY", KEY_1), ("X-API-KEY", second))
    problem = await assert_problem(response, 400)
    assert set(problem["errors"]) == {"X-API-KEY"}


async def test_the_two_key_400_sits_where_the_401_would(make_client: MakeClient) -> None:
    """After 404/405 and the failed-authentication gate; spends no failure."""
    client = await make_client(auth_failures_per_minute=1)
    twice = (("X-API-KEY", KEY_1), ("X-API-KEY", KEY_2))
    assert (await get_lines(client, f"{API}/nothing-here", *twice)).status == 404
    assert (await client.post(CAMPAIGN, headers=CIMultiDict(twice))).status == 405
    for _ in range(3):
        assert (await get_lines(client, CAMPAIGN, *twice)).status == 400
    assert (await get(client, CAMPAIGN)).status == 200  # no failure was counted
    assert (await get(client, CAMPAIGN, key="rk_wrong")).status == 401
    await assert_problem(await get_lines(client, CAMPAIGN, *twice), 429)


@pytest.mark.parametrize("padding", ["\u00a0", "\u3000", "\u2003", "\u200b"])
async def test_keys_keep_unicode_spaces(client: TestClient, padding: str) -> None:
    """Only space and tab are trimmed; any other space makes the key a different key."""
    assert (await raw_get(client, CAMPAIGN, f"X-API-KEY: {KEY_1}{padding}"))[0] == 401
    assert (await raw_get(client, CAMPAIGN, f"X-API-KEY: {padding}{KEY_1}"))[0] == 401


async def test_keys_are_trimmed_of_spaces_and_tabs(client: TestClient) -> None:
    assert (await raw_get(client, CAMPAIGN, f"X-API-KEY: \t {KEY_1} \t"))[0] == 200


# ---- X-Forwarded-For: every line; IPv6 by /64 ----------------------------------------


async def test_every_forwarded_for_line_counts(make_client: MakeClient) -> None:
    """HAProxy appends its own line: the client's forged first line must not pick the address."""
    client = await make_client(trusted_proxies="127.0.0.1", auth_failures_per_minute=1)

    async def attempt(key: str, *lines: str) -> int:
        pairs = [("X-Forwarded-For", line) for line in lines]
        return (await get_lines(client, CAMPAIGN, ("X-API-KEY", key), *pairs)).status

    assert await attempt("rk_wrong", "198.51.100.1", "203.0.113.7") == 401
    # The same client, forging another first line, is still 203.0.113.7: gated.
    assert await attempt("rk_wrong", "198.51.100.2", "203.0.113.7") == 429
    assert await attempt(KEY_1, "198.51.100.3", "203.0.113.7") == 429
    # The address it forged was never charged: no lock-out of somebody else.
    assert await attempt(KEY_1, "198.51.100.1") == 200
    # Lines read in order, as if joined by commas: the right-most untrusted hop.
    assert await attempt(KEY_1, "203.0.113.7, 127.0.0.1", "127.0.0.1") == 429


async def test_an_ipv6_client_is_gated_by_its_64(make_client: MakeClient) -> None:
    """One host usually holds a whole /64: each /128 apart would be 2^64 budgets."""
    client = await make_client(trusted_proxies="127.0.0.1", auth_failures_per_minute=1)

    async def attempt(key: str, address: str) -> int:
        return (await get(client, CAMPAIGN, key=key, **{"X-Forwarded-For": address})).status

    assert await attempt("rk_wrong", "2001:db8:1:2::1") == 401
    assert await attempt("rk_wrong", "2001:db8:1:2:ffff:ffff:ffff:fffe") == 429
    assert await attempt(KEY_1, "2001:db8:1:2::77") == 429
    assert await attempt(KEY_1, "2001:db8:1:3::1") == 200  # the next /64
    assert await attempt(KEY_1, "192.0.2.1") == 200


def test_address_keys() -> None:
    assert address_key("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert address_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert address_key("192.0.2.1") == "192.0.2.1"
    assert address_key("unknown") == "unknown"


# ---- Link: percent-encoded targets ---------------------------------------------------

# One quoted value ("" for a quote) holding what a forged link needs: < > " , ; [ ].
HOSTILE = '"x>;rel=""first"",<http://evil.example/[a]"'
LINK_VALUE = re.compile(r'<([^<>"\s]*)>; rel="(first|last|prev|next)"')


async def test_a_filter_value_cannot_forge_a_link(client: TestClient) -> None:
    """Raw < > " in a filter value stay inside their own link target, encoded."""
    status, headers = await raw_get(
        client, f"{INSCRIPTIONS}?filter[name]={HOSTILE}&per_page=1", f"X-API-KEY: {KEY_1}"
    )
    assert status == 200
    header = headers["link"]
    links = parse_header_links(header)  # the parser of requests, as clients use it
    assert sorted(link["rel"] for link in links) == ["first", "last"]
    assert ", ".join(f'<{m[0]}>; rel="{m[1]}"' for m in LINK_VALUE.findall(header)) == header
    for link in links:
        target = urlsplit(link["url"])
        assert (target.scheme, target.netloc, target.path) == ("", "", INSCRIPTIONS)
        assert not set("[]<>\"' ") & set(link["url"])  # curl follows it without -g
        assert parse_qs(target.query)["filter[name]"] == [HOSTILE]


async def test_encoded_links_lead_to_the_same_answer(client: TestClient) -> None:
    """Encoding a target changes nothing the server reads: following it gives that page."""
    names = "Ma%C5%82gorzata,%4Darisol,Jos%C3%A9,Hen+rik"  # "Hen rik": nobody
    query = f'filter[department]="Research,%20Development",Finance&filter[name]={names}&per_page=1'
    status, headers = await raw_get(client, f"{INSCRIPTIONS}?{query}", f"X-API-KEY: {KEY_1}")
    assert status == 200
    links = {link["rel"]: link["url"] for link in parse_header_links(headers["link"])}
    total = int(headers["x-total-count"])
    assert total == 7  # 3 + 3 + 1 in the sample
    assert "%C5%82" in links["last"] and "%22Research%2C%20Development%22" in links["last"]
    following = await get(client, links["last"])
    assert following.status == 200
    assert following.headers["X-Page"] == str(total)
    assert following.headers["X-Total-Count"] == str(total)


@pytest.mark.parametrize("byte", [b"\x80", b"\xc3", b"\xff", b"\xed\xa0\x80"])
async def test_an_accept_that_is_not_utf8_is_negotiated(client: TestClient, byte: bytes) -> None:
    """A byte that is no UTF-8 in Accept is a range no format matches, not a 500; asked
    twice, as the second may be answered from memory (known answers key on Accept)."""
    for accept, status in ((b"text/csv, x/" + byte, 200), (b"text/" + byte, 406)):
        head = f"GET {CAMPAIGN} HTTP/1.1\r\nX-API-KEY: {KEY_1}\r\nAccept: ".encode() + accept
        for _ in range(2):
            answer, headers, _ = await raw_request(client, head)
            assert answer == status
        if status == 200:
            assert headers["content-type"].startswith("text/csv")


# ---- Accept-Encoding: q-values -------------------------------------------------------

ENCODINGS = {
    "gzip": True,
    "gzip;q=0": False,
    "GZIP; Q=0.000": False,
    "gzip;q=0.001": True,
    "gzip;q=1.0": True,
    "x-gzip": True,
    "*": True,
    "*;q=0": False,
    "identity": False,
    "br, *;q=0.1": True,
    "gzip;q=0, *": False,
    "gzip;q=2": False,  # not a q-value: not acceptable
    "gzip;q=abc": False,
}


@pytest.mark.parametrize(("accept", "packed"), ENCODINGS.items(), ids=ENCODINGS.keys())
async def test_gzip_follows_q_values(client: TestClient, accept: str, packed: bool) -> None:
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.get(
            client.make_url(CAMPAIGN), headers={"X-API-KEY": KEY_1, "Accept-Encoding": accept}
        ) as response,
    ):
        body = await response.read()
    assert response.status == 200
    assert (response.headers.get("Content-Encoding") == "gzip") is packed
    assert isinstance(json.loads(gzip.decompress(body) if packed else body), list)


async def test_every_accept_encoding_line_counts(client: TestClient) -> None:
    lines = (("Accept-Encoding", "identity"), ("Accept-Encoding", "gzip;q=0.5"))
    response = await get_lines(client, CAMPAIGN, ("X-API-KEY", KEY_1), *lines)
    assert response.headers.get("Content-Encoding") == "gzip"


def test_coding_weights() -> None:
    assert coding_weights(" GZip ; q=0.5 , br;level=3, *;q=0") == {"gzip": 0.5, "br": 1.0, "*": 0.0}


# ---- If-Match: compared strongly, and every ETag here is weak -------------------------


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/campaigns",  # a page
        f"{API}/campaigns/1",  # a record
        f"{CAMPAIGN}?format=csv",  # a whole array, as a file
        f"{API}/events?limit=5",  # the feed
        f"{API}/key",  # no ETag at all
    ],
)
async def test_if_match_holds_only_as_a_star(client: TestClient, path: str) -> None:
    """RFC 9110 13.1.1: If-Match is evaluated, before If-None-Match (13.2.2): even the
    answer's own tag fails it (weak), and the 412 comes before any 304."""
    first = await get(client, path)
    tag = first.headers.get("ETag", 'W/"x"')
    for tags in (tag, tag.removeprefix("W/"), f'"other", {tag}'):
        refused = await get(client, path, **{"If-Match": tags, "If-None-Match": tag})
        body = await assert_problem(refused, 412)
        assert "If-Match: *" in body["detail"]
        assert "RateLimit-Remaining" in refused.headers
    star = await get(client, path, **{"If-Match": "*"})
    assert star.status == 200 and await star.read() == await first.read()
    if "ETag" in first.headers:
        both = await get(client, path, **{"If-Match": "*", "If-None-Match": tag})
        assert both.status == 304


async def test_if_match_leaves_a_missing_record_404(client: TestClient) -> None:
    """A free id (or another company's) is 404 whatever If-Match says (13.2.1)."""
    for path in (f"{API}/campaigns/99999", f"{API}/victimsapi/99999/events"):
        await assert_problem(await get(client, path, **{"If-Match": '"x"'}), 404)
    unacceptable = await get(client, f"{API}/campaigns", **{"If-Match": '"x"', "Accept": "a/b"})
    await assert_problem(unacceptable, 406)
