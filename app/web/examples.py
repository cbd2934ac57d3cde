"""The response example of each documented operation (operations.py names them).

Every example is the very answer the server gives its request with company 1's sample
key on a database made from fixtures/sample.json: tests/test_openapi_examples.py asks
the server and fails, printing the actual answer, as soon as one goes stale. The
reports' ``overdue`` depends on the date; every due date of the sample is past by now.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .routes import API


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


CAMPAIGNS = Example(
    f"{API}/campaigns?filter[from_launch_date]=2025-05-01&per_page=2",
    [
        {
            "id": 2,
            "title": "Parcel Delivery Failed",
            "launch_date": "2025-05-20T08:30:00Z",
            "targets": 39,
            "opened": 31,
            "clicked": 17,
            "reported": 6,
            "failed": 8,
            "open_rate": 0.7949,
            "click_rate": 0.4359,
            "report_rate": 0.1538,
            "fail_rate": 0.2051,
            "median_seconds_to_first_click": 122208,
            "median_seconds_to_first_report": 219019,
        },
        {
            "id": 4,
            "title": "Shared Document: Q3 Budget",
            "launch_date": "2025-10-07T07:45:00Z",
            "targets": 37,
            "opened": 27,
            "clicked": 15,
            "reported": 9,
            "failed": 8,
            "open_rate": 0.7297,
            "click_rate": 0.4054,
            "report_rate": 0.2432,
            "fail_rate": 0.2162,
            "median_seconds_to_first_click": 271985,
            "median_seconds_to_first_report": 158652,
        },
    ],
)

CAMPAIGN_REPORT = Example(
    f"{API}/campaigns/1?filter[with_captcha]=false",
    {
        "id": 1,
        "title": "Overdue Invoice Reminder",
        "launch_date": "2025-02-11T09:00:00Z",
        "targets": 40,
        "opened": 30,
        "clicked": 14,
        "reported": 11,
        "failed": 7,
        "open_rate": 0.75,
        "click_rate": 0.35,
        "report_rate": 0.275,
        "fail_rate": 0.175,
        "median_seconds_to_first_click": 179568,
        "median_seconds_to_first_report": 204125,
        "by_department": [
            {
                "department": "Customer Support",
                "targets": 5,
                "opened": 5,
                "clicked": 3,
                "reported": 0,
                "failed": 1,
                "open_rate": 1.0,
                "click_rate": 0.6,
                "report_rate": 0.0,
                "fail_rate": 0.2,
            },
            {
                "department": "Engineering",
                "targets": 9,
                "opened": 3,
                "clicked": 1,
                "reported": 2,
                "failed": 0,
                "open_rate": 0.3333,
                "click_rate": 0.1111,
                "report_rate": 0.2222,
                "fail_rate": 0.0,
            },
            {
                "department": "Finance",
                "targets": 5,
                "opened": 4,
                "clicked": 3,
                "reported": 1,
                "failed": 2,
                "open_rate": 0.8,
                "click_rate": 0.6,
                "report_rate": 0.2,
                "fail_rate": 0.4,
            },
            {
                "department": "HR",
                "targets": 3,
                "opened": 2,
                "clicked": 0,
                "reported": 2,
                "failed": 0,
                "open_rate": 0.6667,
                "click_rate": 0.0,
                "report_rate": 0.6667,
                "fail_rate": 0.0,
            },
            {
                "department": "Legal",
                "targets": 4,
                "opened": 4,
                "clicked": 1,
                "reported": 0,
                "failed": 1,
                "open_rate": 1.0,
                "click_rate": 0.25,
                "report_rate": 0.0,
                "fail_rate": 0.25,
            },
            {
                "department": "Operations",
                "targets": 8,
                "opened": 7,
                "clicked": 4,
                "reported": 3,
                "failed": 2,
                "open_rate": 0.875,
                "click_rate": 0.5,
                "report_rate": 0.375,
                "fail_rate": 0.25,
            },
            {
                "department": "Research, Development",
                "targets": 1,
                "opened": 1,
                "clicked": 0,
                "reported": 1,
                "failed": 0,
                "open_rate": 1.0,
                "click_rate": 0.0,
                "report_rate": 1.0,
                "fail_rate": 0.0,
            },
            {
                "department": "Sales",
                "targets": 5,
                "opened": 4,
                "clicked": 2,
                "reported": 2,
                "failed": 1,
                "open_rate": 0.8,
                "click_rate": 0.4,
                "report_rate": 0.4,
                "fail_rate": 0.2,
            },
        ],
    },
)

# Employee 7 of the sample: the directory's first repeat offender, and the one-employee report.
JOSE = {
    "id": 7,
    "first_name": "José",
    "last_name": "Núñez",
    "email": "jose.nunez@northwind.example",
    "department": "Finance",
    "country": "Spain",
    "groups": [{"name": "Finance Champions"}, {"name": "Security Ambassadors"}],
    "phishing": {
        "campaigns": 4,
        "opened": 4,
        "clicked": 4,
        "reported": 0,
        "failed": 4,
        "last_event_at": "2026-01-21T12:41:34Z",
    },
    "training": {
        "inscriptions": 1,
        "not_started": 1,
        "in_progress": 0,
        "completed": 0,
        "overdue": 1,
    },
}

EMPLOYEES = Example(
    f"{API}/victimsapi?filter[min_failed]=3&per_page=2",
    [
        JOSE,
        {
            "id": 32,
            "first_name": "Mathieu",
            "last_name": "Moreau",
            "email": "mathieu.moreau@northwind.example",
            "department": "Operations",
            "country": "France",
            "groups": [{"name": "Warehouse Leads"}],
            "phishing": {
                "campaigns": 4,
                "opened": 4,
                "clicked": 3,
                "reported": 0,
                "failed": 3,
                "last_event_at": "2026-01-25T07:44:10Z",
            },
            "training": {
                "inscriptions": 1,
                "not_started": 0,
                "in_progress": 0,
                "completed": 1,
                "overdue": 0,
            },
        },
    ],
)

EMPLOYEE_REPORT = Example(f"{API}/victimsapi/7", JOSE)

COURSES = Example(
    f"{API}/courses?per_page=2",
    [
        {
            "id": 1,
            "title": "Phishing Fundamentals",
            "sections": 4,
            "inscriptions": 18,
            "not_started": 5,
            "in_progress": 7,
            "completed": 6,
            "overdue": 11,
            "completion_rate": 0.3333,
            "average_result": 74.3,
        },
        {
            "id": 2,
            "title": "Password Hygiene",
            "sections": 3,
            "inscriptions": 16,
            "not_started": 2,
            "in_progress": 5,
            "completed": 9,
            "overdue": 5,
            "completion_rate": 0.5625,
            "average_result": 88.0,
        },
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
