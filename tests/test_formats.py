"""JSON, CSV and NDJSON for every listing (contract.md 14).

The format comes from ``format=`` or else ``Accept`` (q-values, wildcards, 406 when none
fits); NDJSON is the JSON array's records one a line; CSV is RFC 4180 with dotted
columns, one row per section, ``groups`` joined, null empty and formula-looking cells
neutralised, as an attachment. ETags differ per format, ``Vary: Accept`` is sent, gzip
and pagination headers apply to every format, and long unpaginated arrays stream in
each. Every listing the OpenAPI document lists is checked: CSV and NDJSON are parsed
back and compared with the JSON answer, through a flattening written here from the
contract's words. The tests that look at data run on both stores (contract.md 15: the
same bytes in every format); negotiation depends on no store and runs on SQLite.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict
from yarl import URL

from app.config import Config
from app.data import events
from app.keys import CALLER
from app.main import api_app, create_app
from app.web.access import ROUTE_SCOPES
from app.web.csv_layout import FORMULA_MARKS, has_formula_mark, layout_of
from app.web.responder import respond_record
from app.web.schemas import CampaignEventSchema

from .support.clients import MakeClient, ProblemTestServer
from .support.factories import (
    API,
    KEY_1,
    KEY_2,
    KEYS,
    assert_problem,
    by_id,
    generated_events,
    get,
    next_event_id,
    sample,
)
from .support.stores import EACH_STORE, Store

STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

SPEC = "/api/docs/openapi.json"
CSV_TYPE = "text/csv; charset=utf-8"
NDJSON_TYPE = "application/x-ndjson; charset=utf-8"
JSON_TYPE = "application/json; charset=utf-8"
IDS = {"campaigns": 1, "victimsapi": 7}  # a campaign and an employee of company 1
FORMULA = ("=", "+", "-", "@", "\t", "\r")


async def listings(client: TestClient) -> list[str]:
    """A company-1 URL of every listing the document gives a CSV body, whole when it can be."""
    document = await (await client.get(SPEC)).json()
    urls = []
    for path, item in document["paths"].items():
        ok = item["get"]["responses"]["200"]
        if "text/csv" not in ok.get("content", {}) or path.startswith("/api/partners/"):
            continue  # the partners' rollup: a partner key's (tests/test_access.py)
        if "{id}" in path and path.split("/")[-3] not in IDS:
            continue  # a webhook's deliveries: the sample holds no subscription
        names = {p["name"] for p in item["get"]["parameters"] if p.get("in") == "query"}
        url = URL(path.replace("{id}", str(IDS[path.split("/")[-3]])) if "{id}" in path else path)
        if "per_page" in names:
            url = url.update_query(per_page=500)
        if "limit" in names:
            url = url.update_query(limit=1000)
        urls.append(str(url))
    assert len(urls) >= 4, urls
    return urls


def is_rows(value: Any) -> bool:
    """A list of objects with more than one field: one CSV row per element."""
    return isinstance(value, list) and any(isinstance(v, dict) and len(v) > 1 for v in value)


def header_of(record: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted column names in the record's key order (element lists: their first element)."""
    names = []
    for key, value in record.items():
        if isinstance(value, dict):
            names += header_of(value, f"{prefix}{key}.")
        elif is_rows(value):
            names += header_of(value[0], f"{prefix}{key}.")
        else:
            names.append(f"{prefix}{key}")
    return names


def in_json(record: dict[str, Any], column: str) -> bool:
    """Whether a CSV column is one of the JSON record's (not an id only the export adds)."""
    value: Any = record
    for key in column.split("."):
        if isinstance(value, list):
            return True  # a column of the list's elements, which the record holds
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    return True


def rows_of(record: dict[str, Any], header: list[str]) -> list[list[str]]:
    """contract.md 14 in plain words: a row per element of the record's list of objects
    (one row with those cells empty when it is empty), the record's other cells repeated."""
    in_rows = {name.split(".")[0] for name in header if "." in name}
    lists = [record[key] for key in in_rows if isinstance(record.get(key), list)]
    elements = lists[0] if lists else []
    return [[cell(record, element, name) for name in header] for element in elements or [None]]


