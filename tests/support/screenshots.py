"""Screenshots of the dashboard's views: ``python -m tests.support.screenshots DIR``.

Serves a fresh copy of the sample data on a free 127.0.0.1 port, signs in with the sample
key of company 1 in Debian's chromium (the tests' launch set-up) and writes one PNG per
view into DIR, at a laptop width, and the overview once more at a phone width. It lives
beside the tests because it needs their extras (Playwright): ``make screenshots`` runs it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from app.tools.loader import SAMPLE_FIXTURE, load_files

from .browser import FLAGS
from .factories import KEY_1
from .servers import Launcher

VIEWS = {
    "overview": "overview",
    "campaigns": "campaigns",
    "campaign": "campaigns/1",
    "people": "people",
    "person": "people/7",
    "heatmap": "heatmap",
    "training": "training",
}
LAPTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def shoot(page: Page, base: str, fragment: str, path: Path) -> None:
    """Open a view, wait until it is drawn, and save the whole page."""
    page.goto(f"{base}/dashboard/#{fragment}")
    page.locator(f'#view[data-rendered="#{fragment}"]').wait_for()
    page.screenshot(path=str(path), full_page=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.support.screenshots DIR", file=sys.stderr)
        return 2
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium is needed: apt-get install chromium", file=sys.stderr)
        return 1
    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        db = Path(work) / "sample.sqlite3"
        load_files(db, [SAMPLE_FIXTURE])
        with Launcher(Path(work)) as launcher:
            base = launcher.serve(db).base
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
                for size, views in ((LAPTOP, VIEWS), (PHONE, {"overview-phone": "overview"})):
                    page = browser.new_page(viewport=size)
                    page.goto(f"{base}/dashboard/")
                    page.get_by_label("API key").fill(KEY_1)
                    page.get_by_role("button", name="Sign in").click()
                    for name, fragment in views.items():
                        shoot(page, base, fragment, folder / f"dashboard-{name}.png")
                        print(folder / f"dashboard-{name}.png")
                browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
