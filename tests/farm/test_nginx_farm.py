"""The farm behind nginx (deploy/nginx): two gunicorn nodes, two Celery
workers, two memcached servers, PostgreSQL, Redis as the broker. Jobs are
started and followed through the balancer; progress polls take the fast path
(memcached_pass) with the job's read token; a wrong token never sees
progress; a web node and a memcached server die mid-run."""

import json
import os
import secrets
import signal
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from pymemcache.client.base import Client

from tests.harness import processes
from tests.harness.chromium import until
from tests.harness.processes import wait_for
from tests.harness.web import DEMO_PASSWORD, WebClient
from webfarm.core.client import build_client
from webfarm.progress.store import public_key

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
JSON = {"Accept": "application/json"}
FAST = "X-Progress-Source"
# What Django's SecurityMiddleware and XFrameOptionsMiddleware add to a poll's answer.
SECURITY_HEADERS = (
    "X-Content-Type-Options",
    "X-Frame-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
)


@dataclass
class NginxFarm:
    dir: Path
    env: dict
    url: str  # nginx
    nodes: dict[str, processes.Process]
    node_ports: dict[str, int]
    memcached: list[processes.Process]
    memcached_ports: list[int]
    started: list = field(default_factory=list)

    def client(self, username: str) -> WebClient:
        return WebClient(self.url).login(username, DEMO_PASSWORD)


@pytest.fixture(scope="module")
def nginx_farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NginxFarm]:
    base = tmp_path_factory.mktemp("nginx-farm")
    with processes.postgres_database("webfarm_nginx") as database_url, processes.stopped_after() as started:
        servers = [processes.memcached(base) for _ in range(2)]
        started += [process for process, _ in servers]
        addresses = [address for _, address in servers]
        broker, broker_url = processes.redis(base)
        started.append(broker)
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "MEMCACHED_SERVERS": ",".join(addresses),
            "QUEUES_MIRRORS": ",".join(addresses),
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_DEFAULT_QUEUE": "nginxfarm",
            "MEMCACHED_NAMESPACE": "nginxfarm",
            "DJANGO_SECRET_KEY": "nginx-farm-" + uuid.uuid4().hex,
            "DEMO_PASSWORD": DEMO_PASSWORD,
            "DEMO_ORDERS": "30000",
            "REPORTS_CHUNK_ROWS": "100",
            "PROGRESS_HEARTBEAT_INTERVAL": "2",
            "TRUSTED_PROXIES": "127.0.0.1",
            "REPORTS_PER_USER": "10",
            "REPORTS_PER_KIND": "50",
        }
        processes.migrated_and_seeded(env)
        for name in ("worker-1", "worker-2"):
            started.append(processes.celery_worker(env, base, name, concurrency=1))
        nodes, ports, urls = {}, {}, []
        for name in ("node-a", "node-b"):
            node, url = processes.gunicorn(env, base, name)
            started.append(node)
            nodes[name], ports[name] = node, int(url.rsplit(":", 1)[1])
            urls.append(url)
        balancer, url = processes.nginx(base, web=urls, memcached=addresses, namespace="nginxfarm")
        started.append(balancer)
        yield NginxFarm(
            dir=base,
            env=env,
            url=url,
            nodes=nodes,
            node_ports=ports,
            memcached=[process for process, _ in servers],
            memcached_ports=[int(a.rsplit(":", 1)[1]) for a in addresses],
            started=started,
        )


def _start(client: WebClient, kind: str = "sales-by-region", params: dict | None = None) -> dict:
    response = client.post(f"/reports/{kind}/", params or ALL_DATES, headers=JSON)
    assert response.status_code == 202, response.text
    return response.json()


class Poller(threading.Thread):
    """A browser's polls, through nginx, until the job ends: every answer kept."""

    def __init__(self, url: str, session: requests.Session | None = None) -> None:
        super().__init__(daemon=True)
        self.url, self.session = url, session or requests.Session()
        self.answers: list[tuple[int, bool, dict]] = []  # status, fast path, document
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.1):
            try:
                response = self.session.get(self.url, timeout=10)
            except requests.RequestException as error:  # kept: the test's assertions show it
                self.answers.append((0, False, {"error": repr(error)}))
                continue
            body = (
                response.json()
                if response.headers.get("Content-Type", "").startswith("application/json")
                else {}
            )
            self.answers.append((response.status_code, response.headers.get(FAST) == "memcached", body))
            if body.get("final"):
                self.done.set()

    def final(self, timeout: float) -> dict:
        ended = self.done.wait(timeout)
        self.done.set()  # a poller that saw no end stops with the test
        assert ended, f"no final state in {timeout} s: {self.answers[-3:]}"
        self.join(5)
        return self.answers[-1][2]


