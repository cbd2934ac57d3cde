"""The dashboard in a real browser: every view shows the API's own numbers, safely.

Debian's chromium, driven by Playwright, opens /dashboard/ of a real server process over the
sample data (its partner key too) plus people and campaigns whose names are markup, hold a
comma, a double quote or a right-to-left override, or run 500 characters without a space.
Each view's tables are compared, cell by cell, with the API's answers fetched here over
HTTP; the endpoints a server may not have yet (/stats/..., /key, filter[automation]) must
then show "not available". After each test: no console error and no Content-Security-Policy
violation; no dialog ever.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Dialog,
    Page,
    Route,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from app.tools.loader import SAMPLE_FIXTURE, load_files

from .support.browser import FLAGS, chromium
from .support.factories import API, KEY_1, KEY_2, KEY_PARTNER
from .support.servers import UNLIMITED, Launcher

pytestmark = pytest.mark.system  # starts a server and a browser (make test-fast skips it)
__all__ = ["chromium"]  # a pytest fixture: imported to be found, never called

HOSTILE_FIRST = "<img src=x onerror=alert(1)>"
HOSTILE_LAST = "<script>alert(2)</script>"
# A key that may read the reports only: the people and training views are hidden for it.
KEY_REPORTS_ONLY = "rk_dashboard_reports_only_7f3a9c1e5b"
HOSTILE = {
    "api_keys": [
        {"company_id": 1, "label": "reports only", "key": KEY_REPORTS_ONLY, "scope": "reports:read"}
    ],
    "employees": [
        {
            "id": 9001,
            "company_id": 1,
            "first_name": HOSTILE_FIRST,
            "last_name": HOSTILE_LAST,
            "email": "hostile@northwind.example",
            "department": "<b>Operations</b>",
            "country": "Spain",
        }
    ],
    "campaign_events": [
        {
            "id": 900001,
            "campaign_id": 1,
            "employee_id": 9001,
            "type": "click",
            "timestamp": "2025-02-12T10:00:00Z",
            "with_captcha": False,
        }
    ],
}
# A key of company 1 that may read people only: the page opens on People, a person's
# history says it needs events:read.
KEY_PEOPLE_ONLY = "rk_dashboard_people_only_3c5e7a9b1d"
HOSTILE["api_keys"].append(
    {"company_id": 1, "label": "people only", "key": KEY_PEOPLE_ONLY, "scope": "people:read"}
)
# A partner without companies yet, and a key of company 1 whose one scope opens no view:
# the page says so once instead of showing the API's refusal of the first view.
KEY_PARTNER_EMPTY = "rk_dashboard_partner_empty_9e1b3d5f7a"
KEY_WEBHOOKS_ONLY = "rk_dashboard_webhooks_only_5a7c9e1b3d"
HOSTILE["partners"] = [{"id": 2, "name": "Newcomer MSP"}]
HOSTILE["api_keys"] += [
    {"partner_id": 2, "label": "no companies yet", "key": KEY_PARTNER_EMPTY},
    {"company_id": 1, "label": "webhooks only", "key": KEY_WEBHOOKS_ONLY, "scope": "webhooks:read"},
]
# A person an import left without a name: the directory links them by email.
NAMELESS = {"id": 9002, "company_id": 1, "first_name": "", "last_name": "",
            "email": "nameless@northwind.example", "department": "Finance",
            "country": "Spain"}  # fmt: skip
HOSTILE["employees"].append(NAMELESS)
# Values the list filters must quote (a comma, a double quote), and a name, a department and
# a title of 500 characters without a space, which must wrap instead of widening the page.
QUOTED_DEPARTMENT = 'Sales "EMEA"'
COMMA_TITLE = "Invoice, urgent"
LONG_PERSON, LONG_CAMPAIGN = 9004, 9002
HOSTILE["employees"] += [
    {"id": 9003, "company_id": 1, "first_name": "Quote", "last_name": "Person",
     "email": "quote@northwind.example", "department": QUOTED_DEPARTMENT, "country": "Spain"},
    {"id": LONG_PERSON, "company_id": 1, "first_name": "Long", "last_name": "L" * 500,
     "email": "long@northwind.example", "department": "D" * 500, "country": "Spain"},
]  # fmt: skip
# Company 1 then has 7 campaigns: the last page of 5 holds 2 (the overview shows 5).
HOSTILE["campaigns"] = [
    {"id": 9001, "company_id": 1, "title": COMMA_TITLE, "launch_date": "2025-03-03T09:00:00Z"},
    {"id": LONG_CAMPAIGN, "company_id": 1, "title": "T" * 500,
     "launch_date": "2025-04-01T09:00:00Z"},
]  # fmt: skip
HOSTILE["campaign_targets"] = [
    {"campaign_id": 9001, "employee_id": 9003},
    {"campaign_id": LONG_CAMPAIGN, "employee_id": LONG_PERSON},
]
# A person whose first name and department hold a right-to-left override (U+202E), in a team
# whose name is markup: neither may reverse or reorder the values shown after it.
RTL_PERSON = 9005
RTL_TEAM = '"><svg onload=alert(3)>'
HOSTILE["employees"].append(
    {"id": RTL_PERSON, "company_id": 1, "first_name": "\u202eAnna", "last_name": "Berg",
     "email": "rtl@northwind.example", "department": "\u202eOps", "country": "Chile"}
)  # fmt: skip
HOSTILE["teams"] = [{"id": 9001, "company_id": 1, "name": RTL_TEAM}]
HOSTILE["team_members"] = [{"team_id": 9001, "employee_id": RTL_PERSON}]
WIDE_DEPARTMENTS = 40  # company 2: 40 departments × 13 months of sends = 520 heatmap rows
WIDE_COURSES = 55  # company 2: more courses than one page of the coverage table


def wide() -> dict[str, Any]:
    """Company 2, wider than a page: one person per department, all sent a campaign on
    the 15th of each of the last 13 months (the heatmap's monthly window), and courses."""
    today = datetime.now(UTC).date()
    months = [(today.year * 12 + today.month - 1 - n) for n in range(13)]
    launches = [f"{m // 12:04d}-{m % 12 + 1:02d}-15T09:00:00Z" for m in months]
    people = [{"id": 9100 + n, "company_id": 2, "first_name": "Wide", "last_name": f"{n}",
               "email": f"wide{n}@bluefin.example", "department": f"Department {n:02d}",
               "country": "Portugal"} for n in range(WIDE_DEPARTMENTS)]  # fmt: skip
    campaigns = [{"id": 9100 + n, "company_id": 2, "title": f"Wide {n}", "launch_date": launch}
                 for n, launch in enumerate(launches)]  # fmt: skip
    targets = [{"campaign_id": c["id"], "employee_id": p["id"]} for c in campaigns for p in people]
    courses = [{"id": 9100 + n, "company_id": 2, "title": f"Course {n:02d}"}
               for n in range(WIDE_COURSES)]  # fmt: skip
    return {"employees": people, "campaigns": campaigns, "campaign_targets": targets,
            "courses": courses}  # fmt: skip


# Endpoints (and a parameter) other servers may lack: the page probes them and says so.
OPTIONAL = ("/stats/phishing", "/stats/training", "/key")
PER_PAGE = 50
# Records the page's policy violations, from before its own scripts run.
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation",
  (event) => window.cspViolations.push(event.violatedDirective + " " + event.blockedURI));
