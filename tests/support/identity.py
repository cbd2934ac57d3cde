"""Report data made to be awkward, and every report listing over it (test_pg_identity.py).

Loaded beside the sample, the records below give the reports of contract.md 11 and 12
the figures where two stores could print different bytes: rates 1/800 (0.0013 by half
up), 1/3, 2/3, 1.0 and 0.0, no targets (null rates and medians), medians over ties,
before the launch (0 s) and over even counts (the lower middle), a mean exactly
halfway (45.85), whole means (100.0), no results (null), overdue on either side of a
fixed date, and titles, departments and teams that fold alike ("Straße", "STRASSE").
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from app.data import campaigns, courses, employees
from app.data.listings import Listing
from app.data.vocabulary import AUTOMATION_FILTERS

from .factories import API, by_id

CROWD = range(9100, 9900)  # 800 employees of company 1
DEPARTMENTS = ("Straße", "STRASSE", "Ärzte", "ärzte", "Zoo")
LAUNCH = "2026-01-01T08:00:00Z"
# Campaign id, title, launch, targets.
CAMPAIGNS = [
    (9001, "Straße", LAUNCH, list(CROWD)),
    (9002, "STRASSE", LAUNCH, [9100, 9101, 9102]),
    (9003, "ΣΊΣΥΦΟΣ", "2026-01-02T08:00:00Z", []),
    (9004, "σίσυφος", "2026-01-02T08:00:00Z", [9100, 9101, 9102, 9103, 9104]),
]
# Event id base, campaign, person, type, timestamp, with_captcha.
EVENTS = [
    (9001, 9100, "click", "2026-01-01T08:00:07Z", False),  # 1 of 800 clicked
    (9001, 9101, "open", "2026-01-01T09:00:00Z", True),
    (9002, 9100, "open", "2026-01-01T08:01:00Z", False),  # all 3 opened: 1.0
    (9002, 9101, "open", "2026-01-01T08:01:00Z", False),
    (9002, 9102, "open", "2026-01-01T08:01:00Z", True),
    (9002, 9100, "click", "2026-01-01T08:02:00Z", False),  # 1 of 3: 0.3333
    (9002, 9100, "report", "2026-01-01T08:05:00Z", False),  # 2 of 3: 0.6667, a tie
    (9002, 9101, "report", "2026-01-01T08:05:00Z", True),
    # First clicks at -1 h (0 s), 30 s, 60 s and 600 s: the lower middle is 30; without
    # the captcha-verified one, 0, 60, 60 (a tie) and 600: 60.
    (9004, 9100, "click", "2026-01-02T07:00:00Z", False),
    (9004, 9101, "click", "2026-01-02T08:01:00Z", False),
    (9004, 9102, "click", "2026-01-02T08:01:00Z", False),
    (9004, 9102, "click", "2026-01-02T08:00:30Z", True),
    (9004, 9103, "click", "2026-01-02T08:10:00Z", False),
    (9004, 9103, "click", "2026-01-02T08:11:00Z", False),  # not a first
    # Reports at 30, 30 and 90 s: an odd count.
    (9004, 9100, "report", "2026-01-02T08:00:30Z", False),
    (9004, 9104, "report", "2026-01-02T08:00:30Z", False),
    (9004, 9101, "report", "2026-01-02T08:01:30Z", True),
    (9004, 9103, "fail", "2026-01-02T08:20:00Z", False),
    (9001, 9103, "fail", "2026-01-01T08:20:00Z", False),  # 9103: failed in two campaigns
]
# Course id, title, inscriptions: (person, status, due date, results of its one section).
COURSES: list[tuple[int, str, list[tuple[int, str, str | None, list[float | None]]]]] = [
    (9001, "Straßen", []),
    (9002, "STRASSEN", [
        (9100, "completed", "2025-08-01", [69.3]),
        (9101, "in_progress", "2025-08-31", [22.4]),  # (69.3 + 22.4) / 2 = 45.85: 45.9
        (9102, "not_started", None, []),
    ]),
    (9003, "Sécurité", [
        (9100, "completed", "2025-09-01", [100.0]),
        (9103, "completed", "2025-01-01", [100.0]),
    ]),
    (9004, "No results", [
        (9104, "in_progress", "2025-09-01", [None]),
        (9105, "not_started", "2025-09-02", []),
        (9106, "in_progress", "2025-06-30", []),
    ]),
]  # fmt: skip
DAYS = (dt.date(2025, 9, 1), dt.date(2025, 9, 2))
SECTION = 500  # a course's one section: its id plus this


def report_fixture(path: Path) -> dict[str, Any]:
    """Write the records above as one fixture file (company 1); the document written."""
    people = [
        {"id": i, "company_id": 1, "first_name": f"Crowd {i}", "last_name": "Ωmega"}
        | {"email": f"crowd{i}@example.com", "country": "Ísland"}
        | {"department": DEPARTMENTS[i % len(DEPARTMENTS)]}
        for i in CROWD
    ]
    teams = [{"id": 9100 + n, "company_id": 1, "name": name} for n, name in enumerate(DEPARTMENTS)]
    members = [{"employee_id": i, "team_id": 9100 + i % 3} for i in CROWD[:40]]
    launched = [
        {"id": i, "company_id": 1, "title": title, "launch_date": launch}
        for i, title, launch, _ in CAMPAIGNS
    ]
    targets = [
        {"campaign_id": i, "employee_id": person}
        for i, *_, sent_to in CAMPAIGNS
        for person in sent_to
    ]
    events = [
        {"id": 810000 + n, "campaign_id": c, "employee_id": p, "type": t, "timestamp": at}
        | {"with_captcha": captcha}
        for n, (c, p, t, at, captcha) in enumerate(EVENTS)
    ]
    document: dict[str, Any] = {
        "employees": people,
        "teams": teams,
        "team_members": members,
        "campaigns": launched,
        "campaign_targets": targets,
        "campaign_events": events,
        "courses": [{"id": i, "company_id": 1, "title": t} for i, t, _ in COURSES],
        "course_sections": [
            {"id": i + SECTION, "course_id": i, "title": f"Part of {t}", "section_type": "exam"}
            | {"position": 1}
            for i, t, _ in COURSES
        ],
        "inscriptions": [],
        "section_results": [],
    }
    for course, _, rows in COURSES:
        for n, (person, status, due, results) in enumerate(rows):
            inscription = course * 100 + n
            document["inscriptions"].append(
                {"id": inscription, "employee_id": person, "course_id": course}
                | {"start_date": "2024-12-01", "due_date": due, "status": status}
            )
            document["section_results"] += [
                {"inscription_id": inscription, "section_id": course + SECTION}
                | {"completed_at": None if r is None else "2025-06-01", "result": r}
                | {"status": None if r is None else "APPROVED"}
                for r in results
            ]
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return document


CAMPAIGN_FILTERS = [
    campaigns.CampaignFilters(),
    campaigns.CampaignFilters(without_captcha=True),
    campaigns.CampaignFilters(titles=["strasse"]),
    campaigns.CampaignFilters(titles=["σίσυφοσ", "overdue invoice reminder"], without_captcha=True),
    campaigns.CampaignFilters(
        from_launch_date=dt.date(2025, 6, 1), to_launch_date=dt.date(2026, 1, 1)
    ),
    campaigns.CampaignFilters(automation="exclude_automated"),
    campaigns.CampaignFilters(automation="exclude_suspected"),
    campaigns.CampaignFilters(without_captcha=True, automation="exclude_suspected"),
]
EMPLOYEE_FILTERS = [
    employees.EmployeeFilters(),
    employees.EmployeeFilters(min_clicked=1),
    employees.EmployeeFilters(min_failed=2, min_clicked=1),
    employees.EmployeeFilters(lists={"department": ["strasse", "finance"]}, min_clicked=1),
    employees.EmployeeFilters(lists={"teams": ["straße"], "country": ["ísland"]}),
    employees.EmployeeFilters(automation="exclude_automated"),
    employees.EmployeeFilters(min_clicked=1, automation="exclude_suspected"),
]
COURSE_TITLES: list[list[str]] = [[], ["strassen"], ["sécurité", "password hygiene"]]


def report_listings() -> list[Listing]:
    """Every report listing with every filter above, and each campaign's and some
    employees' single reports, for both companies and on both fixed dates."""
    own = {1: [c[0] for c in CAMPAIGNS], 2: []}
    for campaign in by_id("campaigns").values():
        own[campaign["company_id"]].append(campaign["id"])
    listings: list[Listing] = []
    for company in (1, 2):
        listings += [campaigns.campaigns_listing(company, f) for f in CAMPAIGN_FILTERS]
        listings += [
            campaigns.campaign_report(company, campaign, without, automation)
            for campaign in own[company]
            for without in (False, True)
            for automation in AUTOMATION_FILTERS
        ]
        for day in DAYS:
            listings += [employees.employees_listing(company, f, day) for f in EMPLOYEE_FILTERS]
            listings += [courses.courses_listing(company, titles, day) for titles in COURSE_TITLES]
    people = [p["id"] for p in by_id("employees").values() if p["company_id"] == 1][:20]
    listings += [
        employees.employee_report(1, p, DAYS[0], automation)
        for p in [*people, *CROWD[:8]]
        for automation in AUTOMATION_FILTERS
    ]
    return listings


