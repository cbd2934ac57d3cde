"""GET /course-inscriptions: records, filters and tenancy (contract.md 1, 3, 4, 5).

Pins reporting-api.md 2.3, 2.4 and 4.3: every record is checked against an oracle built
in plain Python from fixtures/sample.json (tests/support/inscriptions.py), never from the
code under test.
Pagination lives in test_inscriptions_paging.py.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from yarl import URL as YarlURL

from .support.factories import KEY_1, KEY_2, KEYS, assert_problem
from .support.inscriptions import LIST_VALUES, URL, Filters, expected, get, get_all
from .support.stores import on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)


@pytest.mark.parametrize("company", [1, 2])
async def test_default_page_equals_oracle_with_key_order(client: TestClient, company: int) -> None:
    """No parameters: page 1 of 100 in contract order, exact keys in 2.3/2.4 order."""
    response = await get(client, [], KEYS[company])
    assert response.status == 200
    body = await response.json()
    want = expected(company)[:100]
    assert body == want
    assert [list(r) for r in body] == [list(r) for r in want]
    assert [list(e) for r in body for e in r["events"]] == [
        list(e) for r in want for e in r["events"]
    ]


FILTER_CASES = [
    pytest.param({"name": ["Elena"]}, id="name"),
    pytest.param({"last_name": ["Martín"]}, id="last_name"),
    pytest.param({"email": ["jose.nunez@northwind.example"]}, id="email"),
    pytest.param({"department": ["Finance"]}, id="department"),
    pytest.param({"country": ["Poland"]}, id="country"),
    pytest.param({"teams": ["Night Shift"]}, id="teams"),
    pytest.param({"courses": ["Password Hygiene"]}, id="courses"),
    pytest.param({"name": ["Elena", "Tomasz"]}, id="name-two"),
    pytest.param({"last_name": ["Becker", "Zieliński"]}, id="last_name-two"),
    pytest.param(
        {"email": ["jose.nunez@northwind.example", "zoe.angstrom@northwind.example"]},
        id="email-two",
    ),
    pytest.param({"department": ["Finance", "Legal"]}, id="department-two"),
    pytest.param({"country": ["Spain", "Mexico"]}, id="country-two"),
    pytest.param({"teams": ["Blue Team", "Security Ambassadors"]}, id="teams-two"),
    pytest.param({"courses": ["Password Hygiene", "Secure Remote Work"]}, id="courses-two"),
    pytest.param({"name": ["JOSÉ", "zoË"]}, id="name-case"),
    pytest.param({"last_name": ["NÚÑEZ", "ångSTRÖM"]}, id="last_name-case"),
    pytest.param({"email": ["JOSE.NUNEZ@Northwind.Example"]}, id="email-case"),
    pytest.param({"department": ["fINANCE", "customer support"]}, id="department-case"),
    pytest.param({"country": ["SPAIN", "poland"]}, id="country-case"),
    pytest.param({"teams": ["NIGHT SHIFT"]}, id="teams-case"),
    pytest.param({"courses": ["phishing FUNDAMENTALS"]}, id="courses-case"),
    pytest.param({"name": ["Elena"], "department": ["Sales"]}, id="name+department"),
    pytest.param({"country": ["Spain", "Poland"], "courses": ["Data Protection Basics"]}, id="c+c"),
    pytest.param({"teams": ["Finance Champions"], "last_name": ["Núñez", "Becker"]}, id="t+ln"),
    pytest.param(
        {
            "email": ["ELENA.LOPEZ@northwind.example", "elena.ruiz@NORTHWIND.example"],
            "country": ["spain"],
        },
        id="e+c",
    ),
    pytest.param({"department": ["Engineering"], "from_due_date": "2025-10-01"}, id="d+due"),
    pytest.param({"last_name": ["Smith, Jr."]}, id="quoted-last_name"),
    pytest.param({"department": ["Research, Development"]}, id="quoted-department"),
    pytest.param({"last_name": ["Smith, Jr.", "Vega"], "department": ["Operations"]}, id="q+d"),
]


@pytest.mark.parametrize("filters", FILTER_CASES)
async def test_list_filters_match_oracle(client: TestClient, filters: Filters) -> None:
    """Each list filter alone, with two values, in another case and combined."""
    want = expected(1, filters)
    assert 0 < len(want) < len(expected(1)), "case must select a proper subset"
    assert await get_all(client, filters) == want


@pytest.mark.parametrize(
    "filters",
    [
        {"name": ["Elen"]},
        {"email": ["northwind.example"]},
        {"department": ["Research"]},
        {"name": ["Elena"], "department": ["Engineering"]},
    ],
)
async def test_partial_values_and_disjoint_filters_match_nothing(
    client: TestClient, filters: Filters
) -> None:
    """Values are whole, not prefixes or substrings; filters are AND-ed."""
    assert expected(1, filters) == []
    assert await get_all(client, filters) == []


@pytest.mark.parametrize(
    "params",
    [
        [("filter[name]", "Elena"), ("filter[name]", "Tomasz")],
        [("filter[name]", "  Elena ,   Tomasz ")],
        [("filter[name]", '"Elena",Tomasz')],
        [("filter[name]", "Elena,Tomasz"), ("filter[name]", "elena")],
    ],
    ids=["repeated", "trimmed", "quoted", "duplicate"],
)
async def test_list_spellings_mean_the_same(
    client: TestClient, params: list[tuple[str, str]]
) -> None:
    """A repeated list filter merges; values are trimmed; quotes are optional."""
    response = await get(client, [*params, ("per_page", "500")])
    assert response.status == 200
    want = expected(1, {"name": ["Elena", "Tomasz"]})
    assert len(want) > len(expected(1, {"name": ["Elena"]}))
    assert await response.json() == want


DATE_PICKS = {
    "from_inscription_date": "2025-06-02",
    "to_inscription_date": "2025-06-02",
    "from_due_date": "2025-06-13",
    "to_due_date": "2025-06-13",
}


@pytest.mark.parametrize("shift", [-1, 0, 1])
@pytest.mark.parametrize("bound", sorted(DATE_PICKS))
async def test_date_bound_is_inclusive(client: TestClient, bound: str, shift: int) -> None:
    """A bound at, just before and just after a real inscription date."""
    day = dt.date.fromisoformat(DATE_PICKS[bound]) + dt.timedelta(days=shift)
    filters = {bound: day.isoformat()}
    want = expected(1, filters)
    field = "start_date" if "inscription" in bound else "due_date"
    assert 0 < len(want) < len(expected(1))
    if shift == 0:
        assert any(r[field] == DATE_PICKS[bound] for r in want)
    assert await get_all(client, filters) == want


async def test_date_range_of_one_day_and_null_due_dates(client: TestClient) -> None:
    """from == to is allowed; an inscription without due date never meets a due bound."""
    one_day = {"from_inscription_date": "2025-06-02", "to_inscription_date": "2025-06-02"}
    assert await get_all(client, one_day) == expected(1, one_day)
    wide = {"from_due_date": "1900-01-01", "to_due_date": "2999-12-31"}
    body = await get_all(client, wide)
    assert body == [r for r in expected(1) if r["due_date"] is not None]
    assert len(body) < len(expected(1))


BAD_FILTERS = [
    ([("filter[from_inscription_date]", "2026-13-01")], ["filter[from_inscription_date]"]),
    ([("filter[to_inscription_date]", "2026-1-5")], ["filter[to_inscription_date]"]),
    ([("filter[from_due_date]", "20260105")], ["filter[from_due_date]"]),
    ([("filter[to_due_date]", "2026-02-30")], ["filter[to_due_date]"]),
    ([("filter[to_due_date]", "2026-01-05T00:00:00Z")], ["filter[to_due_date]"]),
    ([("filter[name]", "Elena,,Tomasz")], ["filter[name]"]),
    pytest.param(
        [("filter[teams]", "")],
        ["filter[teams]"],
        id="empty-value",
    ),
    pytest.param(
        [("filter[name]", "Elena"), ("filter[name]", "")],
        ["filter[name]"],
        id="repeated-empty-value",
    ),
    pytest.param([("filter[teams]", '"",')], ["filter[teams]"], id="empty-after-quoted-empty"),
    ([("filter[country]", "Spain,")], ["filter[country]"]),
    ([("filter[last_name]", '"Smith, Jr.')], ["filter[last_name]"]),
    ([("filter[email]", ",".join(f"p{n}@x.example" for n in range(101)))], ["filter[email]"]),
    ([("filter[foo]", "x")], ["filter[foo]"]),
    ([("foo", "x")], ["foo"]),
    ([("filter[from_due_date]", "2026-01-01")] * 2, ["filter[from_due_date]"]),
    (
        [("filter[foo]", "x"), ("filter[to_due_date]", "2026-1-5")],
        ["filter[foo]", "filter[to_due_date]"],
    ),
]


@pytest.mark.parametrize(("params", "names"), BAD_FILTERS)
async def test_malformed_filter_is_400_naming_it(
    client: TestClient, params: list[tuple[str, str]], names: list[str]
) -> None:
    """contract.md 3 and 5: 400 with one `errors` entry per offending parameter."""
    body = await assert_problem(await get(client, params), 400)
    assert sorted(body["errors"]) == sorted(names)


@pytest.mark.parametrize("pair", ["inscription", "due"])
async def test_reversed_date_range_is_400(client: TestClient, pair: str) -> None:
    """from_* later than its to_* is 400 naming one of the two bounds."""
    low, high = f"filter[from_{pair}_date]", f"filter[to_{pair}_date]"
    params = [(low, "2025-06-03"), (high, "2025-06-02")]
    body = await assert_problem(await get(client, params), 400)
    assert set(body["errors"]) & {low, high}
    assert set(body["errors"]) <= {low, high}


async def test_unknown_parameter_lists_the_allowed_ones(client: TestClient) -> None:
    """The message for an unknown name lists every allowed parameter."""
    body = await assert_problem(await get(client, [("filter[first_name]", "Elena")]), 400)
    message = " ".join(body["errors"]["filter[first_name]"])
    for name in [*(f"filter[{n}]" for n in [*LIST_VALUES, *DATE_PICKS]), "page", "per_page"]:
        assert name in message


async def test_hundred_values_are_allowed(client: TestClient) -> None:
    """At most 100 values per filter: exactly 100 is fine."""
    emails = ["jose.nunez@northwind.example"] + [f"p{n}@x.example" for n in range(99)]
    assert await get_all(client, {"email": emails}) == expected(1, {"email": emails[:1]})


async def test_other_company_never_appears(client: TestClient) -> None:
    """contract.md 1: company 2's employees are invisible to KEY_1, even by exact email."""
    theirs = sorted({rec["victim_email"] for rec in expected(2)})[:3]
    assert await get_all(client, {"email": theirs}) == []
    assert await get_all(client, {"department": ["Clinical Services"]}) == []
    assert await get_all(client, {"email": theirs}, KEY_2) == expected(2, {"email": theirs})
    ours = {rec["victim_email"] for rec in expected(1)}
    assert ours and not ours & {rec["victim_email"] for rec in expected(2)}


