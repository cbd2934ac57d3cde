"""The two events endpoints against the sample fixture.

Pins contract.md 1 (tenancy: another company's ids look free), 2 (401 before 400,
path ids, revoked keys), 3 (query parameters of the events endpoints), 4 (ordering) and
the success side of 5 (bodies), for both ``/campaigns/{id}/events`` and
``/victimsapi/{id}/events``. Pagination and the success headers: test_events_paging.py.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from aiohttp.test_utils import TestClient

from .support.events import (
    CAPTCHA,
    FREE_ID,
    KINDS,
    OWN_ID,
    TYPE,
    TYPES,
    Params,
    assert_same,
    campaign_events,
    employee_events,
    expected,
    fetch,
    ids_of,
)
from .support.factories import API, KEY_1, KEY_2, KEYS, assert_problem
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

# ---- authentication and path ids (contract.md 2) ------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("headers", [{}, {"X-API-KEY": ""}, {"X-API-KEY": KEY_1 + "x"}])
async def test_missing_empty_or_wrong_key_is_401(
    client: TestClient, kind: str, headers: dict[str, str]
) -> None:
    """No usable key is 401, even before a bad id would be 400."""
    for record in (OWN_ID[kind], "abc"):  # 401 comes before the 400 of a bad id
        resp = await client.get(f"{API}/{kind}/{record}/events", headers=headers)
        await assert_problem(resp, 401)


@pytest.mark.writes
async def test_revoked_key_gets_401_within_5_seconds(client: TestClient, store: Store) -> None:
    """Revocation works on a running server within the contract's 5 seconds."""
    resp, _ = await fetch(client, "campaigns", 1)
    assert resp.status == 200  # the key is now in the server's cache
    await store.execute(
        "UPDATE api_keys SET revoked_at = '2026-01-01T00:00:00Z' WHERE company_id = 1"
    )
    deadline = time.monotonic() + 5.0
    while (resp := (await fetch(client, "campaigns", 1))[0]).status == 200:
        assert time.monotonic() < deadline, "revoked key still accepted after 5 s"
        await asyncio.sleep(0.1)
    await assert_problem(resp, 401)
    for kind in KINDS:
        await assert_problem((await fetch(client, kind, OWN_ID[kind]))[0], 401)
    assert (await fetch(client, "campaigns", 3, key=KEY_2))[0].status == 200