def test_a_job_started_and_followed_through_the_balancer_takes_the_fast_path(nginx_farm):
    alice = nginx_farm.client("alice")
    started = _start(alice, "top-customers", {**ALL_DATES, "top": 10})
    job, fast_url = started["job"], started["public_progress_url"]
    assert fast_url.startswith(f"/progress/{job}/") and len(fast_url.split("/")) == 5

    poller = Poller(nginx_farm.url + fast_url, requests.Session())  # no session: the token is enough
    poller.start()
    final = poller.final(timeout=120)
    assert final["state"] == "succeeded" and final["percent"] == 100
    statuses = Counter(status for status, _, _ in poller.answers)
    assert statuses == {200: len(poller.answers)}, statuses
    fast = sum(1 for _, is_fast, _ in poller.answers if is_fast)
    assert fast >= len(poller.answers) - 2, (fast, len(poller.answers))  # all but a first miss or two
    # The fast path's document is the session endpoint's, with its seal (a MAC only the farm can check).
    through_django = alice.get(f"/progress/{job}/")
    assert len(final.pop("seal")) == 32
    assert FAST not in through_django.headers and through_django.json() == final
    # Gone from memcached (it expired, or the server restarted): Django answers the
    # miss nginx marks, and puts the document back for the next poll.
    processes.manage(
        nginx_farm.env,
        "shell",
        "-c",
        "from webfarm.core.client import get_client; from webfarm.progress import store; "
        f"get_client().delete(store.public_key({job!r}, {fast_url.split('/')[3]!r}))",
    )
    missed, again = (requests.get(nginx_farm.url + fast_url, timeout=10) for _ in range(2))
    assert (FAST in missed.headers, FAST in again.headers) == (False, True)
    served_again = again.json()
    assert served_again.pop("seal") and missed.json() == served_again == final
    download = alice.get(final["result_url"])
    assert download.status_code == 200 and download.content.startswith(b"rank,")
    # Round robin: both nodes answered this user.
    for node in nginx_farm.nodes.values():
        assert (
            "POST /reports/top-customers/" in node.log()
            or "GET /jobs/" in node.log()
            or "GET /" in node.log()
        )


def test_a_wrong_token_never_sees_progress(nginx_farm):
    alice = nginx_farm.client("alice")
    mine = _start(alice, "return-rates", {**ALL_DATES, "min_units": 1})
    other = _start(alice, "return-rates", {**ALL_DATES, "min_units": 1})
    job, token = mine["public_progress_url"].split("/")[2:4]
    other_token = other["public_progress_url"].split("/")[3]
    right = requests.get(f"{nginx_farm.url}/progress/{job}/{token}/", timeout=10)
    assert right.status_code == 200 and right.json()["job"] == job
    wrong_tokens = [
        secrets.token_urlsafe(16),
        other_token,
        job,
        token[:-1] + ("x" if token[-1] != "x" else "y"),
    ]
    for wrong in wrong_tokens:
        refused = requests.get(f"{nginx_farm.url}/progress/{job}/{wrong}/", timeout=10)
        assert refused.status_code == 404 and refused.json() == {"error": "No such job."}, wrong
        assert FAST not in refused.headers
    for path in (f"/progress/{job}/{token}x/", f"/progress/{job}/{token[:10]}/", f"/progress/{job}/"):
        response = requests.get(nginx_farm.url + path, timeout=10)
        assert response.status_code in (401, 404) and "job" not in response.json(), path
    # Not a GET: Django answers (the fast path serves reads only).
    assert requests.post(f"{nginx_farm.url}/progress/{job}/{token}/", timeout=10).status_code in (403, 405)
    for started in (mine, other):
        alice.post(f"/progress/{started['job']}/cancel/", headers=JSON)


