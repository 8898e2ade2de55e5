"""From outside: a `django-admin startproject` site that installs the apps
from the wheel, with PyPI's `progress` beside them (tests/harness/installed.py:
the steps of docs/install.md), runs a @task that reports progress on a real
Celery worker over memcached, behind two gunicorn nodes. In Chromium a user
enqueues the task from a view and watches its bar move to the end, cancels a
second one, and the results are read from the other node; then staff open
the wheel's dashboard and see that farm's counters, queues, workers and
site log."""

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
    page.fill("input[name=pause]", "0.1")
    page.click("text=Crunch")
    page.wait_for_url("**/watch/*/")
    return page.url.rstrip("/").rsplit("/", 1)[-1]


def test_a_project_of_its_own_runs_tasks_with_live_bars_cancel_and_results_anywhere(tmp_path):
    (tmp_path / "wheel").mkdir()
    wheel = installed.build_wheel(tmp_path / "wheel")
    with processes.stopped_after() as started:
        memcached, address = processes.memcached(tmp_path)
        started.append(memcached)
        site = installed.make_site(wheel, tmp_path)
        env = installed.site_env(tmp_path, address)
        installed.manage(site, env, "migrate", "--no-input")
        installed.manage(site, env, "collectstatic", "--no-input")
        installed.manage(
            site,
            env,
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            f"User.objects.create_user('ann', password={PASSWORD!r})",
        )
        worker = processes.Process(
            "site-worker",
            [str(processes.BIN / "celery"), "-A", "mysite", "worker", "-l", "info", "-c", "2"],
            log_dir=tmp_path,
            env=env,
            cwd=site,
        ).start()
        started.append(worker)
        nodes = []
        for name in ("site-a", "site-b"):
            port = processes.free_port()
            node = processes.Process(
                name,
                [str(processes.BIN / "gunicorn"), "mysite.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2"],
                log_dir=tmp_path,
                env=env,
                cwd=site,
            ).start()
            started.append(node)
            nodes.append(f"http://127.0.0.1:{port}")
        for node in nodes:
            processes.wait_for(
                lambda n=node: requests.get(f"{n}/accounts/login/", timeout=2).ok,
                timeout=60,
                what=f"{node} to answer",
            )
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
        done = session.get(f"{nodes[1]}/result/{first}/", timeout=10).json()
        assert done == {
            "status": "SUCCESSFUL",
            "value": {"crunched": 30},
            "metadata": {"done": 30},
            "errors": [],
        }
        cancelled = session.get(f"{nodes[1]}/result/{second}/", timeout=10).json()
        assert cancelled["status"] == "FAILED" and cancelled["errors"] == [
            "webfarm.progress.exceptions.JobCancelled"
        ]
        assert 0 < cancelled["metadata"]["done"] < 400
        # The session URL too (the poll gate's session lane, once the user is cached).
        for _ in range(3):
            polled = session.get(f"{nodes[1]}/progress/{first}/", timeout=10)
            assert polled.status_code == 200 and polled.json()["state"] == "succeeded"
            assert polled.headers["Vary"] == "Cookie"
        _staff_see_their_own_farm(site, env, nodes[1])
        # The broker's tools work on the project's own settings (Celery's
        # default queue, the broker URL without transport options).
        assert installed.manage(site, env, "dead_letters", "celery").startswith("0 dead letters of ")
        # Another user of the site cannot read ann's result.
        installed.manage(
            site,
            env,
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            "User.objects.create_user('bo', password='pw-for-bo-5678')",
        )
        other = requests.Session()
        login = other.get(f"{nodes[1]}/accounts/login/", timeout=10)
        token = login.cookies["csrftoken"]
        other.post(
            f"{nodes[1]}/accounts/login/",
            data={"username": "bo", "password": "pw-for-bo-5678", "csrfmiddlewaretoken": token},
            headers={"Referer": f"{nodes[1]}/accounts/login/"},
            timeout=10,
        )
        assert other.get(f"{nodes[1]}/result/{first}/", timeout=10).status_code == 404
        assert other.get(f"{nodes[1]}/progress/{first}/", timeout=10).status_code == 404


def _staff_see_their_own_farm(site, env: dict, node: str) -> None:
    """The dashboard, from the wheel, in the admin every project has."""
    installed.manage(
        site,
        env,
        "shell",
        "-c",
        "from django.contrib.auth.models import User; "
        f"User.objects.create_superuser('root', password={PASSWORD!r})",
    )
    # What beat would do every few seconds: the nodes' activity into the site log.
    installed.manage(site, env, "drain_sitelog")
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
        assert page.locator("tr[data-queue=celery]").count() == 1
        page.locator("#counters-heading ~ details summary").click()
        counters = page.locator("#counters-heading ~ details").inner_text()
        assert "requests_polled|area=progress|status=200" in counters
        activity = page.locator("table.activity").inner_text()
        assert "POST /start/ 302" in activity
        browser.close()
