"""What the bar says to a screen reader (webfarm/progress/static/webfarm_progress/progress.js
in a real Chromium, against documents served by Playwright's router): one
polite status line at a new state, a new stage or a new quarter, not at
every poll, and the end with its summary."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, sync_playwright

from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.harness.chromium import until as _until

pytestmark = pytest.mark.browser

STATIC = Path(__file__).resolve().parents[2] / "webfarm/progress/static/webfarm_progress"
# A progress URL as the widget has it: the bar believes only documents of its own job.
JOB, TOKEN = "J" * 22, "T" * 22
URL = f"/progress/{JOB}/{TOKEN}/"
PAGE = f"""<!doctype html><html lang="en"><body>
<div class="job-progress state-queued" data-progress-url="{URL}">
  <div class="bar" role="progressbar" aria-label="Sales" aria-valuenow="0"><div class="fill"></div></div>
  <span data-field="state"></span><span data-field="percent"></span><span data-field="stage"></span>
  <span data-field="elapsed"></span><span data-field="eta"></span>
  <div data-field="message"></div><div data-field="announce" role="status"></div>
  <div data-field="retry" hidden></div><div data-field="error" hidden></div>
  <a data-field="download" hidden>Download</a>
</div>
<form data-again-for="{JOB}" hidden><button>Start it again with the same settings</button></form>
<script>
  window.said = []; window.messages = 0;
  const watch = (name, seen) => new MutationObserver(seen).observe(
    document.querySelector("[data-field=" + name + "]"),
    {{childList: true, characterData: true, subtree: true}});
  watch("announce", () => said.push(document.querySelector("[data-field=announce]").textContent));
  watch("message", () => window.messages++);
</script>
<script>{(STATIC / "poller.js").read_text()}</script>
<script>{(STATIC / "progress.js").read_text()}</script>
</body></html>"""


def _documents() -> list[dict]:
    """A job read at every 5 percent: three stages, then the end."""
    docs = []
    for i, percent in enumerate(range(0, 100, 5)):
        stage = "reading orders" if percent < 50 else "aggregating" if percent < 90 else "writing file"
        docs.append(
            {
                "job": JOB,
                "state": "running",
                "percent": percent,
                "stage": stage,
                "message": f"step {i}",
                "updated_at": f"t{i}",
                "started_at": "2026-01-01T00:00:00+00:00",
            }
        )
    end = {"state": "succeeded", "percent": 100, "message": "42 rows", "updated_at": "end"}
    docs.append({**docs[-1], **end, "finished_at": "2026-01-01T00:01:40+00:00"})
    return docs


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser.new_page()
        browser.close()


def _open(page: Page, docs: list[dict]) -> dict[str, int]:
    """The page, its bar served `docs` one per poll (the last one again after
    them); returns the count of polls served."""
    served = {"n": 0}

    def serve(route: Route) -> None:
        doc = docs[min(served["n"], len(docs) - 1)]
        served["n"] += 1
        route.fulfill(status=200, content_type="application/json", body=json.dumps(doc))

    page.route(f"http://bar.test{URL}", serve)
    page.route("http://bar.test/", lambda route: route.fulfill(content_type="text/html", body=PAGE))
    page.goto("http://bar.test/")
    return served


def test_the_bar_speaks_at_states_stages_and_quarters_not_at_every_poll(page: Page):
    docs = _documents()
    _open(page, docs)
    _until(
        page,
        lambda: page.evaluate("said.length && said[said.length - 1].includes('succeeded')"),
        timeout=60,
        what="the end",
    )
    said, messages = page.evaluate("[said, messages]")
    assert messages == len(docs)  # every poll brought news for the eye
    assert said == [
        "Sales: running, reading orders, 0 percent.",
        "Sales: running, reading orders, 25 percent.",
        "Sales: running, aggregating, 50 percent.",
        "Sales: running, aggregating, 75 percent.",
        "Sales: running, writing file, 90 percent.",
        "Sales: succeeded. 42 rows",
    ]
    assert page.locator("[data-field=elapsed]").text_content() == "took 1 min 40 s"


def test_a_job_that_fails_while_watched_says_why_and_offers_to_start_again(page: Page):
    running = {"job": JOB, "state": "running", "percent": 40, "stage": "reading orders", "updated_at": "t1"}
    _open(
        page,
        [running, {**running, "state": "failed", "error": "The database went away.", "updated_at": "t2"}],
    )
    again = page.get_by_role("button", name="Start it again with the same settings")
    _until(page, again.is_visible, timeout=20, what="the offer to start again")
    assert page.locator("[data-field=error]").text_content() == "The database went away."
    assert page.evaluate("said[said.length - 1]") == "Sales: failed."


def test_a_document_the_site_did_not_publish_is_not_believed(page: Page):
    """nginx serves what memcached holds: another job's document is polled
    again, not drawn; a lying one is drawn only as far as it is harmless (text
    as text, no link off the site, no job to follow but a job id)."""
    other = {"job": "O" * 22, "state": "running", "percent": 90, "message": "ANOTHER JOB", "updated_at": "o"}
    lying = {
        "job": JOB,
        "state": "succeeded",
        "percent": 100,
        "message": "<img src=x onerror=window.pwned=1>",
        "result_url": "javascript:window.pwned=1",
        "retried_as": "../../accounts/logout",
        "updated_at": "l",
    }
    served = _open(page, [other, lying])
    message = page.locator("[data-field=message]")
    _until(page, lambda: message.text_content() == lying["message"], timeout=20, what="the lying document")
    assert served["n"] >= 2 and "ANOTHER JOB" not in page.evaluate("document.body.textContent")
    download = page.locator("[data-field=download]")
    assert download.is_hidden() and download.get_attribute("href") is None
    assert page.locator("img[src=x]").count() == 0 and page.evaluate("window.pwned") is None
    assert page.locator("[data-progress-url]").get_attribute("data-progress-url") == URL