# The reports through the server, on the app's real date (every figure but overdue is
# fixed; overdue is compared above on fixed dates).
REPORT_PATHS = [
    f"{API}/campaigns",
    f"{API}/campaigns?filter[title]=STRASSE&filter[with_captcha]=false",
    f"{API}/campaigns?filter[title]=σίσυφος,Overdue%20Invoice%20Reminder&per_page=2&page=2",
    f"{API}/campaigns/9001",
    f"{API}/campaigns/9004?filter[with_captcha]=false",
    f"{API}/campaigns/3",  # another company's: 404 on both
    f"{API}/victimsapi?per_page=7&page=3",
    f"{API}/victimsapi?filter[department]=straße&filter[min_clicked]=1",
    f"{API}/victimsapi?filter[min_failed]=2&format=csv",
    f"{API}/victimsapi/9103",
    f"{API}/courses?filter[title]=STRASSEN,Sécurité",
    f"{API}/courses?format=ndjson",
    f"{API}/campaigns?filter[automation]=exclude_automated",
    f"{API}/campaigns?filter[automation]=exclude_suspected&filter[with_captcha]=false",
    f"{API}/campaigns/8?filter[automation]=exclude_suspected",
    f"{API}/campaigns/8?filter[automation]=exclude_automated&filter[with_captcha]=false",
    f"{API}/campaigns/8/events?filter[automation]=exclude_suspected&format=csv",
    f"{API}/victimsapi?filter[automation]=exclude_suspected&filter[min_clicked]=1",
    f"{API}/victimsapi/9103?filter[automation]=exclude_automated",
    f"{API}/victimsapi/7/events?filter[automation]=exclude_automated",
]
