"""A person's path in headless Chromium: log in, start a report, watch the bar,
download the file."""

import csv
import io
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from demofarm.polls.services import FLUSH_LOCK_TTL
from tests.harness import processes
from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS, SHOTS
from tests.harness.marks import one_broker
from tests.harness.web import DEMO_PASSWORD, WebClient, create_poll, flush_votes, new_user, vote_anonymously

pytestmark = [pytest.mark.farm, pytest.mark.browser]

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


# Every report of the pages' Content-Security-Policy, kept on the page
# (injected by the browser's tools, which the policy does not govern).
REPORT_CSP = """
  window.__csp = [];
  document.addEventListener("securitypolicyviolation", function (e) {
    window.__csp.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || ""));
  });
"""


@pytest.fixture
def page(browser: Browser, farm) -> Iterator[Page]:
    context = browser.new_context(base_url=farm.node_a, accept_downloads=True)
    context.add_init_script(REPORT_CSP)
    page = context.new_page()
    yield page
    assert page.evaluate("window.__csp") == [], "the page broke its Content-Security-Policy"
    context.close()


def _log_in(page: Page, username: str) -> None:
    page.goto("/")
    expect(page).to_have_url("/accounts/login/?next=/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Reports")).to_be_visible()


def test_start_a_report_watch_it_finish_and_download_it(page: Page, tmp_path: Path):
    _log_in(page, "alice")
    page.get_by_role("link", name="Set up and start").nth(1).click()  # top customers
    expect(page.get_by_role("heading", name="Top customers")).to_be_visible()
    page.get_by_label("Top").fill("20")
    page.get_by_role("button", name="Start report").click()

    bar = page.get_by_role("progressbar")
    expect(bar).to_be_visible()
    # The bar moves: some value strictly between 0 and 100 is shown on the way.
    page.wait_for_function(
        "() => { const v = +document.querySelector('[role=progressbar]').getAttribute('aria-valuenow');"
        " return v > 0 && v < 100; }",
        timeout=60_000,
    )
    expect(page.locator(".job-progress [data-field=stage]")).not_to_be_empty()
    # Done: the page reloads once to list the files and show the chart.
    expect(page.locator(".job-progress.state-succeeded")).to_be_visible(timeout=120_000)
    expect(page.get_by_role("progressbar")).to_have_attribute("aria-valuenow", "100")
    expect(page.get_by_role("img", name="Chart")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel")).to_be_hidden()

    with page.expect_download() as download_info:
        page.locator(".job-progress [data-field=download]").click()
    download = download_info.value
    assert download.suggested_filename == "top-customers.csv"
    path = tmp_path / "top.csv"
    download.save_as(path)
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0][:2] == ["rank", "customer"] and len(rows) == 21


def test_my_jobs_shows_several_live_bars_and_cancel_works(page: Page):
    _log_in(page, "bob")
    for _ in range(2):
        page.goto("/reports/return-rates/")  # runs whole: both run at once, one on each process
        page.get_by_role("button", name="Start report").click()
        expect(page.get_by_role("progressbar")).to_be_visible()
    page.goto("/jobs/")
    bars = page.get_by_role("progressbar")
    expect(bars).to_have_count(2)
    # Both bars are polled: each reaches a running state with progress.
    page.wait_for_function(
        "() => [...document.querySelectorAll('[role=progressbar]')]"
        ".every(b => +b.getAttribute('aria-valuenow') > 0)",
        timeout=60_000,
    )
    first = page.locator(".job-progress").first
    first.get_by_role("button", name="Cancel").click()
    expect(first.locator("[data-field=state]")).to_have_text("cancelled", timeout=30_000)
    expect(first.get_by_role("button", name="Cancel")).to_be_hidden()
    page.locator(".job-progress").nth(1).get_by_role("button", name="Cancel").click()
    expect(page.locator(".job-progress.state-cancelled")).to_have_count(2, timeout=30_000)


