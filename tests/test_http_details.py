"""HTTP details of issue 12 item 5: the 401 challenge and control characters in list values.

Pins RFC 9110 11.6.1 (a 401 carries `WWW-Authenticate`; docs/interface.md "Interface decisions",
contract.md 2) for every kind of refused key, and contract.md 3 as docs/interface.md settles it:
a list filter value may hold any character stored text may (a department with a line break
names it), only NUL is 400 with a message that says so, and the OpenAPI document publishes
the very rule the server applies.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.data.fields import NUL_MESSAGE

from .support.factories import API, KEY_1, assert_problem
from .support.loads import write_fixture
from .support.servers import GUARD_SECONDS, ROOT, ProcessGuard
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()  # every test here runs on SQLite and PostgreSQL
STORE_READS_ONLY = True  # one copy of the sample a store (support/stores.py)

CHALLENGE = 'APIKey header="X-API-KEY"'
INSCRIPTIONS = f"{API}/course-inscriptions"
URLS = [f"{API}/campaigns/1/events", f"{API}/victimsapi/7/events", INSCRIPTIONS]
LIST_FILTERS = ("name", "last_name", "email", "department", "country", "teams", "courses")
CONTROLS = [chr(code) for code in (*range(0x20), 0x7F)]
STORED_CONTROLS = CONTROLS[1:]  # all but NUL, which no stored text holds


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("key", [None, "", "   ", KEY_1 + "x", "rk_unknown"])
async def test_every_401_names_the_scheme_and_the_header(
    client: TestClient, url: str, key: str | None
) -> None:
    headers = {} if key is None else {"X-API-KEY": key}
    response = await client.get(url, headers=headers)
    await assert_problem(response, 401)
    assert response.headers.getall("WWW-Authenticate") == [CHALLENGE]


@pytest.mark.writes
async def test_a_revoked_key_gets_the_challenge_too(client: TestClient, store: Store) -> None:
    await store.execute("UPDATE api_keys SET revoked_at = '2026-01-01T00:00:00Z'")
    response = await client.get(URLS[0], headers={"X-API-KEY": KEY_1})  # never cached before
    await assert_problem(response, 401)
    assert response.headers["WWW-Authenticate"] == CHALLENGE


async def test_only_401_carries_the_challenge(client: TestClient) -> None:
    for url, headers in ((URLS[0], {"X-API-KEY": KEY_1}), ("/nope", {}), (URLS[0] + "?x=1", {})):
        response = await client.get(url, headers=headers)
        assert ("WWW-Authenticate" in response.headers) == (response.status == 401), url


async def test_the_document_declares_the_challenge(client: TestClient) -> None:
    document = await (await client.get("/api/docs/openapi.json")).json()
    unauthorized = document["components"]["responses"]["Unauthorized"]
    header = unauthorized["headers"]["WWW-Authenticate"]["$ref"].rsplit("/", 1)[-1]
    declared = document["components"]["headers"][header]
    assert declared["required"] is True and CHALLENGE in declared["description"]
    assert CHALLENGE in document["info"]["description"]


@pytest.mark.parametrize("name", LIST_FILTERS)
async def test_only_nul_is_refused_by_name(client: TestClient, name: str) -> None:
    """Each other C0 control and DEL inside a value, bare or quoted, is part of it (stored
    text may hold it); NUL there is 400 naming the NUL rule."""
    for control in CONTROLS:
        for value in (f"Fin{control}ance", f'"Research,{control} Development"'):
            response = await client.get(
                INSCRIPTIONS, params={f"filter[{name}]": value}, headers={"X-API-KEY": KEY_1}
            )
            if control in STORED_CONTROLS:
                assert response.status == 200, (value, await response.text())
                assert response.headers["X-Total-Count"] == "0", value
                continue
            body = await assert_problem(response, 400)
            assert body["errors"] == {f"filter[{name}]": [NUL_MESSAGE]}, (value, body)


async def test_a_carriage_return_in_a_value_is_no_refusal(client: TestClient) -> None:
    url = f"{INSCRIPTIONS}?filter[department]=%0D%0F"
    response = await client.get(url, headers={"X-API-KEY": KEY_1})
    assert response.status == 200, await response.text()
    assert await response.json() == []


def activity(people: list[dict[str, Any]], course: int) -> dict[str, Any]:
    """For each person: an inscription in ``course``, campaign 1 sent, and a click."""
    return {
        "inscriptions": [
            {"id": 9000 + p["id"], "employee_id": p["id"], "course_id": course}
            | {"start_date": "2025-04-14", "due_date": None, "status": "not_started"}
            for p in people
        ],
        "campaign_targets": [
            {"campaign_id": 1, "employee_id": p["id"], "sent_at": "2025-02-11T09:00:00Z"}
            for p in people
        ],
        "campaign_events": [
            {"id": 90000 + p["id"], "campaign_id": 1, "employee_id": p["id"], "type": "click"}
            | {"timestamp": "2025-02-12T09:00:00Z", "with_captcha": False}
            for p in people
        ],
    }


def awkward_people() -> dict[str, Any]:
    """Two people of company 1 whose department and country hold a line break and a tab,
    with an inscription and a click each: a value of each person filter's kind."""
    people = [
        {"id": 9001, "company_id": 1, "first_name": "Ann\tMarie", "last_name": "Lee"}
        | {"email": "ann@northwind.example", "department": "Sales\nEMEA", "country": "Fr\tance"},
        {"id": 9002, "company_id": 1, "first_name": "Bo", "last_name": "Lee"}
        | {"email": "bo@northwind.example", "department": "Sales", "country": "France"},
    ]
    return {
        "employees": people,
        "teams": [{"id": 9001, "company_id": 1, "name": "Night\r\nShift"}],
        "team_members": [{"team_id": 9001, "employee_id": 9001}],
        "courses": [{"id": 9001, "company_id": 1, "title": "Bell\x07Course"}],
        **activity(people, 9001),
    }


