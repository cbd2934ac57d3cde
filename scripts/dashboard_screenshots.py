"""Screenshots of the dashboard's views: ``dashboard_screenshots.py DIR`` (make screenshots).

Serves a fresh copy of the sample data on a free 127.0.0.1 port, signs in with the sample
key of company 1 in Debian's chromium (the tests' launch set-up) and writes one PNG per
view into DIR, at a laptop width, and the overview once more at a phone width.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import benchlib as lib  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

from app.tools.loader import SAMPLE_FIXTURE, load_files  # noqa: E402
from tests.support.browser import FLAGS  # noqa: E402

KEY = "rk_sample_northwind_7f3c9a1e5b2d4c6f8a0b"  # the sample's company 1
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
        print("usage: dashboard_screenshots.py DIR", file=sys.stderr)
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
        port = lib.free_port()
        command = [sys.executable, "-m", "app", "--db", str(db), "--port", str(port)]
        server = lib.Process(command, port, Path(work) / "server.log", ROOT)
        try:
            server.wait_ready("/healthz")
            base = f"http://127.0.0.1:{port}"
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=FLAGS)
                for size, views in ((LAPTOP, VIEWS), (PHONE, {"overview-phone": "overview"})):
                    page = browser.new_page(viewport=size)
                    page.goto(f"{base}/dashboard/")
                    page.get_by_label("API key").fill(KEY)
                    page.get_by_role("button", name="Sign in").click()
                    for name, fragment in views.items():
                        shoot(page, base, fragment, folder / f"dashboard-{name}.png")
                        print(folder / f"dashboard-{name}.png")
                browser.close()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