@one_broker
@pytest.mark.timeout(600)
def test_the_bar_waits_out_retry_after_and_recovers(page: Page):
    """The first polls meet a 503 with Retry-After: 2; the widget says so, waits
    at least that long between tries, then carries on to the end."""
    polls: list[float] = []

    def flaky(route: Route) -> None:
        polls.append(time.monotonic())
        if len(polls) <= 2:
            route.fulfill(status=503, headers={"Retry-After": "2"}, json={"error": "down"})
        else:
            route.continue_()

    _log_in(page, "alice")
    page.goto("/reports/return-rates/")  # no bars here: only the new job's polls are counted
    page.route(re.compile(r"/progress/[A-Za-z0-9_-]{22}/([A-Za-z0-9_-]{22}/)?$"), flaky)
    page.get_by_role("button", name="Start report").click()
    expect(page.locator(".job-progress [data-field=message]")).to_contain_text("temporarily unavailable")
    # The whole report: minutes on a 2-core machine running the suite beside it.
    expect(page.locator(".job-progress.state-succeeded")).to_be_visible(timeout=300_000)
    assert len(polls) >= 3
    # Retry-After: 2, with at most 20 % jitter taken off.
    assert polls[1] - polls[0] >= 1.6 and polls[2] - polls[1] >= 1.6, polls[:3]