"""


def quoted(value: str) -> str:
    """One value of a list filter, as the dashboard sends what is typed (docs/interface.md)."""
    return '"' + value.replace('"', '""') + '"'


def percent(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.2f} %"


def plain(value: Any) -> str:
    return "–" if value is None else str(value)


@dataclass
class Api:
    """The API of the server under test, read over HTTP with the sample key."""

    base: str

    def get(self, path: str, params: dict[str, Any] | None = None, key: str = KEY_1) -> Any:
        status, body, _ = self.raw(path, params, key)
        assert status == 200, (path, params, status, body)
        return json.loads(body)

    def raw(
        self, path: str, params: dict[str, Any] | None = None, key: str = KEY_1
    ) -> tuple[int, bytes, Any]:
        query = f"?{urlencode(params)}" if params else ""
        request = urllib.request.Request(f"{self.base}{API}{path}{query}")
        request.add_header("X-API-KEY", key)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read(), response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.read(), error.headers

    def has(self, path: str) -> bool:
        """Whether this server has an optional endpoint (404: not yet)."""
        return self.raw(path)[0] != 404


@dataclass
class Session:
    """One signed-in page and what it did: requests, console errors, dialogs."""

    page: Page
    context: BrowserContext
    base: str
    requests: list[Any] = field(default_factory=list)
    answers: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def open(self, fragment: str) -> None:
        """Go to a view and wait until it is drawn."""
        self.page.goto(f"{self.base}/dashboard/#{fragment}")
        self.wait_for(f"#{fragment}")

    def wait_for(self, fragment: str) -> None:
        selector = f'#view[data-rendered="{fragment}"]'
        self.page.locator(selector).wait_for()

    def rows(self, caption: str) -> list[list[str]]:
        """The body cells of the table with this caption, as text."""
        table = self.page.get_by_role("table", name=caption, exact=True)
        return table.locator("tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
        )

    def watch(self) -> None:
        """Record requests, answers, console errors and dialogs of this page."""

        def console(message: ConsoleMessage) -> None:
            if message.type == "error" and not self.expected(message):
                self.errors.append(f"{message.text} at {message.location.get('url')}")

        self.page.on("request", lambda request: self.requests.append(request))
        self.page.on("response", lambda r: self.answers.__setitem__(r.url, r.status))
        self.page.on("console", console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("dialog", self.dismiss)

    def dismiss(self, dialog: Dialog) -> None:
        """A dialog must never open (markup in a name could run alert): record it."""
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def expected(self, message: ConsoleMessage) -> bool:
        """Chromium logs every 4xx; a probe of an endpoint this server lacks is expected."""
        url = message.location.get("url", "")
        path = urlsplit(url).path.removeprefix(API)
        refused = self.answers.get(url) == 404 and path in OPTIONAL
        refused_filter = self.answers.get(url) == 400 and "filter%5Bautomation%5D" in url
        return message.text.startswith("Failed to load resource") and (refused or refused_filter)


def hostile_db(directory: Path) -> Path:
    """The sample, plus an employee whose names and department are markup."""
    extra = directory / "hostile.json"
    extra.write_text(json.dumps(HOSTILE), encoding="utf-8")
    wider = directory / "wide.json"
    wider.write_text(json.dumps(wide()), encoding="utf-8")
    db = directory / "dashboard.sqlite3"
    load_files(db, [SAMPLE_FIXTURE, extra, wider])
    return db


@pytest.fixture(scope="module")
def launcher(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Launcher, Path]]:
    directory: Path = tmp_path_factory.mktemp("dashboard")
    with Launcher(directory) as launcher:
        yield launcher, hostile_db(directory)


@pytest.fixture(scope="module")
def base(launcher: tuple[Launcher, Path]) -> str:
    return launcher[0].serve(launcher[1], *UNLIMITED).base


@pytest.fixture(scope="module")
def api(base: str) -> Api:
    return Api(base)


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def new_session(browser: Browser) -> Iterator[Callable[[str], Session]]:
    """Pages in fresh contexts (no storage, no cache), closed with the module."""
    contexts: list[BrowserContext] = []

    def make(base: str) -> Session:
        context = browser.new_context(accept_downloads=True)
        context.add_init_script(script=RECORD_VIOLATIONS)
        contexts.append(context)
        session = Session(context.new_page(), context, base)
        session.watch()
        session.page.goto(f"{base}/dashboard/")
        return session

    yield make
    for context in contexts:
        context.close()


def sign_in(session: Session, key: str = KEY_1) -> None:
    session.page.get_by_label("API key").fill(key)
    session.page.get_by_role("button", name="Sign in").click()


def signed_in_as(
    new_session: Callable[[str], Session], base: str, key: str = KEY_1, landing: str = "#overview"
) -> Session:
    """A new page signed in with ``key``, once it has drawn the view it lands on."""
    session = new_session(base)
    sign_in(session, key)
    session.wait_for(landing)
    return session


@pytest.fixture(scope="module")
def signed_in(new_session: Callable[[str], Session], base: str) -> Session:
    return signed_in_as(new_session, base)


@pytest.fixture
def session(signed_in: Session) -> Iterator[Session]:
    """The shared signed-in page; after each test, nothing went wrong in it."""
    yield signed_in
    violations = signed_in.page.evaluate("() => window.cspViolations")
    assert (signed_in.errors, violations, signed_in.dialogs) == ([], [], [])


def campaign_row(c: dict[str, Any]) -> list[str]:
    """A campaign as the campaign tables show it."""
    return [
        c["title"],
        c["launch_date"][:10],
        *(plain(c[k]) for k in ("targets", "opened", "clicked", "reported", "failed")),
        percent(c["click_rate"]),
        percent(c["fail_rate"]),
        plain(c["automated_events"]),
    ]


def period(row: dict[str, Any]) -> str:
    return f"{row['period_start']} – {row['period_end']}"


def check_optional(session: Session, api: Api, path: str, caption: str, expected: Any) -> None:
    """A table of an optional endpoint: the API's rows, or "not available" without it."""
    if api.has(path):
        assert session.rows(caption) == expected()
    else:
        assert session.page.get_by_role("table", name=caption, exact=True).count() == 0
        assert session.page.get_by_text("is not available on this server").count() >= 1


