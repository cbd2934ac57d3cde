"""Scoped keys, partner keys over several companies, and key introspection.

Every rule on both stores: the key tool makes partners and keys in the store the real
app reads; answers are compared byte for byte (one X-Request-ID for both requests).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from app.config import Config
from app.data.api_keys import CACHE_SECONDS, SCOPES
from app.data.partners import year_before
from app.main import create_app
from app.tools.keytool import main
from app.web.access import ROUTE_SCOPES

from .support.factories import API, KEY_1, KEY_2, KEY_PARTNER, Day, assert_problem, sample
from .support.loads import write_fixture
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)
KEY_PATTERN = re.compile(r"rk_[A-Za-z0-9_-]{20,}")
SAME_ID = {"X-Request-ID": "same-request"}
# A readable URL for every route of company 1 (sample ids: campaign 1, employee 1).
COMPANY_1_URLS = {
    f"{API}/campaigns": f"{API}/campaigns",
    f"{API}/campaigns/{{id}}": f"{API}/campaigns/1",
    f"{API}/campaigns/{{id}}/events": f"{API}/campaigns/1/events",
    f"{API}/victimsapi": f"{API}/victimsapi",
    f"{API}/victimsapi/{{id}}": f"{API}/victimsapi/1",
    f"{API}/victimsapi/{{id}}/events": f"{API}/victimsapi/1/events",
    f"{API}/course-inscriptions": f"{API}/course-inscriptions",
    f"{API}/events": f"{API}/events",
    f"{API}/courses": f"{API}/courses",
    f"{API}/key": f"{API}/key",
}
PEOPLE = {f"{API}/victimsapi", f"{API}/victimsapi/{{id}}", f"{API}/victimsapi/changes"}


async def tool(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the key tool on the store as an operator would; its output."""
    where = ["--database-url", store.url] if store.url else ["--db", str(store.sqlite_path)]
    code = await asyncio.to_thread(main, [*where, *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


async def new_key(store: Store, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The key ``create`` printed, once."""
    (key,) = KEY_PATTERN.findall(await tool(store, capsys, "create", "--label", "t", *argv))
    return key


async def new_partner(store: Store, capsys: pytest.CaptureFixture[str]) -> str:
    """A new partner's id, as ``partner create`` printed it."""
    out = await tool(store, capsys, "partner", "create", "--name", "MSP")
    return str(re.findall(r"partner (\d+)", out)[0])


async def partner_key(
    store: Store, capsys: pytest.CaptureFixture[str], companies: list[int], *argv: str
) -> str:
    """A new partner reading ``companies``, and a key of it."""
    partner = await new_partner(store, capsys)
    for company in companies:
        await tool(store, capsys, "partner", "add-company", partner, str(company))
    return await new_key(store, capsys, "--partner", partner, *argv)


async def get(client: TestClient, url: str, key: str, **headers: str) -> Any:
    return await client.get(url, headers={"X-API-KEY": key, **SAME_ID, **headers})


async def exact(client: TestClient, url: str, key: str, **headers: str) -> tuple[int, bytes]:
    async with await get(client, url, key, **headers) as response:
        return response.status, await response.read()


def test_every_api_route_has_its_scope() -> None:
    """A route missing from the one table fails here (and is refused to every key)."""
    app = create_app(Config(db="unused.sqlite3"))
    paths = {
        r.resource.canonical
        for r in app.router.routes()
        if r.resource is not None
        and r.resource.canonical.startswith(("/api/companies", "/api/partners"))
    }
    assert paths <= set(ROUTE_SCOPES), paths - set(ROUTE_SCOPES)
    assert {s for s in ROUTE_SCOPES.values() if s} <= set(SCOPES)


async def test_the_document_gives_each_operation_its_scope_403_and_header(
    client: TestClient,
) -> None:
    async with client.get("/api/docs/openapi.json") as response:
        document = await response.json()
    for path, item in document["paths"].items():
        if not path.startswith("/api/"):
            continue
        operation = item["get"]
        scope = ROUTE_SCOPES[path]
        assert operation["x-scope"] == scope
        assert (f"Scope: `{scope}`." if scope else "Any key") in operation["description"]
        assert ("403" in operation["responses"]) == (scope is not None)
        said = "`X-Company-ID`: a partner's key names" in operation["description"]
        assert said == path.startswith("/api/companies/")
    text = json.dumps(document)
    for fact in ("insufficient_scope", "X-Company-ID", "partner", *SCOPES):
        assert fact in text, fact


async def test_a_partner_key_reads_its_companies_and_no_other(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """Companies A and B as their own keys see them; C, an unknown id: one 404, same bytes."""
    partner = await new_partner(store, capsys)
    await tool(store, capsys, "partner", "add-company", partner, "2")
    key = await new_key(store, capsys, "--partner", partner)
    await tool(store, capsys, "partner", "add-company", partner, "1")  # after the key
    client = await make_client()
    for route, url in COMPANY_1_URLS.items():
        if route == f"{API}/key":
            continue
        assert await exact(client, url, key, **{"X-Company-ID": "1"}) == await exact(
            client, url, KEY_1
        )
    assert await exact(client, f"{API}/campaigns", key, **{"X-Company-ID": "2"}) == await exact(
        client, f"{API}/campaigns", KEY_2
    )
    only_1 = await partner_key(store, capsys, [1])
    foreign = await exact(client, f"{API}/campaigns", only_1, **{"X-Company-ID": "2"})
    assert foreign[0] == 404
    for unknown in ("3", "999999", str(2**53 - 1)):
        assert (
            await exact(client, f"{API}/campaigns", only_1, **{"X-Company-ID": unknown}) == foreign
        )
    # ... and exactly what a company key gets for a record of another company.
    assert await exact(client, f"{API}/campaigns/1", KEY_2) == foreign


@pytest.mark.parametrize(
    ("values", "status"),
    [([], 400), (["x"], 400), (["1", "1"], 400), (["0"], 400), (["-1"], 400), ([" 1 "], 200)],
)
async def test_the_company_header_rules(
    make_client: Any,
    store: Store,
    capsys: pytest.CaptureFixture[str],
    values: list[str],
    status: int,
) -> None:
    key = await partner_key(store, capsys, [1, 2])
    client = await make_client()
    headers = [("X-API-KEY", key), *(("X-Company-ID", v) for v in values)]
    async with client.get(f"{API}/campaigns", headers=headers) as response:
        if status == 400:
            body = await assert_problem(response, 400)
            assert "X-Company-ID" in body["errors"] and "X-Company-ID" in body["detail"]
        else:
            assert response.status == 200


async def test_a_company_key_may_name_its_own_company(client: TestClient) -> None:
    plain = await exact(client, f"{API}/campaigns", KEY_1)
    assert await exact(client, f"{API}/campaigns", KEY_1, **{"X-Company-ID": "1"}) == plain
    other = await exact(client, f"{API}/campaigns", KEY_1, **{"X-Company-ID": "2"})
    assert other == await exact(client, f"{API}/campaigns/999999", KEY_1)


async def test_etags_stay_per_company(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    key = await partner_key(store, capsys, [1, 2])
    client = await make_client()
    tags = []
    for company in ("1", "2"):
        async with await get(client, f"{API}/courses", key, **{"X-Company-ID": company}) as r:
            tags.append(r.headers["ETag"])
    assert tags[0] != tags[1]
    headers = {"X-Company-ID": "2", "If-None-Match": tags[0]}
    async with await get(client, f"{API}/courses", key, **headers) as response:
        assert response.status == 200


async def test_without_people_read_every_people_endpoint_is_403(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    scopes = " ".join(s for s in SCOPES if s != "people:read")
    key = await new_key(store, capsys, "--company", "1", "--scope", scopes)
    client = await make_client()
    for route, url in COMPANY_1_URLS.items():
        # A bad parameter too: the scope is checked before any parameter.
        async with await get(client, f"{url}?per_page=x", key) as response:
            if route in PEOPLE:
                body = await assert_problem(response, 403)
                assert "people:read" in body["detail"]
                assert response.headers["WWW-Authenticate"] == (
                    'APIKey header="X-API-KEY", error="insufficient_scope", scope="people:read"'
                )
        async with await get(client, url, key) as response:
            assert response.status == (403 if route in PEOPLE else 200), url


async def test_a_stats_filter_naming_people_needs_people_read(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reports key reads the stats by group, but cannot look people up in them: who is
    in the directory, and how one person did, is people:read's."""
    reports = await new_key(store, capsys, "--company", "1", "--scope", "reports:read")
    both = await new_key(store, capsys, "--company", "1", "--scope", "reports:read people:read")
    client = await make_client()
    for stats in ("/stats/phishing", "/stats/training"):
        url = f"{API}{stats}"
        for naming in ("filter[name]=Anna", "filter[last_name]=x", "filter[email]=a@b.example"):
            # A bad parameter too: the scope is checked before any parameter.
            for query in (naming, f"{naming}&interval=never"):
                async with await get(client, f"{url}?{query}", reports) as response:
                    body = await assert_problem(response, 403)
                assert "people:read" in body["detail"] and naming.split("=")[0] in body["detail"]
                assert response.headers["WWW-Authenticate"].endswith('scope="people:read"')
            async with await get(client, f"{url}?{naming}", both) as response:
                assert response.status == 200, await response.text()
        for grouped in ("filter[department]=Sales", "filter[teams]=x", "group_by=department"):
            async with await get(client, f"{url}?{grouped}", reports) as response:
                assert response.status == 200, (url, grouped, await response.text())


async def test_key_introspection_echoes_the_key(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    before = int(time.time())
    key = await new_key(store, capsys, "--company", "2", "--scope", "reports:read events:read")
    partner = await partner_key(store, capsys, [2, 1], "--expires-in", "1h")
    client = await make_client()
    async with await get(client, f"{API}/key", key) as response:
        assert response.headers["Cache-Control"] == "no-store"
        facts = await response.json()
    assert facts.pop("iat") >= before - 1
    assert facts == {
        "active": True,
        "scope": "events:read reports:read",
        "client_id": key[:12],
        "label": "t",
        "exp": None,
        "company_id": 2,
        "companies": [2],
    }
    async with await get(client, f"{API}/key", partner) as response:
        facts = await response.json()
    assert facts["partner_id"] >= 1 and "company_id" not in facts
    assert facts["companies"] == [1, 2] and facts["scope"] == " ".join(SCOPES)
    assert 3500 <= facts["exp"] - facts["iat"] <= 3601
    assert partner not in await (await get(client, f"{API}/key", partner)).text()
    # It takes no parameter, and answers JSON only.
    async with await get(client, f"{API}/key?page=abc&filter[x]=1", key) as response:
        body = await assert_problem(response, 400)
        assert set(body["errors"]) == {"page", "filter[x]"}
        assert body["errors"]["page"] == ["Unknown parameter. Allowed: none."]
    async with await get(client, f"{API}/key", key, Accept="text/csv") as response:
        await assert_problem(response, 406)
    async with await get(
        client, f"{API}/key", key, Accept="text/csv, application/json;q=0.5"
    ) as response:
        assert response.status == 200 and response.content_type == "application/json"


async def test_revoking_a_partner_key_cuts_every_company(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    key = await partner_key(store, capsys, [1, 2])
    listed = await tool(store, capsys, "list")
    assert "reports:read" in listed and "(companies 1,2)" in listed
    key_id = next(line.split()[0] for line in listed.splitlines() if key[:12] in line)
    client = await make_client()
    for company in ("1", "2"):
        assert (await exact(client, f"{API}/courses", key, **{"X-Company-ID": company}))[0] == 200
    await tool(store, capsys, "revoke", key_id)
    await asyncio.sleep(CACHE_SECONDS + 0.1)
    for company in ("1", "2"):
        assert (await exact(client, f"{API}/courses", key, **{"X-Company-ID": company}))[0] == 401


def test_a_bad_scope_is_one_line(sample_db: Any, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--db", str(sample_db), "create", "--company", "1", "--label", "x"]
    assert main([*argv, "--scope", "people:write"]) == 1
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert main(["--db", str(sample_db), "partner", "add-company", "7", "1"]) == 1
    assert "no partner 7" in capsys.readouterr().err


ROLLUP = "/api/partners/v1/companies"


def rate(count: int, total: int) -> float | None:
    """The reports' rounding: half up to 4 decimals, None over nothing."""
    if not total:
        return None
    return float((Decimal(count) / Decimal(total)).quantize(Decimal("0.0001"), ROUND_HALF_UP))


async def company_json(client: TestClient, url: str, company: int) -> tuple[Any, int]:
    """A company's own report through the partner key, and its total."""
    headers = {"X-API-KEY": KEY_PARTNER, "X-Company-ID": str(company)}
    async with client.get(url, headers=headers) as response:
        assert response.status == 200, await response.text()
        return await response.json(), int(response.headers["X-Total-Count"])


@pytest.mark.parametrize("day", [date(2026, 3, 1), date(2025, 7, 15), date(2024, 2, 29)])
async def test_the_rollup_is_each_company_s_own_reports(
    dated: tuple[TestClient, Day], day: date
) -> None:
    """Every figure of a company's line, from that company's own reports on that day."""
    client, clock = dated
    clock.day = day
    since = f"{year_before(day).isoformat()}T00:00:00Z"
    async with await get(client, ROLLUP, KEY_PARTNER) as response:
        assert response.status == 200
        assert response.headers["X-Total-Count"] == "2"
        rows = await response.json()
    assert [row["id"] for row in rows] == [1, 2]
    for row in rows:
        company = row["id"]
        listed, total = await company_json(client, f"{API}/campaigns?per_page=500", company)
        recent = [c for c in listed if c["launch_date"] >= since]
        sends = sum(c["targets"] for c in recent)
        courses, _ = await company_json(client, f"{API}/courses?per_page=500", company)
        inscriptions = sum(c["inscriptions"] for c in courses)
        expected = {
            "id": company,
            "name": {1: "Northwind Logistics", 2: "Bluefin Health"}[company],
            "employees": (await company_json(client, f"{API}/victimsapi?per_page=1", company))[1],
            "campaigns": total,
            "last_launch_date": max((c["launch_date"] for c in listed), default=None),
            "sends": sends,
            "click_rate": rate(sum(c["clicked"] for c in recent), sends),
            "fail_rate": rate(sum(c["failed"] for c in recent), sends),
            "report_rate": rate(sum(c["reported"] for c in recent), sends),
            "inscriptions": inscriptions,
            "completion_rate": rate(sum(c["completed"] for c in courses), inscriptions),
            "overdue": sum(c["overdue"] for c in courses),
        }
        assert row == expected
        assert (
            inscriptions == (await company_json(client, f"{API}/course-inscriptions", company))[1]
        )


async def test_the_rollup_filters_by_name_in_every_format(dated: tuple[TestClient, Day]) -> None:
    client, _ = dated
    url = f"{ROLLUP}?filter[name]=bluefin HEALTH,Nobody"
    async with await get(client, url, KEY_PARTNER) as response:
        [row] = await response.json()
    assert row["id"] == 2
    async with await get(client, f"{url}&format=ndjson", KEY_PARTNER) as response:
        assert [json.loads(line) for line in (await response.text()).splitlines()] == [row]
    async with await get(client, f"{url}&format=csv", KEY_PARTNER) as response:
        header, line = (await response.text()).splitlines()
    assert header.split(",") == list(row)
    assert line.split(",")[:2] == ["2", "Bluefin Health"]


async def test_the_rollup_ignores_any_company_header(dated: tuple[TestClient, Day]) -> None:
    """A client that sends X-Company-ID on every request still reads its whole rollup."""
    client, _ = dated
    async with await get(client, ROLLUP, KEY_PARTNER) as response:
        whole = await response.read()
    for sent in ("1", "2", "999", "junk", ""):
        async with await get(client, ROLLUP, KEY_PARTNER, **{"X-Company-ID": sent}) as response:
            assert response.status == 200 and await response.read() == whole


async def test_the_rollup_is_the_partner_s_only(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    client = await make_client()
    async with await get(client, ROLLUP, KEY_1) as response:
        body = await assert_problem(response, 403)
        challenge = response.headers["WWW-Authenticate"]
    assert "partner" in body["detail"]
    assert challenge == 'APIKey header="X-API-KEY", error="insufficient_scope"'
    only_2 = await partner_key(store, capsys, [2], "--scope", "reports:read")
    async with await get(client, ROLLUP, only_2) as response:
        assert [row["id"] for row in await response.json()] == [2]
    no_reports = await partner_key(store, capsys, [1], "--scope", "events:read")
    async with await get(client, ROLLUP, no_reports) as response:
        await assert_problem(response, 403)


async def test_a_company_added_to_a_partner_is_in_its_rollup_with_a_new_etag(
    make_client: Any, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """The key tool moves the data version when a partner reads one more company: the
    rollup's ETag and total are not those of before."""
    partner = await new_partner(store, capsys)
    await tool(store, capsys, "partner", "add-company", partner, "2")
    key = await new_key(store, capsys, "--partner", partner)
    client = await make_client()
    async with await get(client, ROLLUP, key) as response:
        tag, total = response.headers["ETag"], response.headers["X-Total-Count"]
    assert total == "1"
    await tool(store, capsys, "partner", "add-company", partner, "1")
    rows: list[Any] = []
    for _ in range(200):  # the server notices a new data version within 0.1 s
        async with await get(client, ROLLUP, key, **{"If-None-Match": tag}) as response:
            if response.status == 200:
                rows, total = await response.json(), response.headers["X-Total-Count"]
                break
        await asyncio.sleep(0.05)
    assert [row["id"] for row in rows] == [1, 2] and total == "2"


def test_the_last_12_months_start_a_calendar_year_before() -> None:
    assert year_before(date(2026, 3, 1)) == date(2025, 3, 1)
    assert year_before(date(2028, 2, 29)) == date(2027, 2, 28)


# A second partner over company 2, a company without campaigns or inscriptions (3), and
# one (4) whose campaigns are on both sides of the 12 months, one without targets, with
# an event-only target and inscriptions without a due date; company 5, not the partner's,
# has the same kinds of rows so that any of its rows counted elsewhere would show.
PARTNER_KEY_2 = "rk_test_partner_two_0123456789abcdefghij"
LAUNCHES = {
    1000: "2024-08-31T23:59:59Z",
    1001: "2024-09-01T00:00:00Z",
    1002: "2025-08-30T10:00:00Z",
}
EVENTS = [(1000, 1000, "click"), (1001, 1000, "click"), (1001, 1000, "click")]
EVENTS += [(1001, 1001, "fail"), (1001, 1002, "report"), (1001, 1004, "click")]
EVENTS += [(1001, 1004, "open"), (1003, 1005, "click"), (1003, 1006, "fail")]
INSCRIBED = [(1000, "2025-08-31", "in_progress"), (1001, "2025-09-01", "not_started")]
INSCRIBED += [(1002, None, "in_progress"), (1003, "2025-01-01", "completed")]
INSCRIBED += [(1005, "2025-01-01", "not_started")]


def person(employee: int, company: int) -> dict[str, Any]:
    return {"id": employee, "company_id": company, "first_name": "A", "last_name": "B",
            "email": f"p{employee}@example.com", "department": "D", "country": "C"}  # fmt: skip


EXTRA: dict[str, Any] = {
    "companies": [{"id": n, "name": f"Company {n}"} for n in (3, 4, 5)],
    "partners": [{"id": 2, "name": "Second MSP"}],
    "partner_companies": [{"partner_id": 2, "company_id": n} for n in (4, 2, 3)],
    "api_keys": [{"partner_id": 2, "label": "p2", "key": PARTNER_KEY_2}],
    "employees": [person(e, 4 if e < 1005 else 5) for e in range(1000, 1010)] + [person(1100, 3)],
    "campaigns": [
        *({"id": c, "company_id": 4, "title": "T", "launch_date": d} for c, d in LAUNCHES.items()),
        {"id": 1003, "company_id": 5, "title": "T", "launch_date": "2025-08-30T10:00:00Z"},
    ],
    "campaign_targets": [
        {"campaign_id": c, "employee_id": e}
        for c, last in ((1000, 1005), (1001, 1004), (1003, 1010))
        for e in range(last - 5 if c == 1003 else 1000, last)
    ],
    "campaign_events": [
        {
            "id": 5000 + i,
            "campaign_id": c,
            "employee_id": e,
            "type": t,
            "timestamp": "2025-08-31T10:00:00Z",
            "with_captcha": i % 2 == 0,
        }
        for i, (c, e, t) in enumerate(EVENTS)
    ],
    "courses": [{"id": 1000 + n, "company_id": 4 + n, "title": "T"} for n in (0, 1)],
    "inscriptions": [
        {
            "id": e,
            "employee_id": e,
            "course_id": 1000 if e < 1005 else 1001,
            "start_date": "2025-01-01",
            "due_date": due,
            "status": status,
        }
        for e, due, status in INSCRIBED
    ],
}


def oracle(companies: list[int], today: date) -> list[dict[str, Any]]:
    """The rollup's lines computed from the raw rows of the files loaded."""
    rows = {t: sample()[t] + EXTRA.get(t, []) for t in sample()}
    since = f"{year_before(today).isoformat()}T00:00:00Z"
    company_of = {e["id"]: e["company_id"] for e in rows["employees"]}
    events = rows["campaign_events"]
    sends = {(t["campaign_id"], t["employee_id"]) for t in rows["campaign_targets"]}
    sends |= {(e["campaign_id"], e["employee_id"]) for e in events}  # implied by events
    lines = []
    for company in sorted(companies):
        campaigns = [c for c in rows["campaigns"] if c["company_id"] == company]
        recent = {c["id"] for c in campaigns if c["launch_date"] >= since}
        targets = sum(1 for c, _ in sends if c in recent)
        people = {
            kind: len({(e["campaign_id"], e["employee_id"]) for e in events
                       if e["type"] == kind and e["campaign_id"] in recent})
            for kind in ("click", "fail", "report")
        }  # fmt: skip
        mine = [i for i in rows["inscriptions"] if company_of[i["employee_id"]] == company]
        done = sum(1 for i in mine if i["status"] == "completed")
        late = [i for i in mine if i["status"] != "completed" and i["due_date"] is not None]
        late = [i for i in late if i["due_date"] < today.isoformat()]
        lines.append({
            "id": company,
            "name": next(c["name"] for c in rows["companies"] if c["id"] == company),
            "employees": sum(1 for c in company_of.values() if c == company),
            "campaigns": len(campaigns),
            "last_launch_date": max((c["launch_date"] for c in campaigns), default=None),
            "sends": targets,
            "click_rate": rate(people["click"], targets),
            "fail_rate": rate(people["fail"], targets),
            "report_rate": rate(people["report"], targets),
            "inscriptions": len(mine),
            "completion_rate": rate(done, len(mine)),
            "overdue": len(late),
        })  # fmt: skip
    return lines


@pytest.mark.writes
async def test_the_rollup_is_its_raw_rows_page_by_page(
    dated: tuple[TestClient, Day], store: Store, tmp_path: Any
) -> None:
    """Every page of each partner's rollup against the raw rows, on the day a campaign
    launches exactly at the 12 months' first instant (and another a second before)."""
    client, clock = dated
    await store.load([write_fixture(tmp_path / "extra.json", EXTRA)])
    clock.day = date(2025, 9, 1)
    for key, companies in ((KEY_PARTNER, [1, 2]), (PARTNER_KEY_2, [2, 3, 4])):
        lines: list[Any] = []
        for page in (1, 2, 3):
            url = f"{ROLLUP}?per_page=1&page={page}"
            async with await get(client, url, key) as response:
                assert response.headers["X-Total-Count"] == str(len(companies))
                lines += await response.json()
        assert lines == oracle(companies, clock.day)
