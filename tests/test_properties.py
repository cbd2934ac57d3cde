"""Properties over generated data: filters, pages, tenancy, junk (contract.md 1, 2, 3, 4, 5).

Each example builds a small random dataset of two companies, with names, departments,
countries, teams and courses drawn from small alphabets full of non-ASCII and mixed-case
values ("Ärzte"/"ÄRZTE", "Straße"/"STRASSE": str.casefold makes those equal), loads it
with the real loader into a fresh database and serves it with the real app (datasets.py),
on SQLite and, with fewer examples, on PostgreSQL.
A plain-Python oracle over the same records says what each answer must hold (issue 7,
item 2).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import os
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, quote_from_bytes

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, Phase, event, given, reject, settings
from hypothesis import strategies as st
from yarl import URL

from app.web.aiohttp_shim import MAX_REQUEST_LINE

from .support.datasets import DAY0, EVENT_TYPES, FREE_ID, Data, datasets, serving
from .support.factories import (
    API,
    KEY_1,
    KEYS,
    TITLES,
    assert_problem,
    by_id,
    team_names_by_employee,
)
from .support.stores import EACH_STORE, ON_POSTGRESQL, Store

# One dataset and one served app per example, several requests each; no shrinking there
# (an example costs a database and an app), the failing dataset is printed instead.
# CI: the same counts, derandomized so that a failure reproduces.
settings.register_profile(
    "properties",
    max_examples=15,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
settings.register_profile(
    "properties-ci", settings.get_profile("properties"), derandomize=True, database=None
)
PROFILE = settings.get_profile("properties-ci" if os.environ.get("CI") else "properties")
JUNK_PROFILE = settings(PROFILE, max_examples=300, phases=tuple(Phase))
# On PostgreSQL fewer examples: each needs a database of its own (0.3 s against 0.08 s).
PG_PROFILE = settings(PROFILE, max_examples=6)

Query = dict[str, Any]  # list filter -> values as sent; date filter -> "YYYY-MM-DD"
Params = list[tuple[str, str]]
MAX_ID = 2**63 - 1
INSCRIPTIONS = f"{API}/course-inscriptions"
LIST_FILTERS = ("name", "last_name", "email", "department", "country", "teams", "courses")
DATE_FILTERS = tuple(
    f"filter[{n}_date]" for n in ("from_inscription", "to_inscription", "from_due", "to_due")
)
MISSING = ("nobody", "Ärzt", "strass", "日", "Blue Team", "Smith", "x@example.com")
CASINGS = (str, str.upper, str.lower, str.swapcase, str.title)


def comma_list(values: list[str]) -> str:
    """contract.md 3: comma-separated, a value holding a comma in double quotes."""
    return ",".join(f'"{v}"' if "," in v else v for v in values)


Facts = dict[str, list[str]]  # list filter -> the values it looks at for one inscription
Row = tuple[str, ...]  # victim_name, victim_email, course_title, start_date, due_date, status


def inscription_facts(data: Data) -> list[tuple[dict[str, Any], int, Facts, Row]]:
    """Each inscription with its company, filter facts and row, by start_date then id."""
    employees, courses = by_id("employees", data), by_id("courses", data)
    teams = team_names_by_employee(data)
    table = []
    for ins in sorted(data["inscriptions"], key=lambda i: (i["start_date"], i["id"])):
        emp, course = employees[ins["employee_id"]], courses[ins["course_id"]]
        facts = {"name": [emp["first_name"]], "last_name": [emp["last_name"]]}
        facts |= {key: [emp[key]] for key in ("email", "department", "country")}
        facts |= {"teams": teams.get(emp["id"], []), "courses": [course["title"]]}
        row = (f"{emp['first_name']} {emp['last_name']}", emp["email"], course["title"])
        row += (ins["start_date"], ins["due_date"], ins["status"])
        table.append((ins, emp["company_id"], facts, row))
    return table


def expected_inscriptions(data: Data, company: int, query: Query) -> list[Row]:
    """The oracle: the company's rows that match every filter, in contract order."""
    table = inscription_facts(data)
    return [
        row for ins, owner, facts, row in table if owner == company and matches(query, facts, ins)
    ]


def row_of(record: dict[str, Any]) -> Row:
    """The served record's fields that the oracle's rows hold."""
    keys = ("victim_name", "victim_email", "course_title", "start_date", "due_date", "status")
    return tuple(record[key] for key in keys)


