"""Overload and failure on the real farm: floods of starts, memcached stopped
and started mid-job, a time limit, a web node's own limits."""

import concurrent.futures
import json

import pytest

from tests.harness import processes
from tests.harness.marks import one_broker
from tests.harness.web import WebClient, new_user

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
JSON = {"Accept": "application/json"}
PER_USER = 4  # REPORTS_PER_USER in the farm fixture


def _new_user(farm, username: str) -> WebClient:
    return new_user(farm.env, farm.node_a, username)


def _cancel_all(client: WebClient, jobs: list[str]) -> None:
    for job in jobs:
        client.post(f"/progress/{job}/cancel/", headers=JSON)
    for job in jobs:
        client.wait_until(job, lambda p: p["final"], timeout=60, what=f"job {job} to end")


def test_a_flood_of_starts_runs_only_the_limit_and_refuses_the_rest_at_once(farm):
    users = [_new_user(farm, f"flood-{farm.broker}") for _ in range(6)]  # six sessions, one user

    def start(i: int):
        client = users[i % len(users)]
        node = farm.node_a if i % 2 else farm.node_b
        return client.post("/reports/sales-by-region/", ALL_DATES, node=node, headers=JSON)

    with concurrent.futures.ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(start, range(30)))
    accepted = [a for a in answers if a.status_code == 202]
    refused = [a for a in answers if a.status_code == 503]
    others = [(a.status_code, a.text[:200]) for a in answers if a.status_code not in (202, 503)]
    assert len(accepted) == PER_USER and len(refused) == 30 - PER_USER, others
    for answer in refused:
        assert 1 <= int(answer.headers["Retry-After"]) <= 60
        assert "You already have 4 reports" in answer.json()["error"]

    # Nothing is left holding a slot: once the accepted jobs end, the user may start as many again.
    _cancel_all(users[0], [a.json()["job"] for a in accepted])
    again = [users[0].start_report("return-rates", {**ALL_DATES, "min_units": 1}) for _ in range(PER_USER)]
    _cancel_all(users[0], [a["job"] for a in again])


def test_memcached_stopped_mid_job_and_started_again(farm):
    bob = farm.client("bob")
    job = bob.start_report("sales-by-region", ALL_DATES)["job"]
    bob.wait_until(
        job, lambda p: p["state"] == "running" and p["percent"] > 5, timeout=60, what="job running"
    )
    port = int(farm.memcached_address.rsplit(":", 1)[1])
    farm.memcached.stop()
    try:
        for node in (farm.node_a, farm.node_b):
            poll = bob.get(f"/progress/{job}/", node=node)
            assert poll.status_code == 503 and int(poll.headers["Retry-After"]) > 0
            assert "temporarily unavailable" in poll.json()["error"]
            page = bob.get(f"/jobs/{job}/", node=node)
            assert page.status_code == 200 and "progress temporarily unavailable" in page.text
            assert bob.get("/jobs/", node=node).status_code == 200
        # Starting is refused clearly (the limits and the progress store are in memcached).
        start = bob.post("/reports/return-rates/", {**ALL_DATES, "min_units": 1}, headers=JSON)
        assert start.status_code == 503 and "unavailable" in start.json()["error"]
        assert int(start.headers["Retry-After"]) > 0
        # Logging in still works: sessions are written through to the database.
        WebClient(farm.node_b).login("alice")
    finally:
        restarted, _ = processes.memcached(farm.dir, port=port)
        farm.replace(farm.memcached, restarted)

    # The first polls after the restart are answered: connections memcached
    # closed are replaced, not passed on to the users as errors.
    for node in (farm.node_a, farm.node_b):
        assert bob.get(f"/progress/{job}/", node=node).status_code == 200
    final = bob.wait_until(job, lambda p: p["final"], timeout=240, what="the job to finish after the outage")
    assert final["state"] == "succeeded", final
    # The result is the same as an undisturbed run's.
    rerun = bob.start_report("sales-by-region", ALL_DATES)["job"]
    assert bob.wait_until(rerun, lambda p: p["final"], timeout=240)["state"] == "succeeded"
    first = bob.get(f"/jobs/{job}/files/sales-by-region.csv")
    second = bob.get(f"/jobs/{rerun}/files/sales-by-region.csv")
    assert first.status_code == 200 and first.content == second.content and first.content.count(b"\n") > 10


@one_broker
def test_a_job_over_its_time_limit_is_stopped_and_shown_failed(farm):
    # A third web node whose settings give sales-by-region a 1 s limit (it runs about 3 s here); the
    # limit travels with the task to the farm's worker.
    node, url = processes.gunicorn(
        {**farm.env, "REPORTS_TIME_LIMITS": "sales-by-region=1"}, farm.dir, "node-c"
    )
    try:
        alice = WebClient(url).login("alice")
        job = alice.start_report("sales-by-region", ALL_DATES)["job"]
        final = alice.wait_until(job, lambda p: p["final"], timeout=60, what="the time limit")
        assert final["state"] == "failed"
        assert final["error"] == "The job took longer than its time limit and was stopped."
        assert 0 < final["percent"] < 100
        # Logged once the end is written, which the poll may see first.
        processes.wait_for(
            lambda: f"job {job} ended: failed" in farm.worker.log(), timeout=10, what="the worker's log line"
        )
    finally:
        node.stop()


@one_broker
def test_progress_json_never_leaks_the_slots(farm):
    alice = farm.client("alice")
    job = alice.start_report("return-rates", {**ALL_DATES, "min_units": 1})["job"]
    body = alice.progress(job)
    assert "slots" not in json.dumps(body)
    # Ended, so that its slot is free for the next tests (how long it would run is not the point).
    alice.post(f"/progress/{job}/cancel/", headers=JSON)
    alice.wait_until(job, lambda p: p["final"], timeout=60)
