"""Extreme but valid parameters on every endpoint (contract.md 2, 3, 5), on both stores.

The last and first dates a filter accepts, the largest page, and the largest minimums
are answers, never a 500: a date filter has no day after 9999-12-31 to compute, and a
page whose offset passes SQL's widest integer is past the end, an empty array.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from .support.factories import API, Day, get
from .support.stores import Store, on_both_stores

store_kind = on_both_stores()
STORE_READS_ONLY = True
BIGGEST = 2**63 - 1

DATE_FILTERS = {
    "/events": ("from_date", "to_date"),
    "/campaigns": ("from_launch_date", "to_launch_date"),
    "/course-inscriptions": (
        "from_inscription_date",
        "to_inscription_date",
        "from_due_date",
        "to_due_date",
    ),
}
PAGED = (
    "/campaigns",
    "/victimsapi",
    "/courses",
    "/course-inscriptions",
    "/campaigns/1/events",
    "/victimsapi/1/events",
)


async def body_of(client: TestClient, path: str) -> object:
    response = await get(client, f"{API}{path}")
    assert response.status == 200, await response.text()
    return await response.json(content_type=None)


@pytest.mark.parametrize(
    "path, name",
    [(path, name) for path, names in DATE_FILTERS.items() for name in names],
)
@pytest.mark.parametrize("day", ["0001-01-01", "9999-12-31"])
async def test_the_first_and_last_day_filter(
    client: TestClient, path: str, name: str, day: str
) -> None:
    whole = await body_of(client, f"{path}?per_page=500" if path != "/events" else path)
    body = await body_of(client, f"{path}?filter[{name}]={day}")
    assert isinstance(body, list)
    # Every sample date lies between the two: the filter keeps all or nothing.
    keeps_all = name.startswith("from_") == (day == "0001-01-01")
    if keeps_all and path != "/course-inscriptions":  # due dates may be null
        assert len(body) == min(len(whole), 100)
    if not keeps_all:
        assert body == []


@pytest.mark.parametrize("path", PAGED)
@pytest.mark.parametrize("per_page", [1, 500])
async def test_the_largest_page_is_past_the_end(
    client: TestClient, path: str, per_page: int
) -> None:
    response = await get(client, f"{API}{path}?page={BIGGEST}&per_page={per_page}")
    assert response.status == 200, await response.text()
    assert await response.json(content_type=None) == []
    assert response.headers["X-Page"] == str(BIGGEST)


@pytest.mark.parametrize("name", ["min_clicked", "min_failed"])
async def test_the_largest_minimum_keeps_nobody(client: TestClient, name: str) -> None:
    assert await body_of(client, f"/victimsapi?filter[{name}]={BIGGEST}") == []


@pytest.mark.parametrize("day", ["２025-01-01", "2025-01-٠١"])
async def test_a_date_in_other_digits_is_not_in_the_form(client: TestClient, day: str) -> None:
    """Only ASCII digits write a date: others get the form's message, not the calendar's."""
    response = await get(client, f"{API}/campaigns?filter[from_launch_date]={day}")
    assert response.status == 400
    problem = await response.json(content_type=None)
    assert problem["errors"] == {"filter[from_launch_date]": ["Not a date in the form YYYY-MM-DD."]}


# Instants at the calendar's ends and on either side of 1970: (campaign, launch) and
# (campaign, employee, type, timestamp). Seconds and medians are computed here apart.
EDGE_LAUNCHES = {9800: "0001-01-01T00:00:00Z", 9801: "1969-12-31T23:59:59Z"}
EDGE_EVENTS = [
    (9800, 9800, "click", "9999-12-31T23:59:59Z"),
    (9800, 9801, "click", "0001-01-01T00:00:00Z"),
    (9800, 9802, "report", "1900-03-01T00:00:00Z"),
    (9801, 9800, "click", "1969-12-31T23:59:58Z"),  # before the launch: 0 s
    (9801, 9801, "click", "1970-01-01T00:00:01Z"),
    (9801, 9802, "click", "1970-01-01T00:00:00Z"),
]


def edge_fixture() -> dict[str, Any]:
    people = sorted({pid for _, pid, _, _ in EDGE_EVENTS})
    return {
        "employees": [
            {"id": pid, "company_id": 1, "first_name": "Edge", "last_name": str(pid),
             "email": f"edge{pid}@example.com", "department": "Edges", "country": "Z"}
            for pid in people
        ],
        "campaigns": [
            {"id": cid, "company_id": 1, "title": f"Edge {cid}", "launch_date": launch}
            for cid, launch in EDGE_LAUNCHES.items()
        ],
        "campaign_events": [
            {"id": 98000 + n, "campaign_id": cid, "employee_id": pid, "type": kind,
             "timestamp": at, "with_captcha": False}
            for n, (cid, pid, kind, at) in enumerate(EDGE_EVENTS)
        ],
        "courses": [{"id": 9800, "company_id": 1, "title": "Edge course"}],
        "inscriptions": [
            {"id": 9800 + n, "employee_id": pid, "course_id": 9800, "start_date": "0001-01-01",
             "due_date": due, "status": "in_progress"}
            for n, (pid, due) in enumerate([(9800, "9999-12-31"), (9801, "0001-01-01")])
        ],
    }  # fmt: skip


def edge_median(campaign: int, kind: str) -> int | None:
    """The lower middle of the whole seconds from the launch, an earlier event counting 0."""
    launch = dt.datetime.fromisoformat(EDGE_LAUNCHES[campaign])
    seconds = sorted(
        max(0, int((dt.datetime.fromisoformat(at) - launch).total_seconds()))
        for cid, _, k, at in EDGE_EVENTS
        if (cid, k) == (campaign, kind)
    )
    return seconds[(len(seconds) - 1) // 2] if seconds else None


async def records(client: TestClient, path: str) -> list[Any]:
    body = await body_of(client, path)
    assert isinstance(body, list)
    return body


@pytest.mark.writes
async def test_instants_at_the_calendar_s_ends(
    dated: tuple[TestClient, Day], store: Store, tmp_path: Path
) -> None:
    """Stored instants from year 1 to 9999 and before 1970 sort, filter, bucket and give
    whole seconds as any others, on both stores."""
    path = tmp_path / "edges.json"
    path.write_text(json.dumps(edge_fixture()), encoding="utf-8")
    await store.load([path])
    client, _ = dated
    for cid in EDGE_LAUNCHES:
        report = await body_of(client, f"/campaigns/{cid}")
        assert isinstance(report, dict)
        assert report["launch_date"] == EDGE_LAUNCHES[cid]
        for kind in ("click", "report"):
            assert report[f"median_seconds_to_first_{kind}"] == edge_median(cid, kind)
    assert edge_median(9800, "report") == 59_931_705_600  # year 1 to 1900
    events = await records(client, "/campaigns/9800/events")
    assert [e["timestamp"] for e in events] == sorted(
        at for c, _, _, at in EDGE_EVENTS if c == 9800
    )
    launched = await records(client, "/campaigns?filter[to_launch_date]=1969-12-31")
    assert [c["id"] for c in launched] == [9800, 9801]
    for year, cid in (("0001", 9800), ("1969", 9801)):
        window = f"filter[from_date]={year}-01-01&filter[to_date]={year}-12-31"
        (row,) = await records(client, f"/stats/phishing?interval=year&{window}")
        assert (row["campaigns"], row["median_seconds_to_first_click"]) == (
            1,
            edge_median(cid, "click"),
        )
    (course,) = await records(client, "/courses?filter[title]=Edge course")
    assert course["overdue"] == 1  # due on 0001-01-01; 9999-12-31 is not yet
