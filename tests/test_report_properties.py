"""Properties of the reports over generated data (contract.md 11, 12; and 1, 3, 4 on them).

Each example takes a random two-company dataset (datasets.py) and adds what the reports
read: campaign targets who may have done nothing, launch dates around the events (so
some come before the launch), course sections and results on a 0.05 grid (so that means
land on rounding ties), and a random date for ``overdue``. The real loader writes it,
the real app serves it, and the plain-Python oracle (reports_oracle.py) says what every
campaign, employee and course must be; on SQLite and, with fewer examples, on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from .support import reports as oracle
from .support.datasets import DAY0, FREE_ID, Data, datasets, serving
from .support.factories import API, KEYS, Day, comparable
from .support.stores import ON_POSTGRESQL, Store

PROFILE = settings(
    max_examples=12,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    derandomize=bool(os.environ.get("CI")),
    database=None if os.environ.get("CI") else settings.default.database,
)
# On PostgreSQL fewer examples: each needs a database of its own.
PG_PROFILE = settings(PROFILE, max_examples=6)
SECTION_TYPES = ("lecture", "video", "quiz", "exam", "survey")
PERSON = ("name", "last_name", "email", "department", "country", "teams")
AUTOMATION = ("include", "exclude_automated", "exclude_suspected")
# What an event's reader may be: a person, a script, or unknown; addresses few enough to
# be shared within a minute.
AGENTS = (None, "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "python-requests/2.31")
ADDRESSES = (None, "198.51.100.7", "198.51.100.8")


@st.composite
def report_datasets(draw: st.DrawFn) -> Data:
    """A dataset of datasets.py with targets, varied launches, sections and results."""
    data = draw(datasets())
    staff: dict[int, list[int]] = {}
    for person in data["employees"]:
        staff.setdefault(person["company_id"], []).append(person["id"])
    targets = []
    for campaign in data["campaigns"]:
        minute = draw(st.integers(0, 9))  # events are at 09:00 to 09:09
        campaign["launch_date"] = f"2026-03-01T09:0{minute}:00Z"
        people = staff[campaign["company_id"]]
        for person in draw(st.lists(st.sampled_from(people), unique=True)):
            sent = draw(st.none() | st.just(campaign["launch_date"]))
            targets.append({"campaign_id": campaign["id"], "employee_id": person, "sent_at": sent})
    data["campaign_targets"] = targets
    # Ids for the rows added here, above the dataset's own (which stay below FREE_ID).
    ids = iter(draw(st.randoms(use_true_random=False)).sample(range(FREE_ID, 2 * FREE_ID), 16))
    for row in data["campaign_events"]:  # scanners, shared addresses (automation's rules)
        row |= {"user_agent": draw(st.sampled_from(AGENTS)), "ip": draw(st.sampled_from(ADDRESSES))}
    clicks = [e for e in data["campaign_events"] if e["type"] == "click"]
    if clicks and draw(st.booleans()):  # a burst: four more clicks in the same second
        burst = draw(st.sampled_from(clicks)) | {"with_captcha": False}
        data["campaign_events"] += [burst | {"id": next(ids)} for _ in range(4)]
    sections: dict[int, list[int]] = {}
    data["course_sections"] = []
    for course in data["courses"]:
        for position in range(1, draw(st.integers(0, 3)) + 1):
            section = {"id": next(ids), "course_id": course["id"], "title": f"S{position}"}
            section |= {"section_type": draw(st.sampled_from(SECTION_TYPES)), "position": position}
            data["course_sections"].append(section)
            sections.setdefault(course["id"], []).append(section["id"])
    results = []
    for inscription in data["inscriptions"]:
        for section in sections.get(inscription["course_id"], []):
            if draw(st.booleans()):
                value = draw(st.none() | st.integers(0, 2000).map(lambda n: n / 20))
                status = None if value is None else ("APPROVED" if value >= 70 else "DISAPPROVED")
                results.append(
                    {"inscription_id": inscription["id"], "section_id": section}
                    | {"completed_at": None, "result": value, "status": status}
                )
    data["section_results"] = results
    return data


def days() -> st.SearchStrategy[dt.date]:
    return st.integers(-3, 40).map(lambda d: DAY0 + dt.timedelta(days=d))


async def body_of(client: Any, url: str, company: int, **params: str) -> Any:
    response = await client.get(url, params=params, headers={"X-API-KEY": KEYS[company]})
    assert response.status == 200, await response.text()
    return await response.json()


@PROFILE
@given(data=report_datasets(), today=days(), more=st.data())
async def test_every_report_is_the_oracles(
    aiohttp_client: Any, data: Data, today: dt.date, more: st.DataObject
) -> None:
    """Campaigns (listed and one by one, with and without captcha, with each value of
    filter[automation]), employees (with each value), courses."""
    await reports_match_the_oracle(aiohttp_client, None, data, today, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=report_datasets(), today=days(), more=st.data())
async def test_every_report_is_the_oracles_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, today: dt.date, more: st.DataObject
) -> None:
    await reports_match_the_oracle(aiohttp_client, store, data, today, more)


async def reports_match_the_oracle(
    aiohttp_client: Any, store: Store | None, data: Data, today: dt.date, more: st.DataObject
) -> None:
    async with serving(aiohttp_client, data, Day(today), store) as client:
        verdicts = oracle.verdicts(data)
        for kind in ("automated", "suspected"):
            event(f"an event {kind}" if kind in verdicts.values() else f"no event {kind}")
        for company in (1, 2):
            for captcha, automation in itertools.product((False, True), AUTOMATION):
                params = {"filter[with_captcha]": "false"} if captcha else {}
                params |= {} if automation == "include" else {"filter[automation]": automation}
                listed = await body_of(client, f"{API}/campaigns", company, **params)
                assert listed == oracle.campaigns(data, company, captcha, automation)
                for campaign in listed:
                    url = f"{API}/campaigns/{campaign['id']}"
                    report = await body_of(client, url, company, **params)
                    expected = oracle.campaign_report(data, campaign["id"], captcha, automation)
                    assert report == expected
                    event(f"a median over an {('even', 'odd')[campaign['clicked'] % 2]} count")
            for automation in AUTOMATION:
                params = {"filter[automation]": automation}
                people = await body_of(
                    client, f"{API}/victimsapi", company, per_page="500", **params
                )
                assert people == oracle.employees(data, company, today, automation)
                person = more.draw(st.sampled_from(people))
                single = await body_of(
                    client, f"{API}/victimsapi/{person['id']}", company, **params
                )
                assert single == person
            coverage = await body_of(client, f"{API}/courses", company, per_page="500")
            assert coverage == oracle.courses(data, company, today)
            ties = any(tied(data, c["id"]) for c in coverage)
            event("a mean halfway between two tenths" if ties else "no tie")


def tied(data: Data, course_id: int) -> bool:
    """Whether the course's exact mean of results lies halfway between two tenths."""
    own = {i["id"] for i in data["inscriptions"] if i["course_id"] == course_id}
    results = [
        Decimal(str(r["result"]))
        for r in data["section_results"]
        if r["inscription_id"] in own and r["result"] is not None
    ]
    return bool(results) and (sum(results) * 10 / len(results)) % 1 == Decimal("0.5")


