"""Headless Chromium as the browser tests drive it: Debian's build, never one
Playwright downloads, with the flags a closed network needs."""

import os
from pathlib import Path

from playwright.sync_api import Page

from tests.harness import processes
from tests.harness.processes import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Where the tests that look at a page leave its screenshot.
SHOTS = Path(os.environ.get("WALK_SCREENSHOTS", processes.ROOT / "var" / "screenshots"))


def until(page: Page, check, *, timeout: float, what: str) -> None:
    """Poll `check` while Playwright runs (its route handlers run only inside
    its own calls, so a plain sleep would hold every request)."""

    def pumped() -> object:
        page.wait_for_timeout(50)
        return check()

    wait_for(pumped, timeout=timeout, interval=0, what=what)