def test_a_web_node_killed_mid_run_goes_unnoticed(nginx_farm):
    bob = nginx_farm.client("bob")
    started = _start(bob)
    fast = Poller(nginx_farm.url + started["public_progress_url"])
    slow = Poller(f"{nginx_farm.url}/progress/{started['job']}/", bob.session)  # Django on every poll
    fast.start()
    slow.start()
    processes.wait_for(lambda: len(slow.answers) > 5, timeout=30, what="polls before the kill")
    node = nginx_farm.nodes["node-a"]
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait(10)
    for poller in (fast, slow):
        assert poller.final(timeout=180)["state"] == "succeeded"
        statuses = Counter(status for status, _, _ in poller.answers)
        assert statuses == {200: len(poller.answers)}, statuses  # nginx retried each on node B
    # Pages and starts keep working on the survivor.
    assert bob.get("/jobs/").status_code == 200
    again = _start(bob, "return-rates", {**ALL_DATES, "min_units": 1})
    bob.post(f"/progress/{again['job']}/cancel/", headers=JSON)
    revived, _ = processes.gunicorn(
        nginx_farm.env, nginx_farm.dir, "node-a-again", port=nginx_farm.node_ports["node-a"]
    )
    nginx_farm.started.append(revived)
    nginx_farm.nodes["node-a"] = revived


def test_a_memcached_server_killed_mid_run(nginx_farm):
    bob = nginx_farm.client("bob")
    jobs = [_start(bob, "return-rates", {**ALL_DATES, "min_units": 1}) for _ in range(4)]
    pollers = [Poller(nginx_farm.url + job["public_progress_url"]) for job in jobs]
    for poller in pollers:
        poller.start()
    processes.wait_for(lambda: all(len(p.answers) > 2 for p in pollers), timeout=30, what="polls")
    dead = nginx_farm.memcached[1]
    dead.stop(signal.SIGKILL)
    for poller in pollers:
        poller.final(timeout=180)
    for poller, job in zip(pollers, jobs, strict=True):
        for status, _, body in poller.answers:
            # A job whose record was on the dead server: 503 with a retry time, never a 5xx else.
            assert status == 200 or (status == 503 and "temporarily unavailable" in body["error"]), status
        page = bob.get(f"/jobs/{job['job']}/")
        assert page.status_code == 200
    assert Counter(p.answers[-1][2]["state"] for p in pollers) == {"succeeded": 4}
    revived, _ = processes.memcached(nginx_farm.dir, port=nginx_farm.memcached_ports[1])
    nginx_farm.started.append(revived)
    nginx_farm.memcached[1] = revived


def test_nginx_asks_the_server_that_holds_the_document_first(tmp_path):
    """The web nodes and nginx agree on where each progress document lives
    (webfarm.core.client.FarmHash and nginx's `hash $memcached_key`), so a
    fast-path poll is one round trip: no server ever answers a miss."""
    with processes.stopped_after() as started:
        servers = [processes.memcached(tmp_path) for _ in range(3)]
        started += [process for process, _ in servers]
        addresses = [address for _, address in servers]
        dead_web = f"http://127.0.0.1:{processes.free_port()}"  # a miss would show as a 502 from here
        balancer, url = processes.nginx(tmp_path, web=[dead_web], memcached=addresses, namespace="hashcheck")
        started.append(balancer)
        client = build_client(addresses, "hashcheck")
        documents = {}
        for n in range(300):
            job, token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
            documents[f"/progress/{job}/{token}/"] = {"job": job, "n": n}
            assert client.set(public_key(job, token), json.dumps({"job": job, "n": n}).encode())
        client.close()
        with requests.Session() as session:
            for path, document in documents.items():
                response = session.get(url + path, timeout=5)
                assert response.status_code == 200 and response.headers.get(FAST) == "memcached", path
                assert response.json() == document
        stats = [_raw_stats(address) for address in addresses]
        assert [s[b"get_misses"] for s in stats] == [0, 0, 0]
        hits = [s[b"get_hits"] for s in stats]
        assert sum(hits) == len(documents) and min(hits) > 50, hits  # spread over all three