def test_staff_see_the_farm_dashboard_with_data(page: Page, farm):
    alice = farm.client("alice")
    done = alice.start_report("top-customers", {**ALL_DATES, "top": 5, "region": ""})["job"]
    alice.wait_until(done, lambda p: p["state"] == "succeeded", what="a finished job to chart")
    processes.manage(farm.env, "harvest_counters")
    processes.manage(farm.env, "drain_sitelog")

    _log_in(page, "admin")
    page.goto("/admin/")
    page.get_by_role("link", name="Farm dashboard").click()
    expect(page.get_by_role("heading", name="Farm dashboard")).to_be_visible()

    # Four charts, each a picture that loaded, with its numbers beside it.
    charts = page.locator("figure.chart img")
    expect(charts).to_have_count(4)
    page.wait_for_function(
        "() => [...document.querySelectorAll('figure.chart img')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    jobs = page.locator("figure[data-chart=jobs]")
    jobs.locator("summary").click()
    column = jobs.locator("thead th").all_text_contents().index("succeeded")
    # A row an hour: the job may have ended in the hour before the newest row's.
    succeeded = [row.locator("th, td").nth(column).inner_text() for row in jobs.locator("tbody tr").all()]
    assert sum(int(n) for n in succeeded) >= 1, succeeded
    polls = page.locator("figure[data-chart=polls]")
    polls.locator("summary").click()
    expect(polls.locator("tbody tr").first).to_be_visible()

    # The live part: the worker's heartbeat, the server, the queues, the activity.
    expect(page.locator("tr[data-worker^='worker-a@'] .state")).to_have_text("up")
    expect(page.locator(f"tr[data-server='{farm.memcached_address}'] .state")).to_contain_text("up")
    expect(page.locator("tr[data-queue=sitelog]")).to_be_visible()
    # What people did, not what their pages polled.
    expect(page.locator("table.activity")).to_contain_text("POST /reports/top-customers/ 202")
    expect(page.locator("table.activity")).not_to_contain_text("GET /progress/")

    # Alice's running job with its live bar, which staff may cancel: started
    # now, so that it still runs when the button is pressed.
    running = alice.start_report("sales-by-region", ALL_DATES)["job"]
    alice.wait_until(running, lambda p: p["state"] == "running", what="alice's job running")
    page.reload()
    bar = page.locator(f".job-progress[data-progress-url^='/progress/{running}/']")
    page.wait_for_function(
        "(url) => +document.querySelector(`.job-progress[data-progress-url^='${url}'] [role=progressbar]`)"
        ".getAttribute('aria-valuenow') > 0",
        arg=f"/progress/{running}/",
        timeout=60_000,
    )
    bar.get_by_role("button", name="Cancel").click()
    expect(bar.locator("[data-field=state]")).to_have_text("cancelled", timeout=30_000)
    assert alice.progress(running)["state"] == "cancelled"


@one_broker
def test_the_dashboard_refuses_non_staff(page: Page):
    _log_in(page, "bob")
    response = page.goto("/admin/dashboard/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.locator("main")).to_contain_text("for staff")
    assert page.goto("/admin/dashboard/charts/jobs.png").status == 403


@pytest.mark.timeout(600)
def test_a_killed_worker_s_job_turns_lost_and_runs_again_under_the_same_bar(page: Page, farm):
    """SIGKILL the whole worker running a job: the reaper (a real celery beat
    sending it to the other worker) ends the job as lost within the heartbeat
    bound and starts it again; the bar on the user's page follows the new job
    to the end."""
    beat = processes.celery_beat({**farm.env, "REAP_EVERY": "1"}, farm.dir, f"beat-{farm.broker}")
    try:
        _log_in(page, "bob")
        bob = farm.client("bob")
        job = bob.start_report("return-rates", {**ALL_DATES, "min_units": 10})[
            "job"
        ]  # a report that runs whole
        page.goto(f"/jobs/{job}/")
        bob.wait_until(job, lambda p: p["state"] == "running" and p["percent"] > 2, timeout=60)
        # Held where it is while the other worker starts, however soon this
        # machine would finish the report: then killed.
        os.killpg(farm.worker.proc.pid, signal.SIGSTOP)
        other = processes.celery_worker(farm.env, farm.dir, f"worker-b-{farm.broker}")
        farm.others.append(other)
        farm.worker.stop(signal.SIGKILL)
        farm.replace(farm.worker, other)
        killed_at = time.monotonic()
        lost = bob.wait_until(job, lambda p: p["final"], timeout=60, what="the job to be declared lost")
        took = time.monotonic() - killed_at
        # PROGRESS_HEARTBEAT_INTERVAL 2 s x 3 beats, a reaper every second, and slack.
        assert lost["state"] == "lost" and took < 15, (lost, took)
        assert "worker running this job stopped" in lost["error"] and lost["retried_as"]
        # The bar moved on to the new attempt and says why.
        expect(page.locator(".job-progress [data-field=retry]")).to_contain_text("Attempt 2", timeout=15_000)
        retry = lost["retried_as"]
        # The whole report again: minutes on a 2-core machine running the suite beside it.
        final = bob.wait_until(retry, lambda p: p["final"], timeout=300, what="the retry to finish")
        assert final["state"] == "succeeded" and final["attempt"] == 2
        # The bar followed: the page is now the retry's, finished, with its file.
        expect(page).to_have_url(re.compile(f"/jobs/{retry}/$"), timeout=30_000)
        expect(page.locator(".job-progress.state-succeeded")).to_be_visible()
        assert bob.progress(job)["state"] == "lost"  # the first attempt stays what it was
    finally:
        beat.stop()


@one_broker
def test_the_start_form_shows_a_refusal_and_when_to_try_again(page: Page, farm):
    _log_in(page, "alice")
    alice = farm.client("alice")
    running = [alice.start_report("sales-by-region", ALL_DATES)["job"] for _ in range(4)]  # the farm's limit
    try:
        page.goto("/reports/return-rates/")
        page.get_by_role("button", name="Start report").click()
        refusal = page.get_by_role("alert")
        expect(refusal).to_contain_text("You already have 4 reports queued or running")
        expect(page.get_by_role("button", name="Start report")).to_be_disabled()
        expect(page.locator("[data-countdown]")).to_contain_text("You can try again in")
        expect(page).to_have_url(re.compile("/reports/return-rates/$"))  # no page change: the form stays
    finally:
        for job in running:
            alice.post(f"/progress/{job}/cancel/", headers={"Accept": "application/json"})
    for job in running:
        alice.wait_until(job, lambda p: p["final"], timeout=60)
    # Slots free again: the countdown ends and the same form starts the job.
    expect(page.locator("[data-countdown]")).to_contain_text("You can try again now", timeout=65_000)
    page.get_by_role("button", name="Start report").click()
    expect(page.get_by_role("progressbar")).to_be_visible()


@one_broker
def test_poll_results_bars_move_while_others_vote(page: Page, farm):
    poll, (_, no) = create_poll(farm.env, f"Bars on {farm.broker}?", ["Yes", "No"])
    # The flusher makes the running totals. Ours waits while another holds the
    # lock: beat's, or one a killed worker held (an earlier test), lapsing within its lifetime.
    processes.wait_for(
        lambda: flush_votes(farm.env), timeout=FLUSH_LOCK_TTL + 15, interval=0.5, what="a flush by hand"
    )
    page.goto(f"/polls/{poll}/")
    results = page.locator(".poll-results")
    expect(results.locator("[data-field=votes]")).to_have_text("0 votes")
    page.get_by_role("radio", name="Yes").check()
    page.get_by_role("button", name="Vote").click()
    expect(page.get_by_role("status")).to_have_text("Thank you: your vote is counted.")
    expect(results.locator("[data-field=votes]")).to_have_text("1 vote")
    expect(page.get_by_role("progressbar", name="Yes")).to_have_attribute("aria-valuenow", "100")

    # Others vote on the other node; this page moves its bars without reloading.
    page.evaluate("window.notReloaded = true")
    for _ in range(3):
        assert vote_anonymously(farm.node_b, poll, no).status_code == 200
    expect(results.locator("[data-field=votes]")).to_have_text("4 votes", timeout=10_000)
    expect(page.get_by_role("progressbar", name="No")).to_have_attribute("aria-valuenow", "75")
    expect(page.get_by_role("progressbar", name="Yes")).to_have_attribute("aria-valuenow", "25")
    expect(results.locator("[data-choice] [data-field=count]")).to_have_text(["1", "3"])
    assert page.evaluate("window.notReloaded") is True

    page.get_by_role("radio", name="No").check()  # a second vote from this browser
    page.get_by_role("button", name="Vote").click()
    expect(page.get_by_role("alert")).to_have_text("You have already voted in this poll.")


@one_broker
def test_import_customers_from_a_csv_file_and_download_the_rejected_rows(page: Page, farm):
    """The second job type, start to end: upload, a worker checks the rows
    under a live bar, the page lists the rejected ones, and they download."""
    tag = uuid.uuid4().hex[:8]
    data = "\n".join(
        [
            "name,email,region,joined_on",
            f"Ada {tag},ada-{tag}@example.org,North,2024-05-01",
            f"Grace {tag},grace-{tag}@example.org,west,2023-12-09",
            f"Linus {tag},linus-{tag}@example.org,Central,2022-01-31",
            f"Nobody {tag},nobody-{tag}@example.org,Atlantis,2024-01-01",
            "Seeded,customer1@example.com,East,2024-01-01",  # seed_demo's first customer
        ]
    ).encode()
    _log_in(page, "alice")
    page.get_by_role("link", name="Import customers").click()
    page.get_by_label("CSV file").set_input_files(
        files=[{"name": f"customers-{tag}.csv", "mimeType": "text/csv", "buffer": data}]
    )
    page.get_by_role("button", name="Import").click()
    expect(page).to_have_url(re.compile(r"/imports/[A-Za-z0-9_-]+/$"))
    expect(page.get_by_role("heading", name=f"Customer import: customers-{tag}.csv")).to_be_visible()
    # The page reloads when the job succeeds, to list what it rejected.
    expect(page.get_by_role("heading", name="Rejected rows")).to_be_visible(timeout=60_000)
    expect(page.locator(".job-progress [data-field=message]")).to_have_text(
        "3 customers imported, 2 rows rejected"
    )
    cells = page.locator("table.rejected tbody tr td:nth-child(2)")
    expect(cells).to_have_text(
        [
            "the region 'Atlantis' is not one of North, South, East, West, Central",
            "customer1@example.com is already a customer",
        ]
    )
    with page.expect_download() as download:
        page.get_by_role("link", name="Download the rejected rows (CSV)").click()
    table = list(csv.reader(io.StringIO(Path(download.value.path()).read_text())))
    assert [row[:2] for row in table[1:]] == [
        ["5", "the region 'Atlantis' is not one of North, South, East, West, Central"],
        ["6", "customer1@example.com is already a customer"],
    ]
    saved = processes.manage(
        farm.env,
        "shell",
        "-c",
        "from demofarm.reports.models import Customer; "
        f"print(Customer.objects.filter(email__contains={tag!r}).count())",
    )
    assert saved.strip().splitlines()[-1] == "3"
    # "My jobs" lists it, linking to its own page.
    page.get_by_role("link", name="My jobs").click()
    page.get_by_role("link", name=f"Customer import: customers-{tag}.csv").click()
    expect(page).to_have_url(re.compile(r"/imports/[A-Za-z0-9_-]+/$"))


# -- what a person sees: every page, checked ------------------------------------------

# Template syntax, Python's and JavaScript's empty values, a traceback: none belongs in a page's text.
NOT_FOR_PEOPLE = re.compile(r"\{#|\{%|\{\{|#\}|%\}|\}\}|\bNone\b|\bundefined\b|\bNaN\b|Traceback")


def _looks_right(page: Page, name: str) -> None:
    """The page's text has nothing of the machinery in it, axe-core finds no
    serious or critical problem, it kept its Content-Security-Policy (no
    report), and its screenshot is in SHOTS."""
    assert page.evaluate("window.__csp") == [], (name, page.evaluate("window.__csp"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    text = page.locator("body").inner_text()
    found = NOT_FOR_PEOPLE.search(text)
    assert found is None, (name, found.group(0), text[max(0, found.start() - 80) : found.end() + 80])
    violations = Axe().run(page).response["violations"]
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert not serious, (
        name,
        [
            (v["id"], v["help"], [(n["target"], n.get("failureSummary")) for n in v["nodes"]][:4])
            for v in serious
        ],
    )


def _new_user(farm, username: str) -> WebClient:
    return new_user(farm.env, farm.node_a, username)


@one_broker
def test_every_page_reads_right_and_passes_axe_for_visitors_users_and_staff(browser: Browser, farm):
    poll, _ = create_poll(farm.env, "Walked?", ["Yes", "No"])
    walker = _new_user(farm, "walker")
    finished = walker.start_report("top-customers", {**ALL_DATES, "top": 5, "region": ""})["job"]
    walker.wait_until(finished, lambda p: p["state"] == "succeeded", timeout=120, what="a finished job")

    def visitor(username: str | None) -> Page:
        context = browser.new_context(base_url=farm.node_a, viewport={"width": 1200, "height": 900})
        context.add_init_script(REPORT_CSP)
        page = context.new_page()
        if username:
            page.goto("/accounts/login/")
            page.get_by_label("Username").fill(username)
            page.get_by_label("Password").fill(DEMO_PASSWORD)
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("heading", name="Reports")).to_be_visible()
        return page

    anonymous = visitor(None)
    for name, path, status in [
        ("anonymous-login", "/accounts/login/", 200),
        ("anonymous-polls", "/polls/", 200),
        ("anonymous-poll", f"/polls/{poll}/", 200),
        ("anonymous-404", "/no/such/page/", 404),
    ]:
        assert anonymous.goto(path).status == status, path
        _looks_right(anonymous, name)

    user = visitor("walker")
    pages = [
        ("home", "/"),
        ("report-sales-by-region", "/reports/sales-by-region/"),
        ("report-top-customers", "/reports/top-customers/"),
        ("report-return-rates", "/reports/return-rates/"),
        ("job-finished", f"/jobs/{finished}/"),
        ("polls", "/polls/"),
        ("poll", f"/polls/{poll}/"),
        ("imports", "/imports/"),
    ]
    for name, path in pages:
        assert user.goto(path).status == 200, path
        _looks_right(user, name)
    assert user.goto("/admin/dashboard/").status == 403
    _looks_right(user, "refused-dashboard")
    assert user.goto("/jobs/not-a-job/").status == 404
    _looks_right(user, "job-404")

    # A running job, "My jobs" with it, then the start form refusing one too many.
    running = [walker.start_report("sales-by-region", ALL_DATES)["job"] for _ in range(4)]  # the farm's limit
    try:
        user.goto(f"/jobs/{running[0]}/")
        expect(user.locator(".job-progress .state")).to_have_text(re.compile("queued|running"))
        _looks_right(user, "job-running")
        # On a phone: the same words, nothing wider than the screen.
        user.set_viewport_size({"width": 390, "height": 800})
        expect(user.locator(".job-progress [data-field=state]")).to_be_visible()
        assert user.evaluate("document.documentElement.scrollWidth") <= 390
        _looks_right(user, "job-running-phone")
        user.set_viewport_size({"width": 1200, "height": 900})
        user.goto("/jobs/")
        _looks_right(user, "my-jobs")
        user.goto("/reports/return-rates/")
        user.get_by_role("button", name="Start report").click()
        expect(user.get_by_role("alert")).to_contain_text("You already have 4 reports")
        _looks_right(user, "start-refused")
    finally:
        for job in running:
            walker.post(f"/progress/{job}/cancel/", headers={"Accept": "application/json"})

    staff = visitor("admin")
    staff.goto("/admin/dashboard/")
    expect(staff.get_by_role("heading", name="Running jobs")).to_be_visible()
    _looks_right(staff, "dashboard")
    # The admin's own pages, and the password forms, keep the policy too.
    for name, path in [
        ("admin", "/admin/"),
        ("admin-users", "/admin/auth/user/"),
        ("admin-user-add", "/admin/auth/user/add/"),
        ("admin-password-change", "/admin/password_change/"),
        ("password-change", "/accounts/password_change/"),
    ]:
        answer = staff.goto(path)
        assert answer.status == 200, path
        assert "script-src 'self'" in answer.headers["content-security-policy"], path
        assert staff.evaluate("window.__csp") == [], (name, staff.evaluate("window.__csp"))
        SHOTS.mkdir(parents=True, exist_ok=True)
        staff.screenshot(path=SHOTS / f"{name}.png", full_page=True)
    for page in (anonymous, user, staff):
        page.context.close()


def _tab_to(page: Page, name: str, *, limit: int = 40) -> None:
    """Press Tab until the focused element reads `name`."""
    focused = "() => (document.activeElement.innerText || document.activeElement.value || '').trim()"
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(focused) == name:
            return
    raise AssertionError(f"{name!r} cannot be reached with Tab")


def _log_in_by_keyboard(page: Page, username: str) -> None:
    page.goto("/accounts/login/")
    for _ in range(10):  # the field has autofocus; Tab gets there if it had not
        if page.evaluate("() => document.activeElement.name") == "username":
            break
        page.keyboard.press("Tab")
    page.keyboard.type(username)
    page.keyboard.press("Tab")
    page.keyboard.type(DEMO_PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Reports")).to_be_visible()


@one_broker
def test_with_the_keyboard_alone_a_user_starts_cancels_and_downloads(page: Page, farm):
    _new_user(farm, "keys")
    _log_in_by_keyboard(page, "keys")
    page.goto("/reports/sales-by-region/")
    _tab_to(page, "Start report")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs/[\w-]+/$"))
    _tab_to(page, "Cancel")
    page.keyboard.press("Enter")
    expect(page.locator(".job-progress.state-cancelled")).to_be_visible(timeout=30_000)

    page.goto("/reports/top-customers/")
    _tab_to(page, "Start report")
    page.keyboard.press("Enter")
    expect(page.locator(".job-progress.state-succeeded")).to_be_visible(timeout=120_000)
    expect(page.get_by_role("heading", name="Files")).to_be_visible()  # the reload on success
    with page.expect_download() as download:
        _tab_to(page, "Download")
        page.keyboard.press("Enter")
    assert download.value.suggested_filename == "top-customers.csv"


@one_broker
def test_my_jobs_shows_jobs_come_and_go_without_a_reload(page: Page, farm):
    mine = _new_user(farm, "lister")
    _log_in_by_keyboard(page, "lister")
    page.get_by_role("link", name="My jobs").click()
    page.get_by_role("link", name="Running").click()
    expect(page.locator("ul.jobs")).to_contain_text("No jobs here.")
    page.evaluate("window.notReloaded = true")
    # Started elsewhere (another tab, the API), it comes into the list; it stays queued
    # while the worker is stopped, then runs, and leaves the list when it has finished.
    os.kill(farm.worker.proc.pid, signal.SIGSTOP)
    try:
        job = mine.start_report("top-customers", {**ALL_DATES, "top": 5, "region": ""})["job"]
        item = page.locator(f"li[data-job-id='{job}']")
        expect(item).to_be_visible(timeout=30_000)
        expect(item.locator(".job-progress .state")).to_have_text("queued")
    finally:
        os.kill(farm.worker.proc.pid, signal.SIGCONT)
    mine.wait_until(job, lambda p: p["state"] == "succeeded", timeout=120, what="the job")
    expect(item).to_have_count(0, timeout=30_000)
    assert page.evaluate("window.notReloaded") is True
    page.get_by_role("link", name="Finished").click()
    expect(page.locator(f"li[data-job-id='{job}'] .job-progress.state-succeeded")).to_be_visible()
