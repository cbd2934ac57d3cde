"""Parsed query strings (contract.md 3, 4, 13): each endpoint's validated parameters as a
frozen dataclass, the form its view reads.

The defaults of contract.md 4 (page 1, 100 a page) and 13 (100 events), the event arrays
that paginate only when asked to, case-folded list filters, the feed's normalised filter
set and scope, and a bad path id reported before the query string. The requests are
aiohttp's own test requests; the parsers are the app's.
"""

from __future__ import annotations

import dataclasses

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from app.data.feed import FeedFilters
from app.data.listings import Paging
from app.web.errors import BadRequest
from app.web.params import (
    CampaignEvents,
    CampaignEventsQuery,
    CoursesQuery,
    EmployeeEventsQuery,
    EmployeesQuery,
    FeedQuery,
    QueryParsers,
)


def request(query: str, path_id: str = "1") -> web.Request:
    return make_mocked_request("GET", f"/x?{query}", match_info={"id": path_id})


def test_campaign_events_parse_to_a_frozen_dataclass() -> None:
    parsers = QueryParsers()
    query = "filter[type]=click,open,click&filter[with_captcha]=false"
    parsed = parsers.parse(CampaignEventsQuery(), request(query))
    assert parsed == CampaignEvents(types=("click", "open"), without_captcha=True, paging=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.paging = Paging(1, 1)  # type: ignore[misc]
    again = parsers.parse(CampaignEventsQuery(), request(query))
    assert again is parsed  # remembered: the same query string is validated once


def test_event_arrays_paginate_only_when_asked_to() -> None:
    parsers = QueryParsers()
    schema = EmployeeEventsQuery()
    assert parsers.parse(schema, request("")).paging is None
    assert parsers.parse(schema, request("page=2")).paging == Paging(2, 100)
    assert parsers.parse(schema, request("per_page=7")).paging == Paging(1, 7)
    courses = parsers.parse(CoursesQuery(), request("filter[title]=Phishing%20101"))
    assert courses.paging == Paging(1, 100) and list(courses.titles) == ["phishing 101"]


def test_list_filters_are_case_folded_and_minimums_default_to_zero() -> None:
    parsed = QueryParsers().parse(EmployeesQuery(), request("filter[name]=ÁNA,Bo"))
    assert parsed.filters.lists == {"name": ["ána", "bo"]}
    assert (parsed.filters.min_clicked, parsed.filters.min_failed) == (0, 0)


def test_the_feed_carries_its_normalised_filters_and_scope() -> None:
    parsed = QueryParsers().parse(FeedQuery(), request("filter[type]=open,click,open&limit=5"))
    filters = FeedFilters.of(types=("click", "open"))
    assert (parsed.filters, parsed.scope) == (filters, filters.scope())
    assert (parsed.limit, parsed.cursor) == (5, None)
    assert QueryParsers().parse(FeedQuery(), request("")).limit == 100


def test_a_bad_path_id_is_reported_before_the_query() -> None:
    with pytest.raises(BadRequest) as raised:
        QueryParsers().parse_with_id(CampaignEventsQuery(), request("nope=1", "0"))
    assert list(raised.value.errors or ()) == ["id"]  # the query's unknown name comes after
    campaign_id, parsed = QueryParsers().parse_with_id(CampaignEventsQuery(), request("", "42"))
    assert campaign_id == 42 and parsed.paging is None