@pytest.mark.browser
def test_a_planted_document_served_by_nginx_scripts_no_page(nginx_farm):
    """nginx serves the public document as memcached holds it: one planted
    there with a javascript: download link, a foreign retried_as and markup
    in its text reaches the browser, and the bar shows its text as text and
    no link that leaves this site (to the job's owner and to staff)."""
    from playwright.sync_api import sync_playwright

    from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS

    alice = nginx_farm.client("alice")
    client = build_client(nginx_farm.env["MEMCACHED_SERVERS"].split(","), "nginxfarm")
    with _HeldWorkers(nginx_farm):  # the job stays queued and its page keeps polling
        started = _start(alice)
        job, token = started["job"], started["public_progress_url"].strip("/").split("/")[-1]
        planted = alice.get(f"/progress/{job}/", headers=JSON).json()
        planted.update(
            state="running",
            percent=42,
            message="PLANTED <img src=x onerror=window.__pwned=1>",
            result_url="javascript:window.__pwned=1",
            retried_as="../../../accounts/logout",
        )
        _plant(nginx_farm, client, job, token, planted)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for username, path in (("alice", f"/jobs/{job}/"), ("admin", "/admin/dashboard/")):
                page = _logged_in_page(browser, nginx_farm, username)
                page.goto(path)
                bar = page.locator(f'[data-progress-url*="{job}"]')
                # The planted document was drawn: its text, as text.
                bar.locator("[data-field=message]").filter(has_text="PLANTED <img").wait_for(timeout=30_000)
                download = bar.locator("[data-field=download]")
                assert download.is_hidden(), username
                assert not (download.get_attribute("href") or "").startswith("javascript"), username
                download.dispatch_event("click")
                assert page.evaluate("window.__pwned") is None, username
                assert bar.get_attribute("data-progress-url") == f"/progress/{job}/{token}/", username
                assert page.locator("img[src=x]").count() == 0, username
                page.screenshot(path=str(nginx_farm.dir / f"planted-{username}.png"), full_page=True)
                page.context.close()
            browser.close()
    client.close()
    assert alice.post(f"/progress/{job}/cancel/", headers=JSON).status_code == 202


class _HeldWorkers:
    """The farm's workers held still (SIGSTOP), so jobs stay queued and
    their pages keep polling; let go on the way out."""

    def __init__(self, farm: NginxFarm) -> None:
        self.workers = [p for p in farm.started if p.name.startswith("worker-")]

    def __enter__(self) -> "_HeldWorkers":
        for worker in self.workers:
            os.killpg(worker.proc.pid, signal.SIGSTOP)
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:
            os.killpg(worker.proc.pid, signal.SIGCONT)


def _plant(farm: NginxFarm, client, job: str, token: str, document: dict) -> None:
    """Write `document` as the job's published one, as anyone who can reach
    memcached could, until nginx serves it."""

    def served_by_nginx() -> bool:
        assert client.set(public_key(job, token), json.dumps(document).encode())
        served = requests.get(f"{farm.url}/progress/{job}/{token}/", timeout=10)
        return served.headers.get(FAST) == "memcached" and served.json()["state"] == document["state"]

    wait_for(served_by_nginx, timeout=30, interval=0.5, what="nginx serving the planted document")


def _logged_in_page(browser, farm: NginxFarm, username: str):
    context = browser.new_context(base_url=farm.url)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.get_by_role("button", name="Log in").click()
    answer = posted.value
    # Django answers a good login with a redirect; anything else is the finding.
    assert answer.status == 302, (answer.status, answer.headers, page.content()[:2000])
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page