BAD_IDS = ["abc", "0", "-1", "1.5", "1e3", "+1", "１", "1" * 20, str(2**63)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_path_id_is_400_naming_id(client: TestClient, kind: str, bad: str) -> None:
    """Only decimal 1..2^63-1 is an id; anything else is 400 on `id`."""
    body = await assert_problem((await fetch(client, kind, bad))[0], 400)
    assert set(body["errors"]) == {"id"}


@pytest.mark.parametrize("kind", KINDS)
async def test_largest_id_is_valid_and_not_found(client: TestClient, kind: str) -> None:
    """2^63-1 is a valid id, so a missing one is 404, not 400."""
    await assert_problem((await fetch(client, kind, 2**63 - 1))[0], 404)


# ---- query parameters (contract.md 3) -----------------------------------------------

BAD_PAGING: list[Params] = [[("per_page", "0")], [("per_page", "501")], [("per_page", "abc")]]
BAD_PAGING += [[("page", "0")], [("page", "1"), ("page", "2")]]
BAD_FILTERS: list[Params] = [[(CAPTCHA, v)] for v in ("yes", "1", "")]
BAD_FILTERS += [[(TYPE, v)] for v in ("opened", "open,,click", '""', ",open")]
EMPTY_TYPE = pytest.param(
    "campaigns",
    [(TYPE, "")],
    id="EMPTY_TYPE",
)
BAD_FILTERS += [[(CAPTCHA, "true"), (CAPTCHA, "false")], [("foo", "1")], [("filter[name]", "x")]]


UNKNOWN = {"campaigns": ["foo", "filter[name]"], "victimsapi": ["foo", CAPTCHA, TYPE]}
BAD_CASES = [EMPTY_TYPE, *(("campaigns", p) for p in BAD_FILTERS + BAD_PAGING)]
BAD_CASES += [("victimsapi", p) for p in [*BAD_PAGING, [(CAPTCHA, "false")], [(TYPE, "open")]]]


@pytest.mark.parametrize(("kind", "params"), BAD_CASES)
async def test_bad_parameter_is_400_naming_it(
    client: TestClient, kind: str, params: Params
) -> None:
    """Each bad value, repeated scalar or unknown name is 400 keyed by that parameter."""
    body = await assert_problem((await fetch(client, kind, OWN_ID[kind], params))[0], 400)
    assert set(body["errors"]) == {params[0][0]}


@pytest.mark.parametrize(("kind", "name"), [(k, n) for k in KINDS for n in UNKNOWN[k]])
async def test_unknown_parameter_lists_the_allowed_ones(
    client: TestClient, kind: str, name: str
) -> None:
    """An unknown name tells the caller what the endpoint does accept."""
    body = await assert_problem((await fetch(client, kind, OWN_ID[kind], [(name, "x")]))[0], 400)
    assert set(body["errors"]) == {name}
    message = " ".join(body["errors"][name])
    allowed = ["page", "per_page"] + ([CAPTCHA, TYPE] if kind == "campaigns" else [])
    assert all(a in message for a in allowed), message


COMBOS = [c for r in (1, 2, 3, 4) for c in itertools.combinations(TYPES, r)]


@pytest.mark.parametrize("types", COMBOS, ids=["-".join(c) for c in COMBOS])
async def test_type_filter_returns_exactly_those_types(
    client: TestClient, types: tuple[str, ...]
) -> None:
    """Any set of types, any letter case, selects exactly those events."""
    value = ",".join(t.upper() if i % 2 else t.title() for i, t in enumerate(types))
    for company, campaign in ((1, 1), (2, 5)):
        resp, body = await fetch(client, "campaigns", campaign, [(TYPE, value)], KEYS[company])
        wanted = campaign_events(campaign, types)
        assert wanted and resp.status == 200
        assert_same(body, wanted)


@pytest.mark.parametrize(
    ("params", "types", "without"),
    [
        ([(CAPTCHA, "false")], TYPES, True),
        ([(CAPTCHA, "FaLsE")], TYPES, True),
        ([(CAPTCHA, "true")], TYPES, False),
        ([(CAPTCHA, "TRUE")], TYPES, False),
        ([], TYPES, False),
        ([(CAPTCHA, "false"), (TYPE, "open,click")], ("open", "click"), True),
        ([(TYPE, " open "), (TYPE, "click"), (CAPTCHA, "false")], ("open", "click"), True),
    ],
)
async def test_captcha_and_combined_filters(
    client: TestClient, params: Params, types: tuple[str, ...], without: bool
) -> None:
    """false drops exactly the captcha events; true and absent drop nothing."""
    for campaign in ids_of("campaigns", 1):
        wanted = campaign_events(campaign, types, without)
        assert_same((await fetch(client, "campaigns", campaign, params))[1], wanted)
    everything = campaign_events(1)
    assert len(campaign_events(1, without_captcha=True)) < len(everything)  # the test can fail


async def test_every_record_of_both_companies(client: TestClient) -> None:
    """Every campaign and employee answers its full fixture events, in order."""
    for company, key in KEYS.items():
        for kind, table in zip(KINDS, ("campaigns", "employees"), strict=True):
            for record in ids_of(table, company):
                resp, body = await fetch(client, kind, record, key=key)
                assert resp.status == 200
                assert_same(body, expected(kind, record))


async def test_jose_nunez_events_and_tie_break(client: TestClient) -> None:
    """Non-ASCII names survive, and equal timestamps are ordered by id."""
    body = (await fetch(client, "victimsapi", 7))[1]
    assert len(body) == 12 and body == employee_events(7)
    raw = (await fetch(client, "campaigns", body[0]["campaign"]["id"]))[1]
    assert {"first_name": "José", "last_name": "Núñez"}.items() <= next(
        e["victim"] for e in raw if e["victim"]["id"] == 7
    ).items()
    ties = 0
    for campaign in ids_of("campaigns", 1):
        got = [(e["timestamp"], e["id"]) for e in (await fetch(client, "campaigns", campaign))[1]]
        assert got == sorted(got)
        ties += len(got) - len({t for t, _ in got})
    assert ties > 0, "the sample must hold equal timestamps for the tie-break to be tested"


# ---- tenancy (contract.md 1) --------------------------------------------------------

NOISY = ("date", "x-request-id", "ratelimit-remaining", "ratelimit-reset", "ratelimit")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("company", "other"), [(1, 2), (2, 1)])
async def test_other_company_ids_look_free(
    client: TestClient, kind: str, company: int, other: int
) -> None:
    """Another tenant's ids get the very same 404 as an id nobody has."""
    table = "campaigns" if kind == "campaigns" else "employees"

    async def answer(record: int) -> tuple[bytes, dict[str, str], set[str]]:
        headers = {"X-API-KEY": KEYS[company], "X-Request-ID": "tenancy-probe"}
        resp = await client.get(f"{API}/{kind}/{record}/events", headers=headers)
        await assert_problem(resp, 404)
        names = {h.lower() for h in resp.headers}
        values = {h.lower(): v for h, v in resp.headers.items() if h.lower() not in NOISY}
        return await resp.read(), values, names

    free = await answer(FREE_ID)
    for record in ids_of(table, other):
        assert await answer(record) == free, record
    assert (await fetch(client, kind, ids_of(table, company)[0], key=KEYS[company]))[
        0
    ].status == 200