def cell(record: dict[str, Any], element: Any, column: str) -> str:
    """One cell: follow the dotted name; a list of strings or of one-field objects joins
    its values."""
    value: Any = record
    for key in column.split("."):
        if isinstance(value, list):  # the list of objects: this row's element
            if element is None:
                return ""
            value = element
        value = value[key]
    if isinstance(value, list):
        value = "; ".join(str(*i.values()) if isinstance(i, dict) else str(i) for i in value)
    return neutral(text(value))


def text(value: Any) -> str:
    """A JSON scalar as its cell: null empty, booleans as in JSON, numbers as JSON writes them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def neutral(cell: str) -> str:
    return "'" + cell if cell.startswith(FORMULA) else cell


def parse_csv(body: bytes) -> list[list[str]]:
    """RFC 4180 read back: every line ends with CRLF, the csv module reads the cells."""
    assert body.endswith(b"\r\n")
    return list(csv.reader(io.StringIO(body.decode("utf-8"), newline=""), strict=True))


async def assert_formats_agree(client: TestClient, url: str, key: str = KEY_1) -> Any:
    """The CSV and the NDJSON answers of ``url`` say what its JSON answer says."""
    as_json = await get(client, url, key)
    assert as_json.status == 200, await as_json.text()
    assert as_json.headers["Content-Type"] == JSON_TYPE
    records = await as_json.json()
    as_csv = await get(client, str(URL(url).update_query(format="csv")), key)
    assert as_csv.status == 200, await as_csv.text()
    assert as_csv.headers["Content-Type"] == CSV_TYPE
    resource = URL(url).path.removeprefix(f"{API}/").replace("/", "-")
    disposition = f'attachment; filename="{resource}.csv"'
    assert as_csv.headers["Content-Disposition"] == disposition
    table = parse_csv(await as_csv.read())
    # The JSON's columns say what the JSON says; the ids only an export adds, see below.
    mine = [i for i, name in enumerate(table[0]) if not records or in_json(records[0], name)]
    json_table = [[row[i] for i in mine] for row in table]
    assert json_table[1:] == [row for r in records for row in rows_of(r, json_table[0])]
    full = [r for r in records if all(v != [] for v in r.values() if isinstance(v, list))]
    if full:
        assert json_table[0] == header_of(full[0])
    as_ndjson = await get(client, url, key, Accept="application/x-ndjson")
    assert as_ndjson.headers["Content-Type"] == NDJSON_TYPE
    lines = (await as_ndjson.read()).split(b"\n")
    assert lines[-1] == b""  # a newline after each record, nothing else
    assert [json.loads(line) for line in lines[:-1]] == records
    for name in ("X-Total-Count", "X-Page", "X-Total-Pages", "X-Next-Cursor"):
        assert as_csv.headers.get(name) == as_json.headers.get(name)
        assert as_ndjson.headers.get(name) == as_json.headers.get(name)
    return records


@EACH_STORE
@pytest.mark.parametrize("key", [KEY_1, KEY_2])
async def test_every_listing_in_csv_and_ndjson_says_what_its_json_says(
    client: TestClient, key: str
) -> None:
    for url in await listings(client):
        if key == KEY_2 and "{" not in url and any(f"/{k}/" in url for k in IDS):
            continue  # the ids picked are company 1's
        await assert_formats_agree(client, url, key)


@EACH_STORE
async def test_paged_csv_keeps_the_format_in_its_links(client: TestClient) -> None:
    url = f"{API}/course-inscriptions?per_page=3&page=2&format=csv"
    response = await get(client, url)
    assert response.headers["X-Total-Count"]
    for link in response.headers["Link"].split(", "):
        assert "format=csv" in link
    table = parse_csv(await response.read())
    assert len({tuple(row[:9]) for row in table[1:]}) == 3  # 3 inscriptions, a row per section


async def test_csv_needs_nothing_from_the_docs_set_up(aiohttp_client: Any, sample_db: Path) -> None:
    """Each listing view gives its own record schema: an app without the docs serves CSV."""
    app = api_app(Config(db=str(sample_db), rate_burst=10**6, rate_per_second=1e6))
    client = await aiohttp_client(ProblemTestServer(app))
    assert (await client.get(SPEC)).status == 404  # no docs set up here
    urls = [
        f"{API}/campaigns/1/events",
        f"{API}/campaigns/1/events?per_page=500",
        f"{API}/victimsapi/7/events",
        f"{API}/course-inscriptions?per_page=500",
        f"{API}/events?limit=1000",
        f"{API}/campaigns?per_page=500",
        f"{API}/victimsapi?per_page=500",
        f"{API}/courses?per_page=500",
    ]
    for url in urls:
        assert await assert_formats_agree(client, url), url
    as_csv = await get(client, f"{API}/campaigns/1/events?format=csv")
    header = "id,type,timestamp,campaign.id,campaign.title,campaign.launch_date,victim.id,"
    header += "victim.first_name,victim.last_name,victim.email,victim.department\r\n"
    assert (await as_csv.read()).startswith(header.encode())


async def csv_rows(client: TestClient, url: str) -> list[dict[str, str]]:
    """A CSV answer's rows by column name."""
    response = await get(client, url)
    assert response.status == 200, await response.text()
    return list(csv.DictReader(io.StringIO((await response.read()).decode(), newline="")))