async def picked(client: TestClient, path: str, params: dict[str, str]) -> Any:
    response = await client.get(f"{API}{path}", params=params, headers={"X-API-KEY": KEY_1})
    assert response.status == 200, (path, params, await response.text())
    return await response.json(content_type=None)


@pytest.mark.writes
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("department", "Sales\nEMEA"),
        ("department", "sales\nemea"),
        ("country", "FR\tANCE"),
        ("name", "ann\tmarie"),
        ("teams", "night\r\nshift"),
    ],
)
async def test_a_filter_names_a_value_holding_a_control_character(
    client: TestClient, store: Store, tmp_path: Path, name: str, value: str
) -> None:
    """Whatever the data holds a filter can name, whole and in any letter case: the
    directory, the inscriptions, the stats and a change feed pick that person alone."""
    await store.load([write_fixture(tmp_path / "awkward.json", awkward_people())])
    given = {f"filter[{name}]": value}
    people = await picked(client, "/victimsapi", given)
    assert [p["id"] for p in people] == [9001]
    inscriptions = await picked(client, "/course-inscriptions", given)
    assert [i["victim_email"] for i in inscriptions] == ["ann@northwind.example"]
    changes = await picked(client, "/victimsapi/changes", given)
    assert [p["id"] for p in changes] == [9001]
    window = {"filter[from_date]": "2025-02-01", "filter[to_date]": "2025-02-28"}
    rows = await picked(client, "/stats/phishing", given | window | {"group_by": "department"})
    assert [(r["department"], r["clicked"]) for r in rows] == [("Sales\nEMEA", 1)]


@pytest.mark.writes
async def test_a_course_title_holding_a_control_character_is_named(
    client: TestClient, store: Store, tmp_path: Path
) -> None:
    await store.load([write_fixture(tmp_path / "awkward.json", awkward_people())])
    courses = await picked(client, "/courses", {"filter[title]": "bell\x07course"})
    assert [c["id"] for c in courses] == [9001]
    given = {"filter[courses]": "BELL\x07COURSE"}
    assert len(await picked(client, "/course-inscriptions", given)) == 2


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"Finance', "Double quotes"),
        ('"Finance"x', "Double quotes"),
        ('Fin"ance', "Double quotes"),
        ("Finance,,HR", "Empty"),
        ("Finance, \t", "Empty"),
        ('Finance,"" ,', "Empty"),
    ],
)
async def test_other_list_mistakes_keep_their_own_messages(
    client: TestClient, value: str, message: str
) -> None:
    params = {"filter[department]": value}
    response = await client.get(INSCRIPTIONS, params=params, headers={"X-API-KEY": KEY_1})
    body = await assert_problem(response, 400)
    [text] = body["errors"]["filter[department]"]
    assert text.startswith(message) and "Control" not in text


