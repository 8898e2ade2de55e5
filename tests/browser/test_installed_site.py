"""From outside: the project docs/install.md makes, from `django-admin
startproject` on, with the apps from the wheel and PyPI's `progress` beside
them (tests/harness/installed.py follows the page's code blocks), run as the
page runs it: memcached, a Celery worker, beat and two gunicorn nodes. In
Chromium a user starts the page's task from its view and watches its bar
move to the end on the library's task page, cancels a second one, and the
results are read on the other node; then staff open the wheel's dashboard
and see that farm's counters, queues, workers and the site log beat
drained."""

import pytest
import requests
from playwright.sync_api import Page, sync_playwright

from tests.harness import installed, processes
from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS, SHOTS, until

pytestmark = [pytest.mark.farm, pytest.mark.browser]

PASSWORD = "pw-for-ann-1234"
# The fill is drawn with a transition: whether it has reached the bar's end.
FILLED = """() => {
  const bar = document.querySelector(".job-progress .bar");
  return bar.querySelector(".fill").getBoundingClientRect().width >= bar.getBoundingClientRect().width - 1;
}"""


def _field(page: Page, name: str) -> str:
    return page.locator(f".job-progress [data-field={name}]").inner_text().strip()


def _start(page: Page, node: str, steps: int) -> str:
    page.goto(f"{node}/")
    page.fill("input[name=steps]", str(steps))
    page.click("text=Crunch")
    page.wait_for_url("**/tasks/*/")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def _create_user(site: installed.Site, name: str, password: str, *, superuser: bool = False) -> None:
    make = "create_superuser" if superuser else "create_user"
    installed.manage(
        site,
        "shell",
        "-c",
        f"from django.contrib.auth.models import User; User.objects.{make}({name!r}, password={password!r})",
    )