@EACH_STORE
async def test_exports_carry_the_ids_that_merge_them(client: TestClient) -> None:
    """A campaign's events name their campaign, an employee's events their employee, and
    every inscription row its inscription, employee and course: merged exports stay apart
    and deduplicate by those ids. The JSON records stay as they were."""
    titles = {c["id"]: c["title"] for c in by_id("campaigns").values()}
    seen: list[str] = []
    for campaign in (1, 2):
        rows = await csv_rows(client, f"{API}/campaigns/{campaign}/events?format=csv")
        assert {(r["campaign.id"], r["campaign.title"]) for r in rows} == {
            (str(campaign), titles[campaign])
        }
        seen += [r["id"] for r in rows]
    assert len(seen) == len(set(seen))  # event ids alone deduplicate merged event exports
    rows = await csv_rows(client, f"{API}/victimsapi/7/events?format=csv")
    assert rows and {r["victim.id"] for r in rows} == {"7"}
    assert all(titles[int(r["campaign.id"])] == r["campaign.title"] for r in rows)
    rows = await csv_rows(client, f"{API}/course-inscriptions?per_page=500&format=csv")
    employees = by_id("employees")
    expected = {
        (str(i["id"]), str(i["employee_id"]), str(i["course_id"]))
        for i in sample()["inscriptions"]
        if employees[i["employee_id"]]["company_id"] == 1
    }
    assert {(r["id"], r["victim_id"], r["course_id"]) for r in rows} == expected
    for url, absent in [
        (f"{API}/campaigns/1/events", "campaign"),
        (f"{API}/victimsapi/7/events", "victim"),
        (f"{API}/course-inscriptions", "course_id"),
    ]:
        records = await (await get(client, url)).json()
        assert records and all(absent not in r for r in records), url


@EACH_STORE
@pytest.mark.parametrize("path", ["campaigns/1", "victimsapi/7"])
@pytest.mark.parametrize("asked", [{"format": "csv"}, {"format": "NDJSON"}, {"Accept": "text/csv"}])
async def test_one_object_is_json_only_and_points_to_its_list(
    client: TestClient, path: str, asked: dict[str, str]
) -> None:
    query = f"?format={asked['format']}" if "format" in asked else ""
    response = await get(
        client, f"{API}/{path}{query}", **{k: v for k, v in asked.items() if k != "format"}
    )
    body = await assert_problem(response, 406)
    listing = f"{API}/{path.split('/')[0]}"
    assert "one object, in JSON only" in body["detail"] and f"the list {listing} " in body["detail"]
    assert (await get(client, f"{API}/{path}?format=json")).status == 200