@st.composite
def sent_values(draw: st.DrawFn, pool: tuple[str, ...]) -> str:
    """A value as a client may send it: any letter case, maybe padded with spaces."""
    value = draw(st.sampled_from(CASINGS))(draw(st.sampled_from(pool)))
    return f" {value}  " if "," not in value and draw(st.booleans()) else value


@st.composite
def inscription_queries(draw: st.DrawFn, data: Data) -> tuple[Query, Params]:
    """Any subset of the list filters (1-3 values, repeated or not) and date bounds.

    Half the values come from one target inscription, so that answers are seldom empty.
    """
    table = inscription_facts(data)
    target: Facts = draw(st.sampled_from([f for _, _, f, _ in table])) if table else {}
    pools = {name: tuple(v for _, _, f, _ in table for v in f[name]) for name in LIST_FILTERS}
    query: Query = {}
    params: Params = []
    for name in draw(st.lists(st.sampled_from(LIST_FILTERS), unique=True)):
        pool = sent_values(pools[name] + MISSING)
        if target.get(name):
            pool = sent_values(tuple(target[name])) | pool
        values = draw(st.lists(pool, min_size=1, max_size=3))
        query[name] = values
        cut = draw(st.integers(1, len(values)))  # the rest goes in a repeated parameter
        parts = (values[:cut], values[cut:])
        params += [(f"filter[{name}]", comma_list(part)) for part in parts if part]
    days = st.integers(-3, 40).map(lambda d: (DAY0 + dt.timedelta(days=d)).isoformat())
    for low, high in (("from_inscription", "to_inscription"), ("from_due", "to_due")):
        bounds = sorted(draw(st.lists(days, min_size=2, max_size=2)))
        for name, day in zip((low, high), bounds, strict=True):
            if draw(st.booleans()):
                query[f"{name}_date"] = day
                params.append((f"filter[{name}_date]", day))
    return query, params


def matches(query: Query, facts: dict[str, list[str]], ins: dict[str, Any]) -> bool:
    """Whole values, casefolded and trimmed; OR inside a filter, AND across; dates inclusive."""
    for name in LIST_FILTERS:
        wanted = {v.strip().casefold() for v in query.get(name, ())}
        if name in query and not wanted & {v.casefold() for v in facts[name]}:
            return False
    start, due = ins["start_date"], ins["due_date"]
    for name, value, later in (
        ("from_inscription_date", start, True),
        ("to_inscription_date", start, False),
        ("from_due_date", due, True),
        ("to_due_date", due, False),
    ):
        bound = query.get(name)
        if bound is not None and (value is None or (value < bound if later else value > bound)):
            return False
    return True


@PROFILE
@given(data=datasets(), more=st.data())
async def test_filters_return_exactly_the_matching_records(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """Every record satisfies every filter, none is missing, order is start_date then id."""
    await filters_match(aiohttp_client, None, data, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=datasets(), more=st.data())
async def test_filters_return_exactly_the_matching_records_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, more: st.DataObject
) -> None:
    await filters_match(aiohttp_client, store, data, more)


async def filters_match(
    aiohttp_client: Any, store: Store | None, data: Data, more: st.DataObject
) -> None:
    async with serving(aiohttp_client, data, store=store) as client:
        for _ in range(8):
            company = more.draw(st.sampled_from((1, 2)))
            query, params = more.draw(inscription_queries(data))
            response = await client.get(
                INSCRIPTIONS,
                params=[*params, ("per_page", "500")],
                headers={"X-API-KEY": KEYS[company]},
            )
            assert response.status == 200, await response.text()
            body = await response.json()
            got = [row_of(r) for r in body]
            expected = expected_inscriptions(data, company, query)
            event("empty answer" if not expected else "records in the answer")
            assert sorted(set(got) - set(expected)) == [], "records that do not match"
            assert sorted(set(expected) - set(got)) == [], "matching records missing"
            assert got == expected
            assert response.headers["X-Total-Count"] == str(len(expected))


async def walk_pages(
    client: TestClient, path: str, params: Params, company: int, per_page: int
) -> tuple[list[Any], int]:
    """Every page from 1 to one past the last; the records in order, and X-Total-Count."""
    records: list[Any] = []
    for page in itertools.count(1):
        paging = [("page", str(page)), ("per_page", str(per_page))]
        response = await client.get(
            path, params=[*params, *paging], headers={"X-API-KEY": KEYS[company]}
        )
        assert response.status == 200, await response.text()
        body = await response.json()
        total = int(response.headers["X-Total-Count"])
        assert response.headers["X-Total-Pages"] == str(math.ceil(total / per_page))
        if page > math.ceil(total / per_page):
            assert body == []
            return records, total
        assert len(body) == min(per_page, total - len(records))
        records += body
    raise AssertionError("unreachable")