@PROFILE
@given(data=report_datasets(), more=st.data())
async def test_directory_filters_keep_exactly_the_matching_people(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """Person filters as on the inscriptions, and the two minimums (counting only the
    events filter[automation] keeps), AND-ed (contract.md 12)."""
    await directory_filters_match(aiohttp_client, None, data, more)


@ON_POSTGRESQL
@PG_PROFILE
@given(data=report_datasets(), more=st.data())
async def test_directory_filters_keep_exactly_the_matching_people_on_postgresql(
    aiohttp_client: Any, store: Store, data: Data, more: st.DataObject
) -> None:
    await directory_filters_match(aiohttp_client, store, data, more)


async def directory_filters_match(
    aiohttp_client: Any, store: Store | None, data: Data, more: st.DataObject
) -> None:
    day = DAY0
    async with serving(aiohttp_client, data, Day(day), store) as client:
        for _ in range(4):
            company = more.draw(st.sampled_from((1, 2)))
            everybody = oracle.employees(data, company, day)
            sample_person = more.draw(st.sampled_from(everybody))
            lists: dict[str, list[str]] = {}
            for name in more.draw(st.lists(st.sampled_from(PERSON), unique=True, max_size=2)):
                facts = person_facts(sample_person, name)
                if facts:
                    value = more.draw(st.sampled_from(facts))
                    lists[name] = [more.draw(st.sampled_from((str.upper, str.lower, str)))(value)]
            params = {f"filter[{n}]": quoted(v) for n, v in lists.items()}
            minimums = {}
            for name, count in (("min_clicked", "clicked"), ("min_failed", "failed")):
                if more.draw(st.booleans()):
                    minimums[count] = more.draw(st.integers(0, 3))
                    params[f"filter[{name}]"] = str(minimums[count])
            automation = more.draw(st.sampled_from(AUTOMATION))
            params["filter[automation]"] = automation
            everybody = oracle.employees(data, company, day, automation)
            response = await client.get(
                f"{API}/victimsapi", params={**params, "per_page": "500"},
                headers={"X-API-KEY": KEYS[company]},
            )  # fmt: skip
            assert response.status == 200, await response.text()
            people = {e["id"]: e for e in data["employees"]}
            expected = [
                p
                for p in everybody
                if oracle.person_matches(data, people[p["id"]], lists)
                and all(p["phishing"][c] >= m for c, m in minimums.items())
            ]
            assert await response.json() == expected
            # The total too: the directory's totals summary when only minimums filter.
            assert response.headers["X-Total-Count"] == str(len(expected))
            event("someone matched" if expected else "nobody matched")


def person_facts(person: dict[str, Any], name: str) -> list[str]:
    if name == "teams":
        return [g["name"] for g in person["groups"]]
    return [person["first_name" if name == "name" else name]]


def quoted(values: list[str]) -> str:
    return ",".join(f'"{v}"' if "," in v else v for v in values)


@PROFILE
@given(data=report_datasets(), more=st.data())
async def test_another_companys_ids_look_free_on_the_reports(
    aiohttp_client: Any, data: Data, more: st.DataObject
) -> None:
    """contract.md 1 on /campaigns/{id} and /victimsapi/{id}: the same 404 as a free id."""
    async with serving(aiohttp_client, data) as client:
        company = more.draw(st.sampled_from((1, 2)))
        key = KEYS[company]
        for kind, table in (("campaigns", "campaigns"), ("victimsapi", "employees")):
            free = await comparable(client, f"{API}/{kind}/{FREE_ID}", key)
            assert free[0] == 404
            theirs = [r["id"] for r in data[table] if r["company_id"] != company]
            for record_id in theirs:
                assert await comparable(client, f"{API}/{kind}/{record_id}", key) == free