@pytest.mark.browser
def test_a_planted_retry_points_no_button_at_another_job(nginx_farm):
    """Two of alice's jobs, A and B, queued. A document planted at A's key
    says A was lost and runs again as B. On A's page (and on the staff
    dashboard) the bar asks Django, which says A is queued: the page stays
    A's, its Cancel still posts to A, and one click cancels A, not B."""
    from playwright.sync_api import sync_playwright

    from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS

    alice = nginx_farm.client("alice")
    client = build_client(nginx_farm.env["MEMCACHED_SERVERS"].split(","), "nginxfarm")
    with _HeldWorkers(nginx_farm):
        a, b = _start(alice), _start(alice)
        job_a, token_a = a["job"], a["public_progress_url"].strip("/").split("/")[-1]
        planted = {**alice.get(f"/progress/{job_a}/", headers=JSON).json(), "state": "lost"}
        planted.update(final=True, retried_as=b["job"], error="PLANTED lost", attempt=2)
        _plant(nginx_farm, client, job_a, token_a, planted)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for username, path in (("admin", "/admin/dashboard/"), ("alice", f"/jobs/{job_a}/")):
                page = _logged_in_page(browser, nginx_farm, username)

                # The planted end sends the bar to Django, whose answer it shows.
                # Asked from this page: the page the login lands on shows A's
                # bar too, and its answer is gone once the browser moves on.
                def from_this_page(r, j=job_a, page_url=nginx_farm.url + path):
                    return r.url.endswith(f"/progress/{j}/") and r.request.headers.get("referer") == page_url

                with page.expect_response(from_this_page) as asked:
                    page.goto(path)
                assert asked.value.json()["state"] == "queued", username
                bar = page.locator(f'[data-progress-url*="{job_a}"]')
                bar.locator("[data-field=state]").filter(has_text="queued").wait_for(timeout=10_000)
                assert page.url == nginx_farm.url + path, username
                cancel = bar.locator("form.cancel")
                assert cancel.get_attribute("action") == f"/progress/{job_a}/cancel/", username
                assert cancel.is_visible(), username
                page.screenshot(path=str(nginx_farm.dir / f"planted-retry-{username}.png"), full_page=True)
                if username == "alice":
                    with page.expect_response(lambda r: r.request.method == "POST") as cancelled:
                        cancel.get_by_role("button", name="Cancel").click()
                    assert cancelled.value.url.endswith(f"/progress/{job_a}/cancel/")
                page.context.close()
            browser.close()
        assert alice.get(f"/progress/{job_a}/").json()["state"] == "cancelled"
        after_b = alice.get(f"/progress/{b['job']}/").json()
        assert after_b["state"] == "queued" and not after_b["cancel_requested"]
    client.close()
    assert alice.post(f"/progress/{b['job']}/cancel/", headers=JSON).status_code == 202


@pytest.mark.browser
def test_a_planted_success_does_not_reload_the_page_again_and_again(nginx_farm):
    """A job's page reloads when the job succeeds (to show its files). A
    "succeeded" document planted for a queued job is asked of Django once;
    the page is not reloaded, and the bar polls Django from then on."""
    from playwright.sync_api import sync_playwright

    from tests.harness.chromium import CHROMIUM, CHROMIUM_ARGS

    alice = nginx_farm.client("alice")
    client = build_client(nginx_farm.env["MEMCACHED_SERVERS"].split(","), "nginxfarm")
    with _HeldWorkers(nginx_farm):
        started = _start(alice)
        job, token = started["job"], started["public_progress_url"].strip("/").split("/")[-1]
        planted = {**alice.get(f"/progress/{job}/", headers=JSON).json(), "state": "succeeded"}
        planted.update(final=True, percent=100, message="PLANTED success")
        _plant(nginx_farm, client, job, token, planted)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = _logged_in_page(browser, nginx_farm, "alice")
            loads = []
            page.on("load", lambda _: loads.append(1))
            checked = []
            here = f"{nginx_farm.url}/jobs/{job}/"  # not the bar on the page the login landed on
            page.on(
                "response",
                lambda r: (
                    r.url.endswith(f"/progress/{job}/")
                    and r.request.headers.get("referer") == here
                    and checked.append(r.status)
                ),
            )
            page.goto(here)
            assert page.locator("[data-reload-on-success]").count() == 1
            # Three of Django's answers: the check, then two polls of the bar's own.
            until(page, lambda: len(checked) >= 3, timeout=30, what="the bar polling Django")
            assert loads == [1] and set(checked) <= {200, 304}
            bar = page.locator(f'[data-progress-url*="{job}"]')
            assert bar.locator("[data-field=state]").inner_text() == "queued"
            browser.close()
    client.close()
    assert alice.post(f"/progress/{job}/cancel/", headers=JSON).status_code == 202


def test_the_fast_path_sends_the_headers_django_sends(nginx_farm):
    """nginx's answer from memcached carries the security headers Django's
    answer to the same poll carries."""
    alice = nginx_farm.client("alice")
    started = _start(alice, "return-rates", {**ALL_DATES, "min_units": 1})
    url = nginx_farm.url + started["public_progress_url"]
    fast = wait_for(
        lambda: (r := requests.get(url, timeout=10)).headers.get(FAST) == "memcached" and r,
        timeout=30,
        what="an answer from the fast path",
    )
    node = f"http://127.0.0.1:{nginx_farm.node_ports['node-b']}"
    slow = requests.get(node + started["public_progress_url"], timeout=10)  # a web node itself
    assert FAST not in slow.headers
    for header in SECURITY_HEADERS:
        assert slow.headers.get(header), header
        assert fast.headers.get(header) == slow.headers[header], header
    alice.post(f"/progress/{started['job']}/cancel/", headers=JSON)