def test_a_project_of_its_own_runs_tasks_with_live_bars_cancel_and_results_anywhere(tmp_path):
    (tmp_path / "wheel").mkdir()
    wheel = installed.build_wheel(tmp_path / "wheel")
    memcached_port = processes.free_port()
    site = installed.make_site(wheel, tmp_path, memcached=f"127.0.0.1:{memcached_port}")
    _create_user(site, "ann", PASSWORD)
    with processes.stopped_after() as started:
        nodes = installed.start_farm(site, memcached_port, tmp_path, started)
        assert len(nodes) == 2
        for node in nodes:
            processes.wait_for(
                lambda n=node: requests.get(f"{n}/accounts/login/", timeout=2).ok,
                timeout=60,
                what=f"{node} to answer",
            )
        worker = next(p for p in started if "worker" in p.name)
        processes.wait_for(lambda: " ready." in worker.log(), timeout=60, what="the project's worker")

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{nodes[0]}/accounts/login/")
            page.fill("#id_username", "ann")
            page.fill("#id_password", PASSWORD)
            page.click("text=Log in")
            page.wait_for_url(f"{nodes[0]}/")

            # One runs to the end: the bar moves through the middle, then says so.
            first = _start(page, nodes[0], 30)
            seen: set[str] = set()

            def ended() -> bool:
                seen.add(_field(page, "percent"))
                return _field(page, "state") == "succeeded"

            until(page, ended, timeout=60, what="the first task's bar to reach the end")
            middle = [p for p in seen if p.endswith("%") and 0 < int(p.split()[0]) < 100]
            assert middle, f"the bar never showed a value between the ends: {seen}"
            until(page, lambda: page.evaluate(FILLED), timeout=5, what="the bar's fill to reach the end")
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "installed-site-task.png"), full_page=True)

            # A second one is cancelled from its bar while it runs.
            second = _start(page, nodes[0], 400)
            until(page, lambda: _field(page, "state") == "running", timeout=60, what="the second task to run")
            page.click(".job-progress form.cancel button")
            until(page, lambda: _field(page, "state") == "cancelled", timeout=60, what="the cancel to land")

            # Both results, read on the other node with the same session.
            session = requests.Session()
            for cookie in page.context.cookies():
                session.cookies.set(cookie["name"], cookie["value"])
            browser.close()
        done = session.get(f"{nodes[1]}/tasks/{first}/result/", timeout=10).json()
        assert {k: done[k] for k in ("status", "return_value", "metadata", "errors", "attempts")} == {
            "status": "SUCCESSFUL",
            "return_value": {"crunched": 30},
            "metadata": {"done": 30},
            "errors": [],
            "attempts": 1,
        }
        assert done["task"] == "shop.tasks.crunch"
        cancelled = session.get(f"{nodes[1]}/tasks/{second}/result/", timeout=10).json()
        assert cancelled["status"] == "FAILED" and cancelled["errors"] == [
            "webfarm.progress.exceptions.JobCancelled"
        ]
        assert 0 < cancelled["metadata"]["done"] < 400
        # The session URL too (the poll gate's session lane, once the user is cached).
        for _ in range(3):
            polled = session.get(f"{nodes[1]}/progress/{first}/", timeout=10)
            assert polled.status_code == 200 and polled.json()["state"] == "succeeded"
            assert polled.headers["Vary"] == "Cookie"
        _staff_see_their_own_farm(site, nodes[1])
        # The broker's tools work on the project's own settings (Celery's
        # default queue, the broker URL without transport options).
        assert installed.manage(site, "dead_letters", "celery").startswith("0 dead letters of ")
        # Another user of the site cannot read ann's result.
        _create_user(site, "bo", "pw-for-bo-5678")
        other = requests.Session()
        login = other.get(f"{nodes[1]}/accounts/login/", timeout=10)
        token = login.cookies["csrftoken"]
        other.post(
            f"{nodes[1]}/accounts/login/",
            data={"username": "bo", "password": "pw-for-bo-5678", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{nodes[1]}/accounts/login/"},
            timeout=10,
        )
        assert other.get(f"{nodes[1]}/tasks/{first}/result/", timeout=10).status_code == 404
        assert other.get(f"{nodes[1]}/tasks/{first}/", timeout=10).status_code == 404
        assert other.get(f"{nodes[1]}/progress/{first}/", timeout=10).status_code == 404


def _staff_see_their_own_farm(site: installed.Site, node: str) -> None:
    """The dashboard, from the wheel, in the admin every project has; the
    site log in it is what the page's beat drained (every 5 s)."""
    _create_user(site, "root", PASSWORD, superuser=True)
    processes.wait_for(
        lambda: "POST / 302" in (site.dir / "activity.log").read_text(),
        timeout=30,
        what="beat to drain the site log into the page's activity.log",
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{node}/admin/login/?next=/admin/dashboard/")
        page.fill("#id_username", "root")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        page.wait_for_url(f"{node}/admin/dashboard/")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "installed-site-dashboard.png"), full_page=True)
        assert page.locator("#site-name").inner_text().strip() == "Django administration"
        worker = page.locator("tr[data-worker]")
        assert worker.count() == 1 and worker.locator(".state").inner_text() == "up"

        def tasks_done() -> int:
            # As of the worker's last heartbeat, which may predate ann's tasks.
            page.reload()
            return int(page.locator("tr[data-worker] td").nth(4).inner_text())

        processes.wait_for(
            lambda: tasks_done() >= 2, timeout=90, interval=2, what="the heartbeat to count both tasks"
        )
        page.screenshot(path=str(SHOTS / "installed-site-dashboard.png"), full_page=True)
        # Celery's queue, read on the broker's ring: both tasks went in and out.
        celery = page.locator('tr[data-queue="broker:celery"] td')
        assert int(celery.nth(2).inner_text()) >= 2 and int(celery.nth(3).inner_text()) >= 2
        page.locator("#counters-heading ~ details summary").click()
        counters = page.locator("#counters-heading ~ details").inner_text()
        assert "requests_polled|area=progress|status=200" in counters
        activity = page.locator("table.activity").inner_text()
        assert "POST / 302" in activity
        browser.close()
