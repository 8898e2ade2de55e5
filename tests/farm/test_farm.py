"""The whole path on real processes: memcached, Redis, a Celery worker and two
gunicorn web nodes sharing nothing but memcached and the database."""

import csv
import http.client
import io
import json
import socket
import sqlite3
from urllib.parse import quote

import pytest
import requests

from tests.harness.hostile import HOSTILE
from tests.harness.marks import one_broker
from tests.harness.processes import wait_for

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
JSON = {"Accept": "application/json"}


def _top_customers_from_db(farm, *, top: int, date_from: str, date_to: str) -> list[list[str]]:
    """The expected report, computed by SQL straight from the farm's database."""
    db = sqlite3.connect(farm.env["DATABASE_URL"].removeprefix("sqlite:///"))
    rows = db.execute(
        """
        SELECT c.name, COUNT(DISTINCT o.id), SUM(l.quantity),
               SUM(CASE WHEN l.returned THEN 0 ELSE l.quantity * l.unit_price_cents END) AS net
        FROM reports_orderline l
        JOIN reports_order o ON o.id = l.order_id
        JOIN reports_customer c ON c.id = o.customer_id
        WHERE o.placed_on BETWEEN ? AND ?
        GROUP BY c.id ORDER BY net DESC, c.id ASC LIMIT ?
        """,
        (date_from, date_to, top),
    ).fetchall()
    db.close()
    return [[name, str(orders), str(units), f"{net / 100:.2f}"] for name, orders, units, net in rows]


def test_job_started_on_node_a_is_followed_and_downloaded_on_node_b(farm):
    alice = farm.client("alice")
    started = alice.start_report("top-customers", {**ALL_DATES, "top": 25, "region": ""})
    job = started["job"]
    assert len(job) >= 22 and started["progress_url"] == f"/progress/{job}/"

    # Recorded before the task was sent: node B knows the job at once.
    assert alice.progress(job, node=farm.node_b)["state"] in {"queued", "running"}

    seen: list[dict] = []
    final = alice.wait_until(job, lambda p: seen.append(p) or p["final"], node=farm.node_b)
    assert final["state"] == "succeeded", final
    assert final["percent"] == 100 and final["error"] is None
    percents = [p["percent"] for p in seen if p["percent"] is not None]
    assert percents == sorted(percents), "progress went backwards"
    assert any(0 < p < 100 for p in percents), f"no intermediate progress seen: {percents[:20]}"
    assert "reading orders" in {p["stage"] for p in seen}
    assert any(p["eta_seconds"] is not None for p in seen if p["state"] == "running")

    response = alice.get(final["result_url"], node=farm.node_b)
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/csv")
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(response.text)))
    assert rows[0][:2] == ["rank", "customer"]
    got = [[r[1], r[4], r[5], r[6]] for r in rows[1:]]
    assert got == _top_customers_from_db(farm, top=25, **ALL_DATES)

    # The chart is served by node B too.
    chart = alice.get(f"/jobs/{job}/files/top-customers.png", node=farm.node_b)
    assert chart.status_code == 200 and chart.content.startswith(b"\x89PNG")