def csv_records(body: bytes) -> list[list[str]]:
    """The records of a CSV answer or download, each line ended by CRLF."""
    assert body.endswith(b"\r\n")
    return list(csv.reader(io.StringIO(body.decode(), newline="")))


RATES = ("open_rate", "click_rate", "report_rate", "fail_rate")


def test_overview_shows_the_api_numbers(session: Session, api: Api) -> None:
    """The latest campaigns are the 5 newest, newest first: company 1's last page of 5
    holds 2, the page before it the 3 others."""
    session.open("overview")
    campaigns = api.get("/campaigns", {"per_page": 500})
    pages = int(api.raw("/campaigns", {"per_page": 5})[2]["X-Total-Pages"])
    assert pages > 1 and len(campaigns) % 5 != 0  # the case of a short last page
    latest = campaigns[-5:][::-1]
    assert session.rows("Latest campaigns") == [campaign_row(c) for c in latest]
    # Its CSV holds the rows the table shows, in its order: the API's CSV records of them.
    with session.page.expect_download() as download:
        latest_section = session.page.locator('section[aria-label="Latest campaigns"]')
        latest_section.get_by_role("button", name="Download CSV").click()
    saved = csv_records(Path(download.value.path()).read_bytes())
    header, *every = csv_records(api.raw("/campaigns", {"per_page": 500, "format": "csv"})[1])
    assert saved == [header, *every[-5:][::-1]]
    titles = [row[header.index("title")] for row in saved[1:]]
    assert titles == [row[0] for row in session.rows("Latest campaigns")]
    check_optional(
        session,
        api,
        "/stats/phishing",
        "Phishing by month",
        lambda: [
            [period(r), plain(r["sends"]), *(percent(r[k]) for k in RATES)]
            for r in api.get("/stats/phishing", {"interval": "month"})
        ],
    )
    training_fields = ("due", "completed_on_time", "completed_late", "not_completed")
    check_optional(
        session,
        api,
        "/stats/training",
        "Training by due month",
        lambda: [
            [period(r), *(plain(r[k]) for k in training_fields), percent(r["on_time_rate"])]
            for r in api.get("/stats/training", {"interval": "month"})
        ],
    )


