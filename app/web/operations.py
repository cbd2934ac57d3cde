"""What the OpenAPI document says about each endpoint: a description and a real example.

OPERATIONS maps each documented handler to its Operation; openapi.py builds the rest
(parameters, bodies, headers, errors) from the marshmallow schemas. Every example (in
examples.py) is the very answer the server gives to its request with company 1's sample
key on a database made from fixtures/sample.json. A new endpoint adds one entry to
OPERATIONS and its example.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp.typedefs import Handler
from marshmallow import Schema

from . import examples, views
from .examples import Example
from .params import (
    CampaignEventsQuery,
    CampaignQuery,
    CampaignsQuery,
    CoursesQuery,
    EmployeeEventsQuery,
    EmployeeQuery,
    EmployeesQuery,
    FeedQuery,
    InscriptionsQuery,
)
from .schemas import (
    CampaignEventSchema,
    CampaignReportSchema,
    CampaignSummarySchema,
    CourseSchema,
    EmployeeEventSchema,
    EmployeeSchema,
    FeedEventSchema,
    InscriptionSchema,
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
        example=examples.CAMPAIGN_EVENTS,
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
        example=examples.EMPLOYEE_EVENTS,
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
        example=examples.COURSE_INSCRIPTIONS,
    ),
    views.campaign_list: Operation(
        operation_id="listCampaigns",
        tag="reports",
        summary="Campaigns with their funnel",
        description=(
            "The company's campaigns, ordered by `launch_date`, then `id`, always one page "
            "at a time. Each gives its `targets` (the employees it was sent to) and how many "
            "of them opened, clicked, reported and failed (distinct people with at least one "
            "such event), each count's rate over the targets (4 decimals, null without "
            "targets), and the median seconds from the launch to a person's first click and "
            "first report (the lower middle value; an event before the launch counts 0; "
            "null when nobody did). `filter[with_captcha]=false` leaves captcha-verified "
            "events out of every count and median. `filter[title]` matches whole titles in "
            "any letter case; the launch-date bounds compare the UTC date, inclusive."
        ),
        query=CampaignsQuery,
        response=CampaignSummarySchema,
        example=examples.CAMPAIGNS,
    ),
    views.campaign_report: Operation(
        operation_id="getCampaign",
        tag="reports",
        summary="One campaign's funnel, by department",
        description=(
            "One campaign as a JSON object: the fields of the list, and `by_department`, "
            "one entry per department of its targets (by name) with that department's "
            "targets, counts and rates (no medians). `filter[with_captcha]=false` applies "
            "to every figure, as on the list."
        ),
        query=CampaignQuery,
        response=CampaignReportSchema,
        example=examples.CAMPAIGN_REPORT,
        path_id="The campaign's id, 1 to 2^63-1; " + _NOT_YOURS.format("campaign"),
        many=False,
    ),
    views.employee_list: Operation(
        operation_id="listEmployees",
        tag="reports",
        summary="The employee directory with people risk",
        description=(
            "The company's employees, ordered by `id`, always one page at a time, each with "
            "their teams (`groups`, by name), a `phishing` block (campaigns they were a "
            "target of; distinct campaigns in which they opened, clicked, reported, failed; "
            "their latest event) and a `training` block (inscriptions by status, and those "
            "`overdue`: not completed, due before today's UTC date). The person filters "
            "match as on the course inscriptions; `filter[min_clicked]` and "
            "`filter[min_failed]` keep the repeat offenders. The ETag changes with the UTC "
            "date too."
        ),
        query=EmployeesQuery,
        response=EmployeeSchema,
        example=examples.EMPLOYEES,
    ),
    views.employee_report: Operation(
        operation_id="getEmployee",
        tag="reports",
        summary="One employee with people risk",
        description=(
            "One employee as a JSON object, as in the directory. No query parameters. The "
            "ETag changes with the UTC date too (`overdue` depends on it)."
        ),
        query=EmployeeQuery,
        response=EmployeeSchema,
        example=examples.EMPLOYEE_REPORT,
        path_id="The employee's id, 1 to 2^63-1; " + _NOT_YOURS.format("employee"),
        many=False,
    ),
    views.course_list: Operation(
        operation_id="listCourses",
        tag="training",
        summary="Courses with their training coverage",
        description=(
            "The company's courses, ordered by `id`, always one page at a time: sections, "
            "inscriptions by status, those `overdue` (not completed, due before today's UTC "
            "date), `completion_rate` (completed over inscriptions, 4 decimals, null without "
            "inscriptions) and `average_result` (the mean of every non-null section result, "
            "1 decimal, or null). `filter[title]` matches whole titles in any letter case. "
            "The ETag changes with the UTC date too."
        ),
        query=CoursesQuery,
        response=CourseSchema,
        example=examples.COURSES,
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
        example=examples.EVENT_FEED,
        cursor=True,
    ),
}