@pytest.fixture
async def tricky_client(tmp_path: Path, store: Store, make_client: MakeClient) -> TestClient:
    """The sample plus values a spreadsheet would run, and a course without sections."""
    names = ["=SUM(A1)", "+1", "-2", "@me", "\tTab", "\rCR", 'say "hi", -x', "a=b"]
    people = [
        {"id": 900 + n, "company_id": 1, "first_name": name, "last_name": names[-1 - n]}
        | {"email": f"p{n}@example.com", "department": names[(n + 1) % 8], "country": name}
        for n, name in enumerate(names)
    ]
    document = {
        "employees": people,
        "teams": [{"id": 900, "company_id": 1, "name": "=cmd|' /C calc'!A0"}],
        "team_members": [{"team_id": 900, "employee_id": p["id"]} for p in people],
        "campaigns": [
            {"id": 900, "company_id": 1, "title": "@SUM(1)", "launch_date": "2026-03-01T08:00:00Z"}
        ],
        "campaign_events": [
            {"id": 9000 + n, "campaign_id": 900, "employee_id": p["id"], "type": "click"}
            | {"timestamp": "2026-03-02T09:00:00Z", "with_captcha": n % 2 == 0}
            for n, p in enumerate(people)
        ],
        "courses": [{"id": 900, "company_id": 1, "title": "-Empty course"}],
        "inscriptions": [
            {"id": 9000 + n, "employee_id": p["id"], "course_id": 900}
            | {"start_date": "2026-03-01", "due_date": None, "status": "not_started"}
            for n, p in enumerate(people)
        ],
    }
    fixture = tmp_path / "tricky.json"
    fixture.write_text(json.dumps(document), encoding="utf-8")
    await store.load([fixture])
    return await make_client()


@EACH_STORE
@pytest.mark.writes
async def test_formula_cells_are_neutralised(tricky_client: TestClient) -> None:
    client = tricky_client
    for url in await listings(client):
        await assert_formats_agree(client, url.replace("/campaigns/1/", "/campaigns/900/"))
    response = await get(client, f"{API}/events?format=csv&limit=1000")
    table = parse_csv(await response.read())
    cells = {cell for row in table for cell in row}
    assert {"'=SUM(A1)", "'+1", "'-2", "'@me", "'\tTab", "'\rCR", "'@SUM(1)"} <= cells
    assert {'say "hi", -x', "a=b", "true", "false"} <= cells
    for path in ("campaigns/900/events", "victimsapi/900/events"):  # the exports' own columns
        rows = await csv_rows(client, f"{API}/{path}?format=csv")
        assert rows and {r["campaign.title"] for r in rows} == {"'@SUM(1)"}, path
    inscriptions = await get(
        client, f"{API}/course-inscriptions?filter[courses]=-Empty course&format=csv"
    )
    table = parse_csv(await inscriptions.read())
    assert len(table) == 1 + 8  # no sections: one row each, the section cells empty
    assert all(row[-5:] == [""] * 5 for row in table[1:])
    groups = table[0].index("groups")
    assert {row[groups] for row in table[1:]} == {"'=cmd|' /C calc'!A0"}


@EACH_STORE
@pytest.mark.writes
async def test_long_arrays_stream_in_every_format(
    tmp_path: Path, store: Store, make_client: MakeClient
) -> None:
    """Past the inline size the events arrays stream: chunked, gzip when accepted, same data."""
    fixture = tmp_path / "more.json"
    events = generated_events(5000, [1], next_event_id())
    fixture.write_text(json.dumps({"campaign_events": events}), encoding="utf-8")
    await store.load([fixture])
    client = await make_client()
    records = await assert_formats_agree(client, f"{API}/campaigns/1/events")
    assert len(records) > 5000
    for fmt in ("json", "csv", "ndjson"):
        url = f"{API}/campaigns/1/events?format={fmt}"
        plain = await get(client, url)
        assert plain.headers["Transfer-Encoding"] == "chunked", fmt
        zipped = await get(client, url, **{"Accept-Encoding": "gzip"})
        assert zipped.headers["Content-Encoding"] == "gzip", fmt
        assert await zipped.read() == await plain.read()


