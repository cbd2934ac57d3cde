"""Extreme but valid parameters on every endpoint (contract.md 2, 3, 5), on both stores.

The last and first dates a filter accepts, the largest page, and the largest minimums
are answers, never a 500: a date filter has no day after 9999-12-31 to compute, and a
page whose offset passes SQL's widest integer is past the end, an empty array.
"""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from .support.factories import API, get
from .support.stores import on_both_stores

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
        assert len(body) == min(len(whole), 100)  # type: ignore[arg-type]
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