@pytest.mark.parametrize(
    "filters",
    [
        {"courses": ["Phishing Fundamentals"]},
        {"courses": ["Secure Remote Work"]},
        {"teams": ["Blue Team"]},
        {"teams": ["Security Ambassadors"]},
    ],
)
@pytest.mark.parametrize("company", [1, 2])
async def test_shared_names_return_only_own_company(
    client: TestClient, company: int, filters: Filters
) -> None:
    """Course and team names used by both companies select only the caller's records."""
    want = expected(company, filters)
    assert want and set(map(str, want)).isdisjoint(map(str, expected(3 - company, filters)))
    body = await get_all(client, filters, KEYS[company])
    assert body == want


async def test_awkward_records_appear_correctly(client: TestClient) -> None:
    """Two teams sorted, no team, no due date, a zero result, an unfinished section."""
    body = await get_all(client, {})
    assert body == expected(1)
    groups = [[g["name"] for g in r["groups"]] for r in body]
    assert any(len(g) >= 2 and g == sorted(g) for g in groups)
    assert any(g == [] for g in groups)
    assert any(r["due_date"] is None for r in body)
    events = [e for r in body for e in r["events"]]
    zero = {"result": 0, "status": "DISAPPROVED"}
    assert any(e["result"] == 0 and {k: e[k] for k in zero} == zero for e in events)
    assert any(e["completed_at"] is None and e["result"] is None for e in events)
    assert all((e["result"] is None) == (e["status"] is None) for e in events)
    assert all(e["result"] is None or isinstance(e["result"], (int, float)) for e in events)


async def test_an_encoded_ampersand_is_not_a_separator(client: Any) -> None:
    """``a%26b`` is one value; ``a&b`` is a second, unknown parameter (contract.md 3)."""
    base = f"{URL}?filter[name]="
    headers = {"X-API-KEY": KEY_1}
    one_value = await client.get(YarlURL(base + "Elena%26b", encoded=True), headers=headers)
    assert one_value.status == 200
    assert await one_value.json() == []
    two_parameters = await client.get(YarlURL(base + "Elena&b", encoded=True), headers=headers)
    body = await assert_problem(two_parameters, 400)
    assert list(body["errors"]) == ["b"]