@one_broker
def test_unchanged_progress_answers_304_on_either_node(farm):
    alice = farm.client("alice")
    # A month's report: any finished job's document will do, and the whole
    # range would keep the worker busy for 20 s.
    month = {"date_from": "2024-01-01", "date_to": "2024-01-31"}
    job = alice.start_report("return-rates", {**month, "category": "", "min_units": 5})["job"]
    final = alice.wait_until(job, lambda p: p["final"])
    assert final["state"] == "succeeded"
    first = alice.get(f"/progress/{job}/", node=farm.node_a)
    assert first.headers["Cache-Control"] == "no-store"
    etag = first.headers["ETag"]
    again = alice.get(f"/progress/{job}/", node=farm.node_b, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""


def test_cancel_through_node_b_stops_the_worker(farm):
    alice = farm.client("alice")
    job = alice.start_report("sales-by-region", ALL_DATES, node=farm.node_a)["job"]
    alice.wait_until(
        job,
        lambda p: p["state"] == "running" and p["percent"] > 0,
        node=farm.node_b,
        timeout=60,
        what="job running",
    )

    response = alice.post(f"/progress/{job}/cancel/", node=farm.node_b, headers=JSON)
    assert response.status_code == 202, response.text

    final = alice.wait_until(job, lambda p: p["final"], node=farm.node_a, timeout=30)
    # Only the worker writes "cancelled" for a running job: the web node just
    # raised the flag. So this state is the worker saying it stopped.
    assert final["state"] == "cancelled"
    assert final["percent"] < 100 and final["result_url"] is None
    wait_for(
        lambda: f"job {job} ended: cancelled" in farm.worker.log(),
        timeout=30,
        what="the worker to end the task",
    )
    assert alice.get(f"/jobs/{job}/files/sales-by-region.csv").status_code == 404


def test_cancelled_queued_job_never_runs(farm):
    alice = farm.client("alice")
    # Fill both worker processes so the next job waits in the queue.
    busy = [alice.start_report("sales-by-region", ALL_DATES)["job"] for _ in range(2)]
    for job in busy:
        alice.wait_until(job, lambda p: p["state"] == "running", timeout=60, what="worker busy")
    queued = alice.start_report("return-rates", {**ALL_DATES, "category": "", "min_units": 1})["job"]
    assert alice.progress(queued)["state"] == "queued"

    response = alice.post(f"/progress/{queued}/cancel/", node=farm.node_b, headers=JSON)
    assert response.status_code == 202
    assert response.json()["state"] == "cancelled"

    for job in busy:
        alice.post(f"/progress/{job}/cancel/", headers=JSON)
    wait_for(
        lambda: f"job {queued} not run" in farm.worker.log(),
        timeout=60,
        what="the worker to receive and drop the cancelled job",
    )
    final = alice.progress(queued, node=farm.node_b)
    assert final["state"] == "cancelled" and final["started_at"] is None


@one_broker
def test_failure_is_shown_with_a_readable_error(farm):
    alice = farm.client("alice")
    job = alice.start_report(
        "top-customers", {"date_from": "2001-01-01", "date_to": "2001-12-31", "top": 10, "region": ""}
    )["job"]
    final = alice.wait_until(job, lambda p: p["final"], node=farm.node_b)
    assert final["state"] == "failed"
    assert final["error"] == "No orders between 2001-01-01 and 2001-12-31."
    page = alice.get(f"/jobs/{job}/", node=farm.node_b)
    assert "No orders between 2001-01-01 and 2001-12-31." in page.text


@one_broker
def test_other_users_get_404_for_progress_pages_downloads_and_cancel(farm):
    alice = farm.client("alice")
    job = alice.start_report("top-customers", {**ALL_DATES, "top": 5, "region": ""})["job"]
    final = alice.wait_until(job, lambda p: p["final"])
    assert final["state"] == "succeeded"

    bob = farm.client("bob")
    for node in (farm.node_a, farm.node_b):
        assert bob.get(f"/progress/{job}/", node=node).status_code == 404
        assert bob.get(final["result_url"], node=node).status_code == 404
        assert bob.get(f"/jobs/{job}/", node=node).status_code == 404
        assert bob.post(f"/progress/{job}/cancel/", node=node, headers=JSON).status_code == 404
    # Alice still can; nobody anonymous can.
    assert alice.get(final["result_url"], node=farm.node_b).status_code == 200
    anonymous = requests.get(f"{farm.node_b}/progress/{job}/", timeout=10)
    assert anonymous.status_code == 401 and json.loads(anonymous.text)["error"]


@one_broker
def test_start_is_csrf_protected(farm):
    alice = farm.client("alice")
    alice.session.headers["X-CSRFToken"] = ""
    response = alice.session.post(
        f"{farm.node_a}/reports/top-customers/", data={**ALL_DATES, "top": 5}, timeout=10
    )
    assert response.status_code == 403


@one_broker
def test_hostile_paths_through_gunicorn_are_4xx(farm):
    alice = farm.client("alice")
    host, port = farm.node_b.removeprefix("http://").split(":")
    cookie = "; ".join(f"{c.name}={c.value}" for c in alice.session.cookies)
    for value in HOSTILE:
        segment = quote(value, safe="")
        for path in (f"/progress/{segment}/", f"/jobs/{segment}/", f"/reports/{segment}/"):
            # http.client sends the path as written (requests would fold "..").
            connection = http.client.HTTPConnection(host, int(port), timeout=10)
            connection.request("GET", path, headers={"Cookie": cookie, "Accept": "application/json"})
            status = connection.getresponse().status
            connection.close()
            assert 400 <= status < 500, (path, status)
    # Raw bytes no client library would send: gunicorn refuses the request line.
    for raw in (
        b"GET /progress/\x00\x01/ HTTP/1.1",
        b"GET /progress/a b/ HTTP/1.1",
        b"GET /" + b"a" * 10000 + b"/ HTTP/1.1",
    ):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(raw + b"\r\nHost: 127.0.0.1\r\n\r\n")
            status_line = sock.recv(64).split(b"\r\n")[0]
        assert status_line.split()[1].startswith(b"4"), (raw[:40], status_line)