ACCEPTS = [
    (None, JSON_TYPE),
    ("", JSON_TYPE),
    ("*/*", JSON_TYPE),
    ("application/json", JSON_TYPE),
    ("text/csv", CSV_TYPE),
    ("application/x-ndjson", NDJSON_TYPE),
    ("TEXT/CSV; charset=utf-8", CSV_TYPE),
    ("text/*", CSV_TYPE),
    ("application/*", JSON_TYPE),
    ("text/csv;q=0.5, application/x-ndjson", NDJSON_TYPE),
    ("application/json;q=0, */*", CSV_TYPE),
    ("text/html, */*;q=0.1", JSON_TYPE),
    ("text/csv, application/json", CSV_TYPE),
    ("application/json, text/csv", JSON_TYPE),
    ("text/*, application/json", JSON_TYPE),  # a tie: the type named by its own range
    ("*/*, text/csv", CSV_TYPE),
    ("text/html, application/x-ndjson;q=0.2, text/csv;q=0.1", NDJSON_TYPE),
    ("application/x-ndjson;q=1.0, application/json;q=0.9", NDJSON_TYPE),
    ("text/csv;q=abc", JSON_TYPE),  # nothing readable: as if absent
]


@pytest.mark.parametrize(("accept", "content_type"), ACCEPTS)
async def test_accept_chooses_the_format(
    client: TestClient, accept: str | None, content_type: str
) -> None:
    headers = {} if accept is None else {"Accept": accept}
    response = await get(client, f"{API}/course-inscriptions", **headers)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"] == content_type


@pytest.mark.parametrize(
    ("lines", "content_type"),
    [
        (("application/xml", "text/csv"), CSV_TYPE),  # the first line alone allows nothing
        (("text/csv;q=0.1", "application/json"), JSON_TYPE),
        (("application/json;q=0", "application/x-ndjson"), NDJSON_TYPE),
        (("text/csv", "application/json"), CSV_TYPE),  # a tie: the range listed first
    ],
)
async def test_accept_on_several_lines_is_one_list(
    client: TestClient, lines: tuple[str, ...], content_type: str
) -> None:
    """RFC 9110 5.3: Accept sent on several lines is read as if joined by commas, and the
    answer kept in memory for the first line alone is not given to the whole list."""
    url = f"{API}/course-inscriptions?per_page=1"
    first = await get(client, url, Accept=lines[0])  # kept in memory, if it is a 200
    pairs = [("X-API-KEY", KEY_1), *(("Accept", line) for line in lines)]
    for _ in range(2):  # the view's answer, then the one kept for these lines
        response = await client.get(url, headers=CIMultiDict(pairs))
        await response.read()
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"] == content_type
        assert response.headers["Vary"] == "Accept, Accept-Encoding"
    if first.status == 200 and first.headers["Content-Type"] != content_type:
        assert first.headers["ETag"] != response.headers["ETag"]


@pytest.mark.parametrize(
    "accept",
    ["text/html", "image/png, application/xml", "*/*;q=0", "text/csv;q=0, text/*", "text/plain"],
)
async def test_an_accept_that_allows_no_format_is_406(client: TestClient, accept: str) -> None:
    for url in await listings(client):
        body = await assert_problem(await get(client, url, Accept=accept), 406)
        assert "application/json" in body["detail"]


async def test_format_wins_over_accept(client: TestClient) -> None:
    for fmt, content_type in (("csv", CSV_TYPE), ("NDJSON", NDJSON_TYPE), ("json", JSON_TYPE)):
        url = f"{API}/victimsapi/7/events?format={fmt}"
        response = await get(client, url, Accept="text/html")
        assert response.headers["Content-Type"] == content_type


