"""Swagger UI in a real browser: Try it out sends only what the user types (issue 21 item 6).

Debian's chromium, driven by Playwright, opens /api/docs served by a real server process
on 127.0.0.1. A list filter's items state the list grammar as a pattern, and Swagger UI
fills a new item from that pattern: "Add string item" must give an empty field (or a
value of the sample), never random text that Execute would then send.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import sync_playwright

from .support.browser import FLAGS, chromium
from .support.factories import make_sample_db, sample
from .support.servers import UNLIMITED, Launcher

pytestmark = pytest.mark.system  # starts a server and a browser (make test-fast skips it)
__all__ = ["chromium"]  # a pytest fixture: imported to be found, never called

# A list filter of each kind: a person filter (inscriptions) and a title (reports).
LIST_FILTERS = [
    ("training/listCourseInscriptions", "filter[email]", "oliver.turner@northwind.example"),
    ("reports/listCampaigns", "filter[title]", "Overdue Invoice Reminder"),
]


@pytest.fixture(scope="module")
def docs_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """/api/docs of `python -m app` over a copy of the sample data."""
    directory: Path = tmp_path_factory.mktemp("swagger")
    with Launcher(directory) as launcher:
        app = launcher.serve(make_sample_db(directory), *UNLIMITED)
        yield f"{app.base}/api/docs"


def sample_values() -> set[str]:
    """Every string of the sample fixtures: what a pre-filled item may hold."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, str):
            found.add(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(sample())
    return found


@pytest.mark.parametrize(("operation", "name", "typed"), LIST_FILTERS)
def test_add_string_item_starts_empty_or_with_a_sample_value(
    chromium: str, docs_url: str, operation: str, name: str, typed: str
) -> None:
    """Then Execute sends what the user typed in it, and nothing else."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(f"{docs_url}#/{operation}")  # deep link: the operation opens
            block = page.locator(f"#operations-{operation.replace('/', '-')}")
            block.locator("button.try-out__btn").click()
            row = block.locator(f'tr[data-param-name="{name}"]')
            row.get_by_role("button", name="Add string item").click()
            item = row.locator(".json-schema-array input[type=text]").first
            item.wait_for()
            value = item.input_value()
            assert value == "" or value in sample_values(), (name, value)
            assert row.locator(".json-schema-array input[type=text]").count() == 1
            item.fill(typed)
            with page.expect_request(lambda r: "/api/companies/" in r.url) as sent:
                block.locator("button.execute").click()
            assert parse_qs(urlsplit(sent.value.url).query) == {name: [typed]}
        finally:
            browser.close()