@PROFILE
@given(data=datasets(), more=st.data())
async def test_pages_concatenate_to_the_whole_list(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """For any per_page, the pages in order are the whole list; X-Total-Count its length."""
    await pages_concatenate(aiohttp_client, None, data, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=datasets(), more=st.data())
async def test_pages_concatenate_to_the_whole_list_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, more: st.DataObject
) -> None:
    await pages_concatenate(aiohttp_client, store, data, more)


async def pages_concatenate(
    aiohttp_client: Any, store: Store | None, data: Data, more: st.DataObject
) -> None:
    company = more.draw(st.sampled_from((1, 2)))
    per_page = st.integers(1, 50)
    ordered = sorted(data["campaign_events"], key=lambda e: (e["timestamp"], e["id"]))
    async with serving(aiohttp_client, data, store=store) as client:
        query, params = more.draw(inscription_queries(data))
        records, total = await walk_pages(
            client, INSCRIPTIONS, params, company, more.draw(per_page)
        )
        got = [row_of(r) for r in records]
        assert got == expected_inscriptions(data, company, query)
        assert total == len(got)

        campaign = more.draw(
            st.sampled_from([c for c in data["campaigns"] if c["company_id"] == company])
        )
        types = more.draw(st.lists(st.sampled_from(EVENT_TYPES), max_size=4))
        sent = [more.draw(st.sampled_from(CASINGS))(t) for t in types]
        captcha = more.draw(st.sampled_from((None, "true", "false", "TRUE", "False")))
        params = [("filter[type]", ",".join(sent))] if sent else []
        params += [("filter[with_captcha]", captcha)] if captcha else []
        path = f"{API}/campaigns/{campaign['id']}/events"
        records, total = await walk_pages(client, path, params, company, more.draw(per_page))
        expected = [
            e["id"]
            for e in ordered
            if e["campaign_id"] == campaign["id"]
            and (not types or e["type"] in types)
            and not (captcha and captcha.lower() == "false" and e["with_captcha"])
        ]
        assert [r["id"] for r in records] == expected
        assert total == len(expected)

        employee = more.draw(
            st.sampled_from([e for e in data["employees"] if e["company_id"] == company])
        )
        path = f"{API}/victimsapi/{employee['id']}/events"
        records, total = await walk_pages(client, path, [], company, more.draw(per_page))
        expected = [e["id"] for e in ordered if e["employee_id"] == employee["id"]]
        assert [r["id"] for r in records] == expected
        assert total == len(expected)


async def answer(client: TestClient, path: str, company: int) -> tuple[int, list[Any], Any]:
    """Status, headers and body, minus what differs on every request (id, date)."""
    response = await client.get(path, headers={"X-API-KEY": KEYS[company]})
    body = await response.json(content_type=None)
    if isinstance(body, dict):
        assert body.pop("request_id") == response.headers["X-Request-ID"]
    headers = [(k, v) for k, v in response.headers.items() if k not in ("Date", "X-Request-ID")]
    return response.status, sorted(headers), body


@PROFILE
@given(data=datasets(), more=st.data())
async def test_another_companys_ids_get_the_plain_404(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """Another tenant's id, a free id and a huge id: the same 404, body and headers."""
    await foreign_ids_look_free(aiohttp_client, None, data, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=datasets(), more=st.data())
async def test_another_companys_ids_get_the_plain_404_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, more: st.DataObject
) -> None:
    await foreign_ids_look_free(aiohttp_client, store, data, more)


async def foreign_ids_look_free(
    aiohttp_client: Any, store: Store | None, data: Data, more: st.DataObject
) -> None:
    company = more.draw(st.sampled_from((1, 2)))
    async with serving(aiohttp_client, data, store=store) as client:
        for kind, table in (("campaigns", "campaigns"), ("victimsapi", "employees")):
            used = {r["id"] for r in data[table]}
            own = [r["id"] for r in data[table] if r["company_id"] == company]
            theirs = [r["id"] for r in data[table] if r["company_id"] != company]
            status, _, _ = await answer(client, f"{API}/{kind}/{own[0]}/events", company)
            assert status == 200
            reference = await answer(client, f"{API}/{kind}/{FREE_ID}/events", company)
            assert reference[0] == 404
            ids = st.sampled_from(theirs) | st.integers(MAX_ID - 1000, MAX_ID)
            ids |= st.integers(1, MAX_ID).filter(lambda i: i not in used)  # noqa: B023
            for id_ in more.draw(st.lists(ids, min_size=1, max_size=6)):
                assert await answer(client, f"{API}/{kind}/{id_}/events", company) == reference