def _raw_stats(address: str) -> dict:
    host, port = address.rsplit(":", 1)
    raw = Client((host, int(port)), connect_timeout=1, timeout=1)
    try:
        return raw.stats()
    finally:
        raw.close()


@contextmanager
def _balancer_with_a_document(
    tmp_path: Path, namespace: str, **nginx: object
) -> Iterator[tuple[str, str, str]]:
    """nginx in front of a web node that is down (a request handed to Django
    is a 502), reading one memcached that holds a published document: (the
    balancer's URL, the job, its token)."""
    job, token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    with processes.stopped_after() as started:
        mc, address = processes.memcached(tmp_path)
        started.append(mc)
        dead_web = f"http://127.0.0.1:{processes.free_port()}"
        balancer, url = processes.nginx(
            tmp_path, web=[dead_web], memcached=[address], namespace=namespace, **nginx
        )
        started.append(balancer)
        client = build_client([address], namespace)
        client.set(public_key(job, token), json.dumps({"job": job}).encode())
        client.close()
        yield url, job, token


def test_nginx_writes_no_token_in_its_access_log_whatever_the_url_form(tmp_path):
    """The attack: nginx's log format hid the token only in the canonical
    request line; the no-slash form, `/progress//<job>/<token>/` (which the
    fast path answers 200), `…/<token>;x/`, an escaped slash and an
    absolute-form request line wrote it out. Each is sent as a raw request
    line; the log has each request, and no token."""
    with _balancer_with_a_document(tmp_path, "logforms", access_log=True) as (url, job, token):
        port = int(url.rsplit(":", 1)[1])
        targets = [
            f"/progress/{job}/{token}",
            f"/progress//{job}/{token}/",
            f"//progress/{job}/{token}/",
            f"/progress/{job}/{token};x/",
            f"/progress/{job}/{token}/cancel/",
            f"/progress/{job}%2F{token}/",
            f"http://127.0.0.1:{port}/progress/{job}/{token}/",
            f"/?next=/progress/{job}/{token}/",
        ]
        statuses = []
        for target in targets:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                sock.sendall(
                    f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
                )
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
                statuses.append(int(reply.split(b" ", 2)[1]))
        assert statuses[1] == 200, statuses  # the merged slashes: answered from memcached
        log_file = tmp_path / f"nginx-{port}-access.log"
        log = processes.wait_for(
            lambda: (text := log_file.read_text()).count("\n") >= len(targets) and text,
            timeout=10,
            what="every request in nginx's log",
        )
    assert token not in log, log
    assert log.count("<token>") >= len(targets), log


def test_the_fast_path_answers_only_hosts_and_agents_django_serves(tmp_path):
    """The attack: a token poll with `Host: evil.example`, or from a user
    agent the site refuses, got 200 from memcached, where Django answers 400
    and 403. Such a poll now goes to Django (here a node that is down: 502),
    whichever host spelling or agent pattern; the others still take the fast
    path."""
    with _balancer_with_a_document(
        tmp_path,
        "served",
        hosts=("127.0.0.1", ".farm.example"),
        refused_agents=(("BadBot", False), (r"crawl(er)?\.v\d", True)),
    ) as (url, job, token):
        path = f"{url}/progress/{job}/{token}/"

        def source(**headers: str) -> tuple[int, str | None]:
            answer = requests.get(path, headers=headers, timeout=10)
            return answer.status_code, answer.headers.get(FAST)

        assert source() == (200, "memcached")
        assert source(Host="farm.example") == (200, "memcached")
        assert source(Host="nodes.FARM.example:8080") == (200, "memcached")
        for host in ("evil.example", "farm.example.evil", "127.0.0.2"):
            assert source(Host=host) == (502, None), host
        for agent in ("Mozilla/5.0 BadBot/2.1", "CRAWLER.V2 (+https://example)"):
            assert source(**{"User-Agent": agent}) == (502, None), agent
        assert source(**{"User-Agent": "Mozilla/5.0 badbot"}) == (200, "memcached")  # case counts there