def test_campaigns_list_filter_and_one_campaign(session: Session, api: Api) -> None:
    session.open("campaigns")
    listing = api.get("/campaigns", {"page": 1, "per_page": PER_PAGE})
    assert session.rows("Campaigns") == [campaign_row(c) for c in listing]
    title = listing[1]["title"]
    session.page.get_by_label("Title").fill(title)
    session.page.get_by_role("button", name="Apply").click()
    session.wait_for(f"#campaigns?{urlencode({'title': title})}")
    params = {"filter[title]": quoted(title), "page": 1, "per_page": PER_PAGE}
    filtered = api.get("/campaigns", params)
    assert session.rows("Campaigns") == [campaign_row(c) for c in filtered]
    session.page.get_by_role("link", name=title).click()
    session.wait_for(f"#campaigns/{listing[1]['id']}")
    report = api.get(f"/campaigns/{listing[1]['id']}")
    assert session.rows("By department") == [
        [
            d["department"],
            *(plain(d[k]) for k in ("targets", "opened", "clicked", "reported", "failed")),
            *(percent(d[k]) for k in RATES),
        ]
        for d in report["by_department"]
    ]
    funnel = session.page.get_by_label("Funnel").locator(".count").all_text_contents()
    fields = ("targets", "opened", "clicked", "reported", "failed")
    assert funnel == [str(report[k]) for k in fields]


def person_row(p: dict[str, Any]) -> list[str]:
    phishing = p["phishing"]
    return [
        f"{p['first_name']} {p['last_name']}",
        p["department"],
        p["country"],
        *(plain(phishing[k]) for k in ("campaigns", "clicked", "failed", "reported")),
        plain(p["training"]["overdue"]),
    ]


def test_people_repeat_offenders_first_and_one_person(session: Session, api: Api) -> None:
    session.open("people")
    offenders = api.get("/victimsapi", {"filter[min_failed]": 2, "page": 1, "per_page": PER_PAGE})
    assert offenders and session.rows("People") == [person_row(p) for p in offenders]
    person = offenders[0]
    session.open(f"people/{person['id']}")
    record = api.get(f"/victimsapi/{person['id']}")
    facts = session.page.locator("dl.facts dd").all_text_contents()
    phishing = ("campaigns", "opened", "clicked", "reported", "failed", "last_event_at")
    training = ("inscriptions", "not_started", "in_progress", "completed", "overdue")
    assert facts == [plain(record["phishing"][k]) for k in phishing] + [
        plain(record["training"][k]) for k in training
    ]
    events = api.get(f"/victimsapi/{person['id']}/events", {"page": 1, "per_page": PER_PAGE})
    assert session.rows("Event history") == [
        [e["timestamp"], e["type"], e["campaign"]["title"]] for e in events
    ]


