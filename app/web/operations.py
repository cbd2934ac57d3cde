"""What the OpenAPI document says about each endpoint: a description and a real example.

OPERATIONS maps each documented handler to its Operation; openapi.py builds the rest
(parameters, bodies, headers, errors) from the marshmallow schemas. Every example is the
very answer the server gives to its request with company 1's sample key on a database
made from fixtures/sample.json: tests/test_openapi_examples.py asks the server and fails,
printing the actual answer, as soon as one goes stale. A new endpoint adds one entry to
OPERATIONS and its example below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp.typedefs import Handler
from marshmallow import Schema

from . import views
from .params import CampaignEventsQuery, EmployeeEventsQuery, FeedQuery, InscriptionsQuery
from .routes import API
from .schemas import CampaignEventSchema, EmployeeEventSchema, FeedEventSchema, InscriptionSchema


@dataclass(frozen=True)
class Example:
    """A request (path and query) and the body the server answers it with."""

    request: str
    body: Any


CAMPAIGN_EVENTS = Example(
    f"{API}/campaigns/1/events?filter[type]=report&per_page=2",
    [
        {
            "id": 312,
            "type": "report",
            "timestamp": "2025-02-11T14:39:10Z",
            "victim": {
                "id": 2,
                "first_name": "Elena",
                "last_name": "García",
                "email": "elena.garcia@northwind.example",
                "department": "HR",
            },
        },
        {
            "id": 96,
            "type": "report",
            "timestamp": "2025-02-12T03:22:01Z",
            "victim": {
                "id": 85,
                "first_name": "Henrik",
                "last_name": "Bauer",
                "email": "henrik.bauer@northwind.example",
                "department": "Research, Development",
            },
        },
    ],
)


EMPLOYEE_EVENTS = Example(
    f"{API}/victimsapi/7/events?per_page=2",
    [
        {
            "id": 35,
            "type": "open",
            "timestamp": "2025-02-13T01:21:41Z",
            "campaign": {
                "id": 1,
                "title": "Overdue Invoice Reminder",
                "launch_date": "2025-02-11T09:00:00Z",
            },
        },
        {
            "id": 406,
            "type": "click",
            "timestamp": "2025-02-13T02:20:57Z",
            "campaign": {
                "id": 1,
                "title": "Overdue Invoice Reminder",
                "launch_date": "2025-02-11T09:00:00Z",
            },
        },
    ],
)


COURSE_INSCRIPTIONS = Example(
    f"{API}/course-inscriptions?filter[email]=oliver.turner@northwind.example&filter[courses]=Password%20Hygiene",
    [
        {
            "victim_name": "Oliver Turner",
            "victim_department": "Engineering",
            "course_title": "Password Hygiene",
            "start_date": "2025-01-13",
            "due_date": "2025-02-27",
            "status": "completed",
            "victim_email": "oliver.turner@northwind.example",
            "groups": [{"name": "Finance Champions"}],
            "victim_country": "United Kingdom",
            "events": [
                {
                    "title": "Why Passwords Fail",
                    "section_type": "lecture",
                    "completed_at": "2025-01-16",
                    "result": None,
                    "status": None,
                },
                {
                    "title": "Passphrases and Managers",
                    "section_type": "video",
                    "completed_at": "2025-01-21",
                    "result": None,
                    "status": None,
                },
                {
                    "title": "Final Exam",
                    "section_type": "exam",
                    "completed_at": "2025-01-25",
                    "result": 81.0,
                    "status": "APPROVED",
                },
            ],
        }
    ],
)


OUTLOOK = "Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17726; Pro)"
EVENT_FEED = Example(
    f"{API}/events?filter[type]=fail&limit=2",
    [
        {
            "id": 47,
            "type": "fail",
            "timestamp": "2025-02-14T16:34:51Z",
            "with_captcha": False,
            "ip": "198.51.100.181",
            "user_agent": OUTLOOK,
            "campaign": {
                "id": 1,
                "title": "Overdue Invoice Reminder",
                "launch_date": "2025-02-11T09:00:00Z",
            },
            "victim": {
                "id": 32,
                "first_name": "Mathieu",
                "last_name": "Moreau",
                "email": "mathieu.moreau@northwind.example",
                "department": "Operations",
            },
        },
        {
            "id": 58,
            "type": "fail",
            "timestamp": "2025-02-13T16:09:43Z",
            "with_captcha": False,
            "ip": "192.0.2.203",
            "user_agent": OUTLOOK,
            "campaign": {
                "id": 1,
                "title": "Overdue Invoice Reminder",
                "launch_date": "2025-02-11T09:00:00Z",
            },
            "victim": {
                "id": 86,
                "first_name": "Megan",
                "last_name": "Taylor",
                "email": "megan.taylor@northwind.example",
                "department": "Finance",
            },
        },
    ],
)


@dataclass(frozen=True)
class Operation:
    """What the document says about one handler; parameters and bodies come from schemas.

    A new endpoint adds one entry to OPERATIONS, and its example.
    """

    operation_id: str
    tag: str
    summary: str
    description: str
    query: type[Schema]
    response: type[Schema]
    example: Example
    path_id: str | None = None  # what {id} names, for a path that has one (404 then)
    many: bool = True  # a JSON array (with the page headers when paginated)
    cursor: bool = False  # paged by cursor: X-Next-Cursor and Link rel=next (the feed)


_NOT_YOURS = "another company's {} is 404, exactly like one that does not exist."
OPERATIONS: dict[Handler, Operation] = {
    views.campaign_events: Operation(
        operation_id="listCampaignEvents",
        tag="events",
        summary="Events of one campaign",
        description=(
            "Every recorded event of one campaign (open, click, report, fail), each with "
            "the employee it concerns as `victim`, ordered by `timestamp`, then `id`. "
            "Without `page` and `per_page` the whole array comes back in one (streamed) "
            "answer; with either, one page and the page headers. "
            "`filter[with_captcha]=false` leaves out captcha-verified events; "
            "`filter[type]` keeps the listed types."
        ),
        query=CampaignEventsQuery,
        response=CampaignEventSchema,
        example=CAMPAIGN_EVENTS,
        path_id="The campaign's id, 1 to 2^63-1; " + _NOT_YOURS.format("campaign"),
    ),
    views.employee_events: Operation(
        operation_id="listEmployeeEvents",
        tag="events",
        summary="Events of one employee",
        description=(
            "Every event of one employee across the company's campaigns, each with its "
            "`campaign` (id, title, launch date), ordered by `timestamp`, then `id`. The "
            "whole array unless `page` or `per_page` is given."
        ),
        query=EmployeeEventsQuery,
        response=EmployeeEventSchema,
        example=EMPLOYEE_EVENTS,
        path_id="The employee's id, 1 to 2^63-1; " + _NOT_YOURS.format("employee"),
    ),
    views.course_inscriptions: Operation(
        operation_id="listCourseInscriptions",
        tag="training",
        summary="Course inscriptions with results",
        description=(
            "The company's course inscriptions, ordered by `start_date`, then inscription "
            "id, always one page at a time (100 unless `per_page` says otherwise). Each "
            "names the employee, their teams (`groups`, by name) and the course, and lists "
            "the course's sections in course order (`events`) with completion date, "
            "`result` (0 to 100) and `status` (APPROVED or DISAPPROVED; both null while "
            "there is no result). List filters match whole values in any letter case; "
            "values of one filter are OR-ed, different filters AND-ed."
        ),
        query=InscriptionsQuery,
        response=InscriptionSchema,
        example=COURSE_INSCRIPTIONS,
    ),
    views.event_feed: Operation(
        operation_id="listEventFeed",
        tag="events",
        summary="Every event of the company, in the order loads wrote them (incremental sync)",
        description=(
            "For collectors (SIEM, BI) that poll: every campaign event of the company, "
            "each with its `campaign` and `victim`, its `ip` and `user_agent`, in the "
            "order loads wrote them (a changed event moves to the end), `limit` at a time "
            "(1 to 1000, default 100). Every answer, even an empty one, carries "
            '`X-Next-Cursor` and `Link: <...>; rel="next"`: store the cursor and send it '
            "as `cursor` next time. Following it from the start and then polling gives "
            "every event that exists exactly once in its latest state, and an event "
            "changed after it was read once more after the change; nothing is skipped, "
            "whatever the ids of new events. The cursor is opaque and signed: one from "
            "another company, for other filters, or altered is 400. `page` and `per_page` "
            "are 400 here. `filter[from_date]` and `filter[to_date]` bound the UTC date "
            "of `timestamp`."
        ),
        query=FeedQuery,
        response=FeedEventSchema,
        example=EVENT_FEED,
        cursor=True,
    ),
}
