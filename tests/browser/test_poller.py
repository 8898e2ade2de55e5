"""webfarm/progress/static/webfarm_progress/poller.js in a real Chromium, against documents
served by Playwright's router (no farm needed): it slows down while the
document does not change, also without an ETag (nginx's fast path sends
none), speeds up when it changes, honours Retry-After and stops at the end."""

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, sync_playwright

from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.harness.chromium import until as _until

pytestmark = pytest.mark.browser

POLLER = (
    Path(__file__).resolve().parents[2] / "webfarm/progress/static/webfarm_progress/poller.js"
).read_text()
PAGE = f"""<!doctype html><html><body><script>{POLLER}</script>
<script>
  window.events = [];
  window.poller = webfarm.poll("/doc", {{
    minDelay: 100, idleMax: 800, errorMax: 2000,
    isFinal: function (d) {{ return d.state === "succeeded"; }},
    onProgress: function (d) {{ events.push("progress " + d.updated_at); }},
    onSuccess: function (d) {{ events.push("success"); }},
    onRetry: function (ms) {{ events.push("retry " + ms); }},
  }});
  poller.schedule(0);
</script></body></html>"""


@pytest.fixture
def page() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        yield page
        browser.close()


def test_backs_off_without_etag_speeds_up_on_change_honours_retry_after_and_stops(page: Page):
    document = {"state": "running", "updated_at": "t1"}
    polls: list[float] = []
    unavailable = {"left": 0}

    def serve(route: Route) -> None:
        polls.append(time.monotonic())
        if unavailable["left"]:
            unavailable["left"] -= 1
            route.fulfill(status=503, headers={"Retry-After": "1"}, body="{}")
        else:
            route.fulfill(status=200, content_type="application/json", body=json.dumps(document))

    page.route("http://poller.test/doc", serve)
    page.route("http://poller.test/", lambda route: route.fulfill(content_type="text/html", body=PAGE))
    page.goto("http://poller.test/")

    # Unchanged, no ETag: the gaps grow towards idleMax (0.8 s), not stay at 0.1 s.
    _until(page, lambda: len(polls) >= 7, timeout=15, what="seven polls")
    gaps = [b - a for a, b in itertools.pairwise(polls)]
    # The planned gaps are ~0.1, 0.15, 0.22, 0.34, 0.51, 0.76 s (+-20%). A busy
    # machine can only lengthen one, so the early test takes the quickest of three.
    assert gaps[-1] > 0.4 > min(gaps[:3]), gaps
    assert page.evaluate("events") == ["progress t1"]  # one document, shown once

    # A change: shown, and the next poll comes quickly again.
    document["updated_at"] = "t2"
    _until(page, lambda: "progress t2" in page.evaluate("events"), timeout=5, what="the change")
    seen = len(polls)
    _until(page, lambda: len(polls) > seen, timeout=5, what="the next poll")
    assert polls[-1] - polls[-2] < 0.4

    # 503 with Retry-After: 1 s: it waits at least that long, and says so.
    unavailable["left"] = 1
    _until(
        page, lambda: any(e.startswith("retry") for e in page.evaluate("events")), timeout=5, what="a retry"
    )
    retried_at = polls[-1]
    _until(page, lambda: polls[-1] > retried_at, timeout=5, what="the poll after the retry")
    assert polls[-1] - retried_at >= 0.75  # 1 s, less the jitter

    # The end: onSuccess, and no more polls.
    document.update(state="succeeded", updated_at="t3")
    _until(page, lambda: page.evaluate("events")[-1:] == ["success"], timeout=5, what="the end")
    ended = len(polls)
    page.wait_for_timeout(1500)  # a running poller would have polled by now (idleMax 0.8 s)
    assert len(polls) == ended


def test_one_request_at_a_time_and_an_answer_to_a_left_url_is_dropped(page: Page):
    """The attack: with a slow poll in flight, a tab shown again started a
    second beside it, and an answer to the URL the page had left (nginx's,
    unchecked) was acted on after the page moved to Django's. Now a poll
    asked for meanwhile follows the one in flight, and a late answer to a
    URL left behind is never shown."""
    held: list[Route] = []
    page.route("http://poller.test/doc", lambda route: held.append(route))
    page.route(
        "http://poller.test/checked",
        lambda route: route.fulfill(
            status=200,
            content_type="application/json",
            body=json.dumps({"state": "running", "updated_at": "checked"}),
        ),
    )
    page.route("http://poller.test/", lambda route: route.fulfill(content_type="text/html", body=PAGE))
    page.goto("http://poller.test/")
    _until(page, lambda: len(held) == 1, timeout=10, what="the first poll")
    for _ in range(3):  # the tab shown again, three times, while the poll is on its way
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.evaluate("poller.resume(0)")
    page.wait_for_timeout(500)  # a second request would have started at once
    assert len(held) == 1, f"{len(held)} requests at once"
    # The page moves to the checked URL; the slow answer then arrives, planted.
    page.evaluate("poller.setUrl('/checked'); poller.resume(0)")
    held[0].fulfill(
        status=200,
        content_type="application/json",
        body=json.dumps({"state": "lost", "updated_at": "planted"}),
    )
    _until(page, lambda: "progress checked" in page.evaluate("events"), timeout=10, what="the checked answer")
    assert page.evaluate("events") == ["progress checked"]