def test_heatmap_cells_are_the_api_rates(session: Session, api: Api) -> None:
    session.open("heatmap?rate=click_rate&by=department&interval=quarter")
    if not api.has("/stats/phishing"):
        assert session.page.get_by_text("is not available on this server").count() == 1
        return
    params = {"interval": "quarter", "group_by": "department", "per_page": 500}
    rows = api.get("/stats/phishing", params)
    periods = list(dict.fromkeys(r["period_start"] for r in rows))
    cells = {(r["department"], r["period_start"]): percent(r["click_rate"]) for r in rows}
    departments = list(dict.fromkeys(r["department"] for r in rows))
    shown = session.page.locator("table.heat tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert shown == [[d, *(cells[d, p] for p in periods)] for d in departments]


def test_a_heatmap_wider_than_a_page_shows_every_row(
    new_session: Callable[[str], Session], base: str, api: Api
) -> None:
    """Company 2's monthly heatmap is two pages of the API: every cell is shown, the
    latest month's too, and an unknown rate falls back to the fail rate."""
    session = signed_in_as(new_session, base, KEY_2)
    session.open("heatmap?rate=nonsense&by=department&interval=month")
    params = {"interval": "month", "group_by": "department", "per_page": 500}
    status, _, headers = api.raw("/stats/phishing", params, KEY_2)
    assert status == 200 and headers["X-Total-Pages"] == "2"
    rows = [
        r for page in (1, 2) for r in api.get("/stats/phishing", {**params, "page": page}, KEY_2)
    ]
    periods = list(dict.fromkeys(r["period_start"] for r in rows))
    cells = {(r["department"], r["period_start"]): percent(r["fail_rate"]) for r in rows}
    departments = list(dict.fromkeys(r["department"] for r in rows))
    shown = session.page.locator("table.heat tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert shown == [[d, *(cells.get((d, p), "–") for p in periods)] for d in departments]
    assert len(rows) > 500 and len(shown) >= WIDE_DEPARTMENTS
    # Its CSV holds both pages: the first page's bytes, then the second's rows.
    with session.page.expect_download() as download:
        session.page.get_by_role("button", name="Download CSV").click()
    first, second = (
        api.raw("/stats/phishing", {**params, "page": page, "format": "csv"}, KEY_2)[1]
        for page in (1, 2)
    )
    expected = first + second[second.index(b"\r\n") + 2 :]
    assert Path(download.value.path()).read_bytes() == expected
    assert (session.errors, session.dialogs) == ([], [])


def test_course_coverage_has_pages(
    new_session: Callable[[str], Session], base: str, api: Api
) -> None:
    session = signed_in_as(new_session, base, KEY_2)
    session.open("training?courses_page=2")
    courses = api.get("/courses", {"page": 2, "per_page": PER_PAGE}, KEY_2)
    assert courses and [r[0] for r in session.rows("Course coverage")] == [
        c["title"] for c in courses
    ]
    assert session.page.get_by_text(f"Page 2 of 2 ({len(courses) + PER_PAGE} in all)").count() == 1


def test_a_people_only_key_opens_on_people_and_a_person_without_history(
    new_session: Callable[[str], Session], base: str
) -> None:
    session = signed_in_as(new_session, base, KEY_PEOPLE_ONLY, "#people")
    session.open(f"people/{NAMELESS['id']}")
    assert session.page.get_by_text("The event history needs a key with events:read.").count() == 1
    assert session.page.locator("#view dl[aria-label=Phishing]").count() == 1  # the person
    # /key said the key lacks events:read: the history is not asked for (no 403 logged).
    assert [r.url for r in session.requests if r.url.split("?")[0].endswith("/events")] == []
    assert (session.errors, session.dialogs) == ([], [])
    session.open("people?min_failed=0&department=Finance")
    link = session.page.get_by_role("link", name=NAMELESS["email"], exact=True)
    link.click()
    session.wait_for(f"#people/{NAMELESS['id']}")


def test_training_coverage_and_inscriptions_due(session: Session, api: Api) -> None:
    session.open("training")
    courses = api.get("/courses", {"page": 1, "per_page": PER_PAGE})
    counts = ("inscriptions", "not_started", "in_progress", "completed", "overdue")
    assert session.rows("Course coverage") == [
        [
            c["title"],
            *(plain(c[k]) for k in counts),
            percent(c["completion_rate"]),
            "–" if c["average_result"] is None else f"{c['average_result']:.1f}",
        ]
        for c in courses
    ]
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    params = {"filter[to_due_date]": yesterday, "page": 1, "per_page": PER_PAGE}
    due = api.get("/course-inscriptions", params)
    assert due and session.rows("Inscriptions due before today") == [
        [i["victim_name"], i["victim_department"], i["course_title"], i["due_date"], i["status"]]
        for i in due
    ]


def test_markup_in_names_is_shown_as_text(session: Session) -> None:
    session.open("people?min_failed=0")
    name = f"{HOSTILE_FIRST} {HOSTILE_LAST}"
    link = session.page.get_by_role("link", name=name, exact=True)
    assert link.count() == 1
    link.click()
    session.wait_for("#people/9001")
    assert session.page.get_by_role("heading", name=name, exact=True).count() == 1
    assert session.page.get_by_text("<b>Operations</b>", exact=False).count() == 1
    assert session.page.locator("#view img, #view script, #view b").count() == 0


def test_a_right_to_left_override_stays_in_its_value(session: Session) -> None:
    """Left to right, the person's heading and line show their values in order: an override
    in the first name or the department reverses that value only."""
    session.open(f"people/{RTL_PERSON}")
    section = session.page.locator(f'section[aria-label="{chr(0x202E)}Anna Berg"]')
    lefts = """(node, parts) => parts.map((part) => {
      const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const at = walker.currentNode.data.indexOf(part);
        if (at < 0) continue;
        const range = document.createRange();
        range.setStart(walker.currentNode, at);
        range.setEnd(walker.currentNode, at + part.length);
        return range.getBoundingClientRect().left;
      }
    })"""
    heading = section.get_by_role("heading").evaluate(lefts, ["Anna", "Berg"])
    assert heading == sorted(heading), heading
    line = section.locator("p").first
    assert line.text_content() == f"rtl@northwind.example · \u202eOps · Chile · {RTL_TEAM}"
    parts = line.evaluate(lefts, ["rtl@", "Ops", "Chile", "svg onload"])
    assert parts == sorted(parts), parts
    assert session.page.locator("#view svg, #view script, #view img").count() == 0


def test_csv_button_downloads_the_listings_csv(session: Session, api: Api) -> None:
    session.open("campaigns?page=1")
    with session.page.expect_download() as download:
        session.page.get_by_role("button", name="Download CSV").click()
    params = {"page": 1, "per_page": PER_PAGE, "format": "csv"}
    status, csv, _ = api.raw("/campaigns", params)
    assert status == 200 and csv.startswith(b"id,")
    assert Path(download.value.path()).read_bytes() == csv
    assert download.value.suggested_filename == "campaigns.csv"


def test_a_revisited_listing_is_one_request_answered_304(session: Session) -> None:
    session.open("training?page=1")
    session.open("overview")
    first = len(session.requests)
    session.open("training?page=1")
    courses = [r for r in session.requests[first:] if f"{API}/courses" in r.url]
    assert len(courses) == 1
    assert courses[0].headers.get("if-none-match", "").startswith('W/"')
    assert courses[0].response().status == 304
    assert session.rows("Course coverage")  # drawn from the remembered answer


def test_automation_switch_or_not_available(session: Session, api: Api) -> None:
    session.open("campaigns")
    params = {"filter[automation]": "exclude_automated", "page": 1, "per_page": PER_PAGE}
    status, body, _ = api.raw("/campaigns", params)
    session.page.get_by_label("Leave out automated events").click()
    if status == 400:
        session.page.get_by_text("Leaving out automated events is not available").wait_for()
        assert session.page.get_by_label("Leave out automated events").is_disabled()
    else:
        session.page.locator('#view[data-rendered="#campaigns"]').wait_for()
        assert session.rows("Campaigns") == [campaign_row(c) for c in json.loads(body)]
        session.page.get_by_label("Leave out automated events").uncheck()
    session.wait_for("#campaigns")


def test_the_key_stays_in_session_storage_only(session: Session) -> None:
    for fragment in ("overview", "campaigns", "people", "heatmap", "training"):
        session.open(fragment)
    storage = session.page.evaluate("() => [JSON.stringify(localStorage), document.cookie]")
    assert KEY_1 not in storage[0] and storage[1] == ""
    assert session.context.cookies() == []
    assert session.page.evaluate("() => Object.values(sessionStorage)") == [KEY_1]
    assert session.requests and all(KEY_1 not in r.url for r in session.requests)
    assert all(r.headers.get("x-api-key") in (None, KEY_1) for r in session.requests)


def test_a_wrong_key_brings_the_form_back_with_the_api_message(
    new_session: Callable[[str], Session], base: str, api: Api
) -> None:
    session = new_session(base)
    sign_in(session, "rk_wrong_key")
    detail = json.loads(api.raw("/campaigns", key="rk_wrong_key")[1])["detail"]
    session.page.locator("#sign-in-error").get_by_text(detail, exact=True).wait_for()
    assert session.page.locator("#sign-in").is_visible()
    assert session.page.evaluate("() => sessionStorage.length") == 0


def test_a_key_no_request_can_carry_brings_the_form_back(
    new_session: Callable[[str], Session], base: str
) -> None:
    """A zero-width space a copy added to the key: fetch could not send it, so the form
    says so at once, and the key is neither kept nor sent."""
    session = new_session(base)
    sign_in(session, f"{KEY_1}\u200b")
    session.page.locator("#sign-in-error").get_by_text("no request can carry").wait_for()
    assert (
        session.page.locator("#sign-in").is_visible() and session.page.locator("#view").is_hidden()
    )
    assert session.page.evaluate("() => sessionStorage.length") == 0
    assert [r.url for r in session.requests if API in r.url] == []
    assert (session.errors, session.dialogs) == ([], [])


def test_views_the_key_may_not_read_are_hidden(
    new_session: Callable[[str], Session], base: str
) -> None:
    """The page asks /key for the scopes and hides the views needing one it lacks."""
    session = signed_in_as(new_session, base, KEY_REPORTS_ONLY)
    nav = session.page.locator("#nav")
    shown = {"overview", "campaigns", "heatmap"}
    for view in ("overview", "campaigns", "people", "heatmap", "training"):
        link = nav.locator(f'a[data-view="{view}"]')
        link.wait_for(state="visible" if view in shown else "hidden")


def shows_no_view(
    new_session: Callable[[str], Session], base: str, key: str, message: str
) -> Session:
    """A page signed in with ``key``, which opens no view: ``message`` once in place of a
    view, the navigation hidden, no request but /key's, and the same on another view's URL."""
    session = new_session(base)
    sign_in(session, key)
    alert = session.page.locator("#view [role=alert]")
    alert.wait_for()
    assert alert.text_content() == message
    session.wait_for("#overview")
    session.open("campaigns")
    assert alert.count() == 1 and alert.text_content() == message
    assert session.page.locator("#nav").is_hidden()
    assert [r.url for r in session.requests if API in r.url] == [f"{base}{API}/key"]
    violations = session.page.evaluate("() => window.cspViolations")
    assert (session.errors, violations, session.dialogs) == ([], [], [])
    return session


def test_a_partner_key_without_companies_says_how_to_add_one(
    new_session: Callable[[str], Session], base: str
) -> None:
    message = (
        "This partner has no companies yet, so there is nothing to show. A company is added "
        "to it with the key tool: reporting-keys partner add-company 2 COMPANY; then reload "
        "this page."
    )
    session = shows_no_view(new_session, base, KEY_PARTNER_EMPTY, message)
    assert session.page.get_by_label("Company", exact=True).is_hidden()


def test_a_key_without_any_views_scope_says_which_scopes_the_views_need(
    new_session: Callable[[str], Session], base: str
) -> None:
    message = (
        "This key opens no view of the dashboard (its scopes: webhooks:read). Overview, "
        "Campaigns and Heatmap need reports:read; People needs people:read; Training needs "
        "reports:read and training:read."
    )
    shows_no_view(new_session, base, KEY_WEBHOOKS_ONLY, message)


def test_sign_out_forgets_the_key(new_session: Callable[[str], Session], base: str) -> None:
    session = signed_in_as(new_session, base)
    session.page.get_by_role("button", name="Sign out").click()
    assert session.page.locator("#sign-in").is_visible()
    assert session.page.evaluate("() => sessionStorage.length") == 0
    session.page.reload()
    assert session.page.locator("#sign-in").is_visible()


def test_a_429_waits_for_retry_after_and_says_so(
    new_session: Callable[[str], Session], launcher: tuple[Launcher, Path]
) -> None:
    """One request a second: the training view's two requests at once meet a 429."""
    tight = launcher[0].serve(launcher[1], "--rate-burst", "1", "--rate-per-second", "1")
    session = new_session(tight.base)
    session.page.goto(f"{tight.base}/dashboard/#training")
    sign_in(session)
    session.page.locator("#status").get_by_text("rate limit was reached").wait_for()
    session.wait_for("#training")
    # The view's own requests (the key's scopes are asked for first, once).
    views = [r for r in session.requests if API in r.url and not r.url.endswith(f"{API}/key")]
    statuses = [r.response().status for r in views]
    assert statuses.count(429) >= 1 and statuses.count(200) == 2
    assert session.page.locator("#status").text_content() == ""


def test_a_first_visit_transfers_less_than_300_kb(
    new_session: Callable[[str], Session], base: str
) -> None:
    """Everything a first visit moves over the wire (gzipped files, API answers, headers)."""
    session = signed_in_as(new_session, base)
    total = session.page.evaluate(
        "() => performance.getEntries().reduce((sum, e) => sum + (e.transferSize || 0), 0)"
    )
    print(f"first visit: {total} bytes transferred")
    assert 0 < total < 300_000


def test_a_partner_key_chooses_the_company_it_reads(
    new_session: Callable[[str], Session], base: str, api: Api
) -> None:
    """A partner's key names its company in X-Company-ID on every request that reads one,
    from a choice kept in the tab; answers are remembered per company."""
    session = signed_in_as(new_session, base, KEY_PARTNER)
    choice = session.page.get_by_label("Company", exact=True)
    assert choice.is_visible() and choice.input_value() == "1"
    assert choice.locator("option").evaluate_all("os => os.map(o => o.value)") == ["1", "2"]
    session.open("campaigns")
    listing = {"page": 1, "per_page": PER_PAGE}
    assert session.rows("Campaigns") == [campaign_row(c) for c in api.get("/campaigns", listing)]
    first = len(session.requests)
    choice.select_option("2")
    session.wait_for("#campaigns")
    assert session.rows("Campaigns") == [
        campaign_row(c) for c in api.get("/campaigns", listing, KEY_2)
    ]
    # Company 2's first visit: no ETag of company 1's answer is offered for it.
    (asked,) = [r for r in session.requests[first:] if f"{API}/campaigns?" in r.url]
    assert asked.headers.get("x-company-id") == "2" and "if-none-match" not in asked.headers
    # Back to company 1: its own answer is remembered, and revalidated (304).
    first = len(session.requests)
    choice.select_option("1")
    session.wait_for("#campaigns")
    (asked,) = [r for r in session.requests[first:] if f"{API}/campaigns?" in r.url]
    assert asked.headers.get("x-company-id") == "1" and asked.response().status == 304
    assert session.rows("Campaigns") == [campaign_row(c) for c in api.get("/campaigns", listing)]
    # The choice outlives a reload, as the key does.
    choice.select_option("2")
    session.wait_for("#campaigns")
    session.page.reload()
    session.wait_for("#campaigns")
    assert choice.input_value() == "2"
    assert session.rows("Campaigns") == [
        campaign_row(c) for c in api.get("/campaigns", listing, KEY_2)
    ]
    reads = [r for r in session.requests if API in r.url and not r.url.endswith(f"{API}/key")]
    assert reads and all(r.headers.get("x-company-id") in ("1", "2") for r in reads)
    session.page.get_by_role("button", name="Sign out").click()
    assert session.page.evaluate("() => sessionStorage.length") == 0
    assert choice.is_hidden()
    assert (session.errors, session.dialogs) == ([], [])


def test_a_company_key_has_no_company_choice(session: Session) -> None:
    session.open("overview")
    assert session.page.get_by_label("Company", exact=True).is_hidden()
    assert all("x-company-id" not in r.headers for r in session.requests)


def test_list_filters_quote_what_is_typed(session: Session, api: Api) -> None:
    """A comma or a double quote in a department or a title is part of the value."""
    session.open("people?min_failed=0")
    for department in ("Research, Development", QUOTED_DEPARTMENT):
        session.page.get_by_label("Department").fill(department)
        session.page.get_by_role("button", name="Apply").click()
        session.wait_for(f"#people?{urlencode({'min_failed': 0, 'department': department})}")
        params = {"filter[min_failed]": 0, "filter[department]": quoted(department)}
        params["per_page"] = PER_PAGE
        people = api.get("/victimsapi", {**params, "page": 1})
        assert people and {p["department"] for p in people} == {department}
        assert session.rows("People") == [person_row(p) for p in people]
    session.open("campaigns")
    session.page.get_by_label("Title").fill(COMMA_TITLE)
    session.page.get_by_role("button", name="Apply").click()
    session.wait_for(f"#campaigns?{urlencode({'title': COMMA_TITLE})}")
    assert [r[0] for r in session.rows("Campaigns")] == [COMMA_TITLE]


def test_a_refused_parameter_keeps_the_form(
    new_session: Callable[[str], Session], base: str, api: Api
) -> None:
    """A 400 says why under the view's form, which shows the values of the URL."""
    session = signed_in_as(new_session, base)
    session.open("people?min_failed=-1")
    alert = session.page.locator("#view").get_by_role("alert")
    assert "filter[min_failed]" in alert.text_content()
    assert session.page.get_by_label("Failed in at least").input_value() == "-1"
    session.page.get_by_label("Failed in at least").fill("3")
    session.page.get_by_role("button", name="Apply").click()
    session.wait_for("#people?min_failed=3")
    offenders = api.get("/victimsapi", {"filter[min_failed]": 3, "page": 1, "per_page": PER_PAGE})
    assert session.rows("People") == [person_row(p) for p in offenders]
    session.open("heatmap?by=email")
    assert "group_by" in alert.text_content()
    assert session.page.get_by_label("By", exact=True).input_value() == "email"
    assert session.page.get_by_role("button", name="Apply").is_visible()
    assert (session.dialogs, session.page.evaluate("() => window.cspViolations")) == ([], [])


def test_the_heatmap_form_shows_the_url_period(session: Session, api: Api) -> None:
    session.open("heatmap?interval=week")
    assert session.page.get_by_label("Period").input_value() == "week"
    assert session.page.locator("table.heat caption").text_content().endswith("and week")
    rows = api.get("/stats/phishing", {"interval": "week", "group_by": "department"})
    first = session.page.locator("table.heat thead th").nth(1).text_content()
    assert first == rows[0]["period_start"]


def contrast(foreground: str, background: str) -> float:
    """WCAG 2's contrast ratio of two computed colours ("rgb(r, g, b)")."""

    def luminance(colour: str) -> float:
        channels = [int(c) / 255 for c in colour[colour.index("(") + 1 : -1].split(",")[:3]]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_heatmap_cells_are_readable_at_every_rate(session: Session) -> None:
    """Every rate from 0 to 100 % (an answer made here): text against its cell >= 4.5:1."""
    rows = [
        {"period_start": "2026-01-01", "period_end": "2026-03-31", "department": f"D{n:03d}",
         "sends": 100, **dict.fromkeys(RATES, n / 100)}
        for n in range(101)
    ]  # fmt: skip
    pattern = f"**{API}/stats/phishing?*group_by=department*"
    headers = {"X-Total-Pages": "1", "Content-Type": "application/json"}
    session.page.route(pattern, lambda route: route.fulfill(headers=headers, json=rows))
    try:
        session.open("heatmap?by=department&interval=quarter")
        cells = session.page.locator("table.heat tbody td").evaluate_all(
            "cells => cells.map(c => getComputedStyle(c))"
            ".map(style => [style.color, style.backgroundColor])"
        )
    finally:
        session.page.unroute(pattern)
    assert len(cells) == 101
    ratios = [contrast(*cell) for cell in cells]
    assert min(ratios) >= 4.5, [(n, round(r, 2)) for n, r in enumerate(ratios) if r < 4.5]


def test_a_person_without_a_name_is_headed_by_email(session: Session) -> None:
    session.open(f"people/{NAMELESS['id']}")
    heading = session.page.get_by_role("heading", name=NAMELESS["email"], exact=True)
    assert heading.count() == 1
    assert session.page.locator(f'section[aria-label="{NAMELESS["email"]}"]').count() == 1


def test_a_page_past_the_end_links_back_to_the_last(session: Session) -> None:
    session.open("campaigns?page=5")
    pager = session.page.get_by_role("navigation", name="Pages")
    assert pager.get_by_text("Page 5 of 1").count() == 1
    assert pager.get_by_role("link", name="← Previous").count() == 0
    pager.get_by_role("link", name="← Back to page 1, the last").click()
    session.wait_for("#campaigns?page=1")


def test_long_words_wrap_instead_of_widening_the_page(
    new_session: Callable[[str], Session], base: str
) -> None:
    """At a phone's width, a 500-character name, department or title stays in the page."""
    session = new_session(base)
    session.page.set_viewport_size({"width": 375, "height": 800})
    sign_in(session)
    session.wait_for("#overview")
    fragments = ("overview", "campaigns", f"campaigns/{LONG_CAMPAIGN}", f"people/{LONG_PERSON}")
    for fragment in (*fragments, "people?min_failed=0", "heatmap?interval=month"):
        session.open(fragment)
        width = session.page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 375, fragment


def test_sign_out_drops_the_answers_still_on_their_way(
    new_session: Callable[[str], Session], base: str
) -> None:
    """An answer arriving after sign-out is neither drawn nor remembered for the next key."""
    session = signed_in_as(new_session, base)
    held: list[Route] = []
    pattern = f"**{API}/victimsapi?*"
    session.page.route(pattern, lambda route: held.append(route))
    session.page.evaluate("() => { location.hash = '#people'; }")
    for _ in range(250):
        if held:
            break
        session.page.wait_for_timeout(20)
    assert held
    session.page.get_by_role("button", name="Sign out").click()
    with contextlib.suppress(PlaywrightError):  # the page may have given up on it already
        held[0].continue_()
    session.page.unroute(pattern)
    session.page.wait_for_timeout(500)
    view = session.page.locator("#view")
    assert view.text_content() == "" and view.is_hidden()
    assert session.page.locator("#sign-in-error").text_content() == "Signed out."
    first = len(session.requests)
    sign_in(session, KEY_2)
    session.wait_for("#overview")
    session.open("people")
    (asked,) = [r for r in session.requests[first:] if f"{API}/victimsapi?" in r.url]
    assert "if-none-match" not in asked.headers  # no answer of the first key was kept


def test_sign_out_during_a_429_wait_ends_the_wait(
    new_session: Callable[[str], Session], base: str
) -> None:
    """The rate limit's message goes with the session; the wait's end changes nothing."""
    session = signed_in_as(new_session, base)
    pattern = f"**{API}/courses?*"
    problem = {"type": "about:blank", "title": "Too Many Requests", "status": 429}
    headers = {"Retry-After": "2", "Content-Type": "application/problem+json"}
    session.page.route(
        pattern, lambda route: route.fulfill(status=429, headers=headers, json=problem)
    )
    session.page.evaluate("() => { location.hash = '#training'; }")
    session.page.locator("#status").get_by_text("rate limit was reached").wait_for()
    session.page.get_by_role("button", name="Sign out").click()
    assert session.page.locator("#status").text_content() == ""
    session.page.wait_for_timeout(2500)  # past the Retry-After
    session.page.unroute(pattern)
    assert session.page.locator("#status").text_content() == ""
    assert session.page.locator("#sign-in-error").text_content() == "Signed out."
    assert (
        session.page.locator("#sign-in").is_visible() and session.page.locator("#view").is_hidden()
    )