async def test_etag_per_format_and_vary(client: TestClient) -> None:
    url = f"{API}/course-inscriptions?per_page=5"
    tags = {}
    for accept in ("application/json", "text/csv", "application/x-ndjson"):
        response = await get(client, url, Accept=accept)
        assert response.headers["Vary"] == "Accept, Accept-Encoding"
        tags[accept] = response.headers["ETag"]
        again = await get(client, url, Accept=accept, **{"If-None-Match": tags[accept]})
        assert again.status == 304 and again.headers["Vary"] == "Accept, Accept-Encoding"
    assert len(set(tags.values())) == 3
    other = await get(client, url, Accept="text/csv", **{"If-None-Match": tags["application/json"]})
    assert other.status == 200 and other.headers["Content-Type"] == CSV_TYPE
    named = await get(client, f"{url}&format=csv")
    assert named.headers["ETag"] not in tags.values()  # another URL: another validator


async def test_single_object_answers_are_json_only(
    aiohttp_client: Any, sample_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """respond_record (the one-object answers) offers JSON alone: text/csv only is 406.

    The record routes come with the discovery endpoints; here a route of this test answers
    through the same responder with a real one-record listing (an employee's only event).
    """
    counts = Counter(e["employee_id"] for e in sample()["campaign_events"])
    owner = {e["id"]: e["company_id"] for e in sample()["employees"]}
    employee = next(i for i, n in sorted(counts.items()) if n == 1)
    key = KEYS[owner[employee]]
    app = create_app(Config(db=str(sample_db), rate_burst=10**6, rate_per_second=1e6))

    async def only_event(request: web.Request) -> web.StreamResponse:
        listing = events.employee_listing(request[CALLER].company_id, employee)
        return await respond_record(request, listing)

    app.router.add_get(f"{API}/test-record", only_event)
    monkeypatch.setitem(ROUTE_SCOPES, f"{API}/test-record", "events:read")  # its scope
    client = await aiohttp_client(ProblemTestServer(app))
    url = f"{API}/test-record"
    for accept in (None, "*/*", "application/json", "text/csv;q=0.9, application/json;q=0.1"):
        response = await get(client, url, key, **({} if accept is None else {"Accept": accept}))
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"] == JSON_TYPE
        assert isinstance(await response.json(), dict)
        assert response.headers["Vary"] == "Accept, Accept-Encoding"
    for accept in ("text/csv", "application/x-ndjson", "text/*"):
        await assert_problem(await get(client, url, key, Accept=accept), 406)
    await assert_problem(await get(client, f"{url}?format=csv", key), 406)


@pytest.mark.parametrize("value", ["=1+2", "+1", "-x", "@me", "\tTab", "\rCR", -5])
def test_each_formula_start_is_caught_alone(value: Any) -> None:
    """A chunk whose only formula-looking cell starts with ``value``'s first character.

    The CSV encoder looks at cells only when the chunk's JSON text holds a mark of one; a
    chunk holding just this one must still be caught. The text is JSON as SQLite writes it.
    """
    victim = {"id": 2, "first_name": "Ana", "last_name": "Núñez", "email": "a@example.com"}
    record = {"id": 1, "type": "open", "timestamp": "2026-03-01T08:00:00Z"}
    if isinstance(value, str):
        record["victim"] = victim | {"department": value}
    else:
        record |= {"id": value, "victim": victim | {"department": "Sales"}}
    text = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()
    [header, row] = parse_csv(layout_of(CampaignEventSchema).header() + encode_one(text))
    cells = dict(zip(header, row, strict=True))
    assert cells["victim.department" if isinstance(value, str) else "id"] == f"'{value}"


def encode_one(text: bytes) -> bytes:
    return layout_of(CampaignEventSchema).encode([text], True)


@settings(max_examples=300)
@given(st.binary(max_size=40) | st.text(alphabet='"=+-@\\:aZ0\0', max_size=40).map(str.encode))
def test_the_mark_search_finds_exactly_the_formula_marks(chunk: bytes) -> None:
    """The two searches of the translated chunk say what a search for each mark says.

    JSON text holds no raw NUL (the byte the marks become); with one, only more chunks
    get the exact look at their cells, never fewer.
    """
    expected = any(mark in chunk for mark in FORMULA_MARKS)
    if b"\0" in chunk:
        assert has_formula_mark(chunk) >= expected
    else:
        assert has_formula_mark(chunk) == expected