async def test_a_quoted_value_is_trimmed_around_its_quotes_too(client: TestClient) -> None:
    """Lists are trimmed: spaces after a closing quote count as spaces before one do."""
    totals = set()
    for value in (
        '"Research, Development",Finance',
        ' "Research, Development" , Finance ',
        'Finance , "Research, Development"\u00a0',
    ):
        params = {"filter[department]": value}
        response = await client.get(INSCRIPTIONS, params=params, headers={"X-API-KEY": KEY_1})
        assert response.status == 200, (value, await response.text())
        totals.add(response.headers["X-Total-Count"])
    assert len(totals) == 1 and totals != {"0"}


async def test_a_list_of_spaces_ending_in_a_quote_is_refused(client: TestClient) -> None:
    params = {"filter[department]": " " * 1500 + '"'}
    response = await client.get(INSCRIPTIONS, params=params, headers={"X-API-KEY": KEY_1})
    body = await assert_problem(response, 400)
    assert body["errors"]["filter[department]"][0].startswith("Double quotes")


# A list as long as a request line may be, of blanks that end in a quote: read one way
# only, in microseconds. Every way of splitting the blanks was tried before, their number
# cubed: hours of the event loop, every other request waiting.
BLANKS = """
from app.data.fields import CommaList
for blank in (" ", "\\t"):
    try:
        CommaList().deserialize(blank * 16_000 + 'x"')
    except Exception as refused:
        print(type(refused).__name__)
"""


@pytest.mark.system
def test_a_list_of_blanks_is_read_in_linear_time() -> None:
    """Run apart with 10 s of CPU at most (SIGXCPU beyond), a margin of about 10^5."""
    ProcessGuard.check()
    limit = (10, 10)
    read = subprocess.run(
        [sys.executable, "-c", BLANKS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, limit),
        check=False,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["ValidationError", "ValidationError"]


def padded_people() -> dict[str, Any]:
    """People of company 1 whose department only spaces, a line break or nothing tells
    apart (a fixture may hold such text; a GoPhish import gives the empty department and
    country), each sent campaign 1 and clicking, with an inscription."""
    departments = {9101: " Sales", 9102: "", 9103: "Sales", 9104: "  ", 9105: "Sales\n"}
    people = [
        {"id": n, "company_id": 1, "first_name": "P", "last_name": str(n)}
        | {"email": f"p{n}@northwind.example", "department": d, "country": d and "X"}
        for n, d in departments.items()
    ]
    return {
        "employees": people,
        "courses": [{"id": 9101, "company_id": 1, "title": "Padded Course"}],
        **activity(people, 9101),
    }


@pytest.mark.writes
@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ('" Sales"', [9101]),
        ('  " sALES"  ', [9101]),
        ('""', [9102]),
        ('"  "', [9104]),
        ('"SALES\n"', [9105]),
        ('"", " Sales"', [9101, 9102]),
        (' Sales,"Sales" ', [9103]),
    ],
)
async def test_a_quoted_value_is_taken_exactly(
    client: TestClient, store: Store, tmp_path: Path, value: str, ids: list[int]
) -> None:
    """Inside double quotes nothing is trimmed and "" is the empty value, in any letter
    case: the directory, the inscriptions, a change feed and the stats' groups name a
    department stored with spaces at its ends, or none. A bare value is trimmed."""
    await store.load([write_fixture(tmp_path / "padded.json", padded_people())])
    given = {"filter[department]": value}
    people = await picked(client, "/victimsapi", given | {"per_page": "500"})
    assert [p["id"] for p in people if p["id"] > 9100] == ids
    if ids != [9103]:  # the sample has Sales people of its own
        assert [p["id"] for p in people] == ids
        inscriptions = await picked(client, "/course-inscriptions", given | {"per_page": "500"})
        assert sorted(i["victim_email"] for i in inscriptions) == [
            f"p{n}@northwind.example" for n in ids
        ]
        changes = await picked(client, "/victimsapi/changes", given)
        assert [p["id"] for p in changes] == ids
        window = {"filter[from_date]": "2025-02-01", "filter[to_date]": "2025-02-28"}
        rows = await picked(client, "/stats/phishing", given | window | {"group_by": "department"})
        departments = padded_people()["employees"]
        want = sorted((p["department"], 1) for p in departments if p["id"] in ids)
        assert sorted((r["department"], r["clicked"]) for r in rows) == want


