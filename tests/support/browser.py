"""Debian's chromium for the browser tests, driven by Playwright: one launch set-up.

Never a browser build downloaded by Playwright. Without chromium the tests skip, except in
CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import shutil

import pytest

# Headless, and nothing that reaches past 127.0.0.1 (updates, sync, first-run pages).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
FLAGS += ["--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium; a skip without it, except in CI (CI=true), where it fails."""
    path = shutil.which("chromium")
    if path:
        return path
    reason = "chromium is not installed (make test installs it with apt-get)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)