PARTNER_KEY = "rk_props_partner_" + "p" * 24
MAX_SAFE_ID = 2**53 - 1


def with_partner(data: Data, companies: list[int]) -> Data:
    """The dataset with partner 1 reading ``companies`` (maybe none) and its key."""
    return data | {
        "partners": [{"id": 1, "name": "Partner"}],
        "partner_companies": [{"partner_id": 1, "company_id": c} for c in companies],
        "api_keys": [*data["api_keys"], {"partner_id": 1, "label": "p", "key": PARTNER_KEY}],
    }


@PROFILE
@given(data=datasets(), more=st.data())
async def test_a_partner_key_reads_its_companies_and_nothing_else(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """Random partner sets and ids: a company of the set answers exactly as its own key
    does (so never a record of another), any other id is the plain 404; the rollup lists
    the set, in every format."""
    await partner_reads_its_companies(aiohttp_client, None, data, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=datasets(), more=st.data())
async def test_a_partner_key_reads_its_companies_and_nothing_else_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, more: st.DataObject
) -> None:
    await partner_reads_its_companies(aiohttp_client, store, data, more)


async def exact(client: TestClient, url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """Status and body bytes (one request id for every request)."""
    async with client.get(url, headers={"X-Request-ID": "same", **headers}) as response:
        return response.status, await response.read()


async def partner_reads_its_companies(
    aiohttp_client: Any, store: Store | None, data: Data, more: st.DataObject
) -> None:
    companies = sorted(more.draw(st.sets(st.sampled_from((1, 2)))))
    campaign = more.draw(st.sampled_from(data["campaigns"]))["id"]
    employee = more.draw(st.sampled_from(data["employees"]))["id"]
    urls = (
        f"{API}/campaigns", f"{API}/campaigns/{campaign}", f"{API}/campaigns/{campaign}/events",
        f"{API}/victimsapi", f"{API}/victimsapi/{employee}", f"{API}/victimsapi/{employee}/events",
        INSCRIPTIONS, f"{API}/courses", f"{API}/events?limit=1000",
    )  # fmt: skip
    ids = st.sampled_from((1, 2)) | st.integers(1, MAX_SAFE_ID)
    async with serving(aiohttp_client, with_partner(data, companies), store=store) as client:
        free = await exact(client, f"{API}/campaigns/{FREE_ID}", {"X-API-KEY": KEY_1})
        for asked in more.draw(st.lists(ids, min_size=1, max_size=3)):
            url = more.draw(st.sampled_from(urls))
            url += more.draw(
                st.sampled_from(("", "format=csv", "format=ndjson")).map(
                    lambda f: f and ("&" if "?" in url else "?") + f  # noqa: B023
                )
            )
            got = await exact(client, url, {"X-API-KEY": PARTNER_KEY, "X-Company-ID": str(asked)})
            if asked in companies:
                assert got == await exact(client, url, {"X-API-KEY": KEYS[asked]}), url
            else:
                assert got == free, (url, asked)
        for form in ("json", "ndjson", "csv"):
            status, body = await exact(
                client, f"/api/partners/v1/companies?format={form}", {"X-API-KEY": PARTNER_KEY}
            )
            assert status == 200
            lines = body.decode().splitlines()
            if form == "json":
                listed = [r["id"] for r in json.loads(body)]
            elif form == "ndjson":
                listed = [json.loads(line)["id"] for line in lines]
            else:
                listed = [int(line.split(",")[0]) for line in lines[1:]]
            assert listed == companies


ENDPOINTS = (
    (f"{API}/campaigns/{{id}}/events", ("filter[with_captcha]", "filter[type]")),
    (f"{API}/victimsapi/{{id}}/events", ()),
    (INSCRIPTIONS, tuple(f"filter[{n}]" for n in LIST_FILTERS) + DATE_FILTERS),
    # The reports (contract.md 11, 12).
    (f"{API}/campaigns", ("filter[title]", "filter[from_launch_date]", "filter[with_captcha]")),
    (f"{API}/campaigns/{{id}}", ("filter[with_captcha]",)),
    (f"{API}/victimsapi", ("filter[name]", "filter[teams]", "filter[min_failed]")),
    (f"{API}/victimsapi/{{id}}", ()),
    (f"{API}/courses", ("filter[title]",)),
)
ODD = ("%00", "%ff", "%c3%28", "%", "%25", "%zz", "%2C", "%22", "%5B%5D", "%C0%AF", "%e2%80%ae")
UNICODE = ("😀", "\u202eevil\u202c", "e\u0301\u0301", "ß", "İ", "\ufeff", "日本", "مرحبا")
PLAIN = ("open", "TRUE", "1", "0", "-1", "1e3", "2026-02-30", '"a,b"', ",", '"', "9" * 20, "")
LONG = ("x" * 10_000, "y" * 5_000, "é" * 2_000, ",".join(["v"] * 101))
PIECES = st.one_of(
    st.sampled_from(ODD),
    st.sampled_from(PLAIN),
    st.sampled_from(UNICODE),  # raw, not percent-encoded
    st.sampled_from(UNICODE + PLAIN + LONG).map(lambda s: quote(s, safe="")),
    st.text(max_size=12).map(lambda s: quote(s, safe="")),
    st.binary(max_size=12).map(lambda b: quote_from_bytes(b, safe="")),
)
JUNK = st.lists(PIECES, max_size=3).map("".join)


@st.composite
def junk_urls(draw: st.DrawFn) -> str:
    """A path and query of one endpoint with junk in the id and any parameter name or value."""
    template, filters = draw(st.sampled_from(ENDPOINTS))
    names = st.sampled_from(("page", "per_page", *filters))
    name = names | names.map(lambda n: quote(n, safe="")) | JUNK
    id_ = draw(st.sampled_from(("1", "4", "41", "007", str(MAX_ID))) | JUNK)
    pairs = draw(st.lists(st.tuples(name, JUNK), max_size=4))
    query = "&".join(f"{n}={v}" for n, v in pairs)
    return template.replace("{id}", id_) + (f"?{query}" if pairs else "")


# The longest Link header a page can carry: four links (first, last, prev, next), each
# repeating the request's path and query, which the server bounds (docs/interface.md).
LONGEST_LINK = 4 * (MAX_REQUEST_LINE + len('<>; rel="first", '))


@pytest.fixture
async def roomy_session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client that reads a header as long as the longest Link (aiohttp's default: 8190)."""
    async with aiohttp.ClientSession(max_field_size=LONGEST_LINK) as session:
        yield session


@EACH_STORE  # a store may fail in its own ways
@JUNK_PROFILE
@given(raw=junk_urls(), with_key=st.sampled_from((True, True, True, False)))
async def test_junk_in_any_parameter_is_never_a_server_error(
    client: TestClient, roomy_session: aiohttp.ClientSession, raw: str, with_key: bool
) -> None:
    """Random bytes, long values, odd escapes and unicode: never 5xx; errors are problem+json."""
    url = URL(f"http://{client.host}:{client.port}{raw}", encoded=True)
    headers = {"X-API-KEY": KEY_1} if with_key else {}
    try:
        response = await roomy_session.get(url, headers=headers)
    except ValueError:  # aiohttp's client refuses to send it (a control character)
        reject()
    async with response:
        event(f"status {response.status}")
        assert response.status < 500, await response.text()
        if response.status == 200:
            assert response.headers["Content-Type"] == "application/json; charset=utf-8"
            assert isinstance(await response.json(), list | dict)  # dict: a report on one
        else:
            assert response.status in TITLES, response.status
            await assert_problem(response, response.status)


async def test_a_long_filter_is_kept_whole_in_every_link(
    client: TestClient, roomy_session: aiohttp.ClientSession
) -> None:
    """contract.md 4: each link keeps every filter, however long (within the request line)."""
    value = "x" * 10_000
    url = URL(f"http://{client.host}:{client.port}{INSCRIPTIONS}").with_query(
        {"filter[name]": value, "per_page": "1"}
    )
    async with roomy_session.get(url, headers={"X-API-KEY": KEY_1}) as response:
        assert response.status == 200
        links = response.headers["Link"].split(", ")
    assert {link.rsplit('rel="', 1)[1] for link in links} == {'first"', 'last"'}
    assert all(f"filter%5Bname%5D={value}" in link for link in links)
    assert len(response.headers["Link"]) <= LONGEST_LINK