@pytest.mark.writes
async def test_the_empty_country_is_named_too(
    client: TestClient, store: Store, tmp_path: Path
) -> None:
    await store.load([write_fixture(tmp_path / "padded.json", padded_people())])
    people = await picked(client, "/victimsapi", {"filter[country]": '""'})
    assert [p["id"] for p in people] == [9102]
    window = {"filter[from_date]": "2025-02-01", "filter[to_date]": "2025-02-28"}
    given = {"filter[country]": '""', "group_by": "country"}
    rows = await picked(client, "/stats/phishing", given | window)
    assert [(r["country"], r["clicked"]) for r in rows] == [("", 1)]


async def test_choice_lists_stay_trimmed(client: TestClient) -> None:
    """Event types are words: quoted or not, spaces around them are no part of them, and
    none is empty."""
    url = f"{API}/campaigns/1/events"
    totals = []
    for value in ("click", ' " click " ', '"CLICK",click'):
        response = await client.get(
            url, params={"filter[type]": value, "per_page": "500"}, headers={"X-API-KEY": KEY_1}
        )
        assert response.status == 200, (value, await response.text())
        totals.append(response.headers["X-Total-Count"])
    assert len(set(totals)) == 1 and totals != ["0"] * 3
    for value in ('""', '" "'):
        response = await client.get(
            url, params={"filter[type]": value}, headers={"X-API-KEY": KEY_1}
        )
        body = await assert_problem(response, 400)
        assert body["errors"]["filter[type]"][0].startswith("Empty"), value


async def published_pattern(client: TestClient) -> re.Pattern[str]:
    """The item pattern of every free-text list filter in the served document (one rule)."""
    document = await (await client.get("/api/docs/openapi.json")).json()
    patterns = set()
    for path_item in document["paths"].values():
        for param in path_item["get"]["parameters"]:
            items = param["schema"].get("items", {})
            if param["schema"].get("type") == "array" and "enum" not in items:
                patterns.add(items["pattern"])
    [pattern] = patterns
    return re.compile(pattern.replace("$", r"\Z"))  # ECMA-262's `$`: the end of the text


TEXTS = st.text(
    alphabet=st.sampled_from([*CONTROLS, "a", "É", " ", ",", "\x85", "\u2028", "ß", "🙂"]),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=TEXTS)
async def test_the_document_pattern_is_the_server_rule(client: TestClient, text: str) -> None:
    """Text that gets the NUL message the published pattern refuses; text the pattern
    admits (as one item) the server takes.

    Since issue 21 item 6 the pattern states the whole list grammar of contract.md 3, so
    it also refuses control-free text the server splits or refuses otherwise (a bare
    comma or quote, a blank item): it was the control rule alone, read with fullmatch.
    """
    pattern = await published_pattern(client)
    for name in ("name", "department"):
        response = await client.get(
            INSCRIPTIONS, params={f"filter[{name}]": text}, headers={"X-API-KEY": KEY_1}
        )
        assert response.status in (200, 400)
        body = await response.json(content_type=None)
        refused = response.status == 400 and NUL_MESSAGE in body["errors"][f"filter[{name}]"]
        admitted = pattern.search(text) is not None
        assert not (refused and admitted), (text, body)
        assert response.status == 200 or not admitted, (text, body)
