"""memcached is shared and unauthenticated: what anyone who can reach it
writes never runs code on the farm, and never gets a user anything but
their own jobs.

On a real farm (web node, worker, beat), every key memcached holds, and one
of each key family that is not there at that moment, is overwritten with a
pickle that would run a shell command; then every page, endpoint and
periodic task that reads memcached runs. Nothing runs the command, every
answer is a normal one, and the farm goes on working.
"""

import os
import pickle
import re
import time
import uuid

import pytest
import requests

from tests.harness import keyspace, processes
from tests.harness.processes import wait_for
from tests.harness.web import WebClient

pytestmark = pytest.mark.farm

NAMESPACE = "trust"
TOKEN = "trust-api-token"
ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31", "top": "5", "region": ""}
# Checked families whose planted values nothing in this test reads: a cancel flag is read by a
# job that runs (tests/unit/test_services.py plants one), counters and worker heartbeats only through
# their registries, which are planted too here (refused as "list"), a process's liveness only for a
# job gone silent (tests/unit/test_reaper.py plants one).
NOT_READ_HERE = {"cancel", "counter", "workers", "alive"}
# The address whose password resets are counted under a planted key.
RESET_EMAIL = "nobody@example.com"


class RunsCode:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_a_pickle_planted_under_every_key_runs_nothing(tmp_path):
    canary = tmp_path / f"ran-{uuid.uuid4().hex}"
    payload = pickle.dumps(RunsCode(str(canary)))
    with processes.stopped_after() as started:
        mc, address = processes.memcached(tmp_path, extra=["-M"])
        started.append(mc)
        env = processes.one_memcached_env(
            tmp_path,
            address,
            NAMESPACE,
            DEMO_ORDERS=2000,
            ACTIVITY_DRAIN_EVERY=1,
            POLLS_FLUSH_EVERY=0.5,
            STATS_HARVEST_EVERY=2,
            REAP_EVERY=1,
            QUEUE_API_TOKEN=TOKEN,
            STATS_API_TOKEN=TOKEN,
            DASHBOARD_WORKER_HEARTBEAT=1,
            # A planted slot holds one of alice's until it lapses (a refusal, by design).
            REPORTS_PER_USER=4,
        )
        processes.migrated_and_seeded(env)
        worker = processes.celery_worker(env, tmp_path, "trust-worker")
        started.append(worker)
        started.append(processes.celery_beat(env, tmp_path, "trust-beat"))
        web, base = processes.gunicorn(env, tmp_path, "trust-node")
        started.append(web)

        # Everything that writes memcached, once.
        alice, admin = WebClient(base).login("alice"), WebClient(base).login("admin")
        started_job = alice.start_report("top-customers", ALL_DATES)
        job, public = started_job["job"], started_job["public_progress_url"]
        alice.wait_until(job, lambda p: p["final"], timeout=60, what="the job")
        poll = processes.manage(
            env,
            "shell",
            "-c",
            "from demofarm.polls.models import Poll; p = Poll.objects.create(question='Q?'); "
            "p.choices.create(text='a'); print(p.id, p.choices.get().id)",
        ).split()
        poll_id, choice = poll[-2], poll[-1]
        voter = requests.Session()
        voter.get(f"{base}/polls/{poll_id}/", timeout=10)
        headers = {"X-CSRFToken": voter.cookies["csrftoken"]}
        assert voter.post(f"{base}/polls/{poll_id}/vote/", {"choice": choice}, headers=headers, timeout=10).ok
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        requests.post(f"{base}/queues/inbox/", data=b"hello", headers=bearer, timeout=10)
        admin.get("/admin/dashboard/")
        alice_id = processes.manage(
            env,
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            "print(get_user_model().objects.get(username='alice').pk)",
        ).split()[-1]

        from webfarm.limits.windows import digest

        # Overwrite every key there is, and plant one of each family that is not there now
        # (claims on the site log's next entries, among them).
        keys = {item.key for item in keyspace.items(address, f"{NAMESPACE}:")}
        sitelog = [k for k in keys if k.endswith(":q:sitelog:gen")]
        gen = _raw_get(address, sitelog[0]).decode()
        tail = int(_raw_get(address, f"{NAMESPACE}:q:sitelog:{gen}:tail"))
        keys |= {f"{NAMESPACE}:q:sitelog:{gen}:c:{i}" for i in range(tail + 1, tail + 20)}
        keys |= {
            f"{NAMESPACE}:{key}"
            for key in (
                f"cancel:{job}",
                f"reap:missing:{job}",
                f"parts:{job}:left",
                f"slot:reports-user:{alice_id}:0",
                "slot:reports-kind:top-customers:0",
                "sitelog:recent",
                "workers:registry",
                "workers:0123456789abcdef",
                f"login-fail:user:{'0' * 24}",
                f"reset:email:{digest(RESET_EMAIL)}",
                # The running totals exist only once the flusher has built them.
                f"poll:{poll_id}:built",
                f"poll:{poll_id}:0badc0de:c:{choice}",
            )
        }
        from demofarm.keyspace import FAMILIES, family_of

        planted = {family_of(key.removeprefix(f"{NAMESPACE}:")) for key in keys}
        missing = {f.name for f in FAMILIES} - {f.name for f in planted if f is not None}
        # Only families this farm does not use here: locks held a moment, mirrors, idle HTTP queues.
        assert missing <= {
            "get_or_set lock",
            "site log drainer lock",
            "vote flusher lock",
            "mirror state",
            "HTTP queue in use",
        }, missing
        for key in keys:
            keyspace.plant(address, key, payload, flags=1)
        # Once the farm has started its queues over, their generation keys are planted again:
        # the processes that read them before must not go deaf to those that read them after.
        gen_keys = sorted(key for key in keys if re.fullmatch(rf"{NAMESPACE}:(broker:)?q:[^:]+:gen", key))
        # Celery's queue, on the broker's ring (its namespace of its own).
        broker = f"{NAMESPACE}:broker:q:{NAMESPACE}:gen"
        assert broker in gen_keys
        wait_for(
            lambda: re.fullmatch(rb"[0-9a-f]{8}", _raw_get(address, broker) or b""),
            timeout=10,
            what="the broker's queue started over",
        )
        for key in gen_keys:
            keyspace.plant(address, key, payload, flags=1)

        # Every reader: pages, endpoints, and the periodic tasks (beat runs them every second or two).
        answers = {
            "progress": alice.get(f"/progress/{job}/"),
            "token progress": requests.get(base + public, timeout=10),
            "job page": alice.get(f"/jobs/{job}/"),
            "my jobs": alice.get("/jobs/"),
            "reports": alice.get("/"),
            "start": alice.post("/reports/top-customers/", ALL_DATES, allow_redirects=False),
            "poll": voter.get(f"{base}/polls/{poll_id}/", timeout=10),
            "results": voter.get(f"{base}/polls/{poll_id}/results.json", timeout=10),
            "vote": requests.post(
                f"{base}/polls/{poll_id}/vote/",
                {"choice": choice},
                headers={"X-CSRFToken": "c" * 32, "Cookie": "csrftoken=" + "c" * 32},
                allow_redirects=False,
                timeout=10,
            ),
            "dashboard": admin.get("/admin/dashboard/"),
            "dashboard live": admin.get("/admin/dashboard/live/"),
            "chart": admin.get("/admin/dashboard/charts/jobs.png"),
            "metrics": requests.get(f"{base}/stats/metrics", headers=bearer, timeout=10),
            "queue": requests.get(f"{base}/queues/inbox/", headers=bearer, timeout=10),
            "login": requests.get(f"{base}/accounts/login/", timeout=10),
            "password reset": _reset(base, RESET_EMAIL),
        }
        for what, response in answers.items():
            assert response.status_code in (200, 204, 302, 404), (what, response.status_code)
        # Still alice, from the database: the planted session was refused, not believed.
        assert "alice" in answers["reports"].text
        time.sleep(5)  # a few rounds of every periodic task over the planted values
        assert not canary.exists()
        assert worker.alive() and "Unpickl" not in worker.log() and "pickle" not in web.log().lower()

        # And the farm works on: a new job runs to the end; the refusals were counted.
        again = alice.start_report("top-customers", ALL_DATES)["job"]
        assert alice.wait_until(again, lambda p: p["final"], timeout=60)["state"] == "succeeded"
        metrics = requests.get(f"{base}/stats/metrics", headers=bearer, timeout=10).text
        assert "webfarm_memcached_refused_total" in metrics
        # Each family says what a writer can do with it; the checked ones were refused as they
        # say (the counts of a refusal reach memcached from each process a moment later).
        assert all(family.writer for family in FAMILIES)
        checked = {family.refused_as for family in planted if family is not None and family.refused_as}

        def unrefused() -> set[str]:
            metrics = requests.get(f"{base}/stats/metrics", headers=bearer, timeout=10).text
            refused = set(re.findall(r'webfarm_memcached_refused_total\{family="([a-z_]+)"', metrics))
            return checked - refused - NOT_READ_HERE

        try:
            wait_for(
                lambda: not unrefused(), timeout=30, interval=1, what="a refusal of every checked family"
            )
        except TimeoutError:
            raise AssertionError(f"never refused: {sorted(unrefused())}") from None
        wait_for(lambda: not canary.exists(), timeout=1, what="nothing ran")


def _reset(base: str, email: str) -> requests.Response:
    """A password reset asked for, as a browser asks (the form's CSRF token)."""
    browser = requests.Session()
    browser.get(f"{base}/accounts/password_reset/", timeout=10).raise_for_status()
    return browser.post(
        f"{base}/accounts/password_reset/",
        {"email": email, "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        allow_redirects=False,
        timeout=10,
    )


def _raw_get(address: str, key: str) -> bytes:
    with keyspace.raw_client(address) as client:
        return client.get(key)
