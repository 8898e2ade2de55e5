"""The staff dashboard's parts on a real memcached: who may see it, the chart
series, server health, the queue registry, worker heartbeats, recent activity."""

import json
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from pymemcache.client.base import Client as MemcacheClient
from pymemcache.exceptions import MemcacheServerError

from tests.harness.processes import free_port, memcached
from webfarm.activity import recent
from webfarm.activity.drain import drain
from webfarm.activity.handler import QUEUE_NAME
from webfarm.broker.transport import broker_ring
from webfarm.core import counters
from webfarm.core.client import get_client
from webfarm.dashboard import series, servers
from webfarm.dashboard.workers import Heartbeat, live_workers
from webfarm.queues.queue import Queue
from webfarm.queues.registry import known_queues
from webfarm.stats.harvest import harvest
from webfarm.stats.models import CounterMinute
from webfarm.stats.selectors import gauges

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_counters():
    counters.forget_known()
    yield
    counters.forget_known()


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user("root", password="x", is_staff=True))
    return client


# -- who may look -------------------------------------------------------------------


def test_anonymous_is_sent_to_the_admin_login_and_non_staff_refused():
    assert Client().get("/admin/dashboard/")["Location"].startswith("/admin/login/?next=/admin/dashboard/")
    bob = Client()
    bob.force_login(get_user_model().objects.create_user("bob", password="x"))
    for path in ("/admin/dashboard/", "/admin/dashboard/live/", "/admin/dashboard/charts/jobs.png"):
        response = bob.get(path)
        assert response.status_code == 403, path
        assert b"for staff" in response.content


def test_staff_get_the_page_the_live_part_and_every_chart(staff):
    page = staff.get("/admin/dashboard/")
    assert page.status_code == 200
    assert page["Cache-Control"].startswith("max-age=0")
    for heading in ("History", "Running jobs", "memcached servers", "Workers", "Queues", "Daily summaries"):
        assert heading.encode() in page.content
    assert staff.get("/admin/dashboard/live/").status_code == 200
    for name in ("jobs", "durations", "polls", "refusals"):
        chart = staff.get(f"/admin/dashboard/charts/{name}.png")
        assert chart["Content-Type"] == "image/png" and chart.content.startswith(b"\x89PNG")
    assert staff.get("/admin/dashboard/charts/nope.png").status_code == 404
    assert staff.get("/admin/dashboard/charts/%3Cscript%3E.png").status_code == 404


# -- series ---------------------------------------------------------------------------


def test_quantile_interpolates_inside_buckets_like_prometheus():
    assert series.quantile(0.5, {}) is None
    # 10 jobs up to 1 s, 10 between 1 and 5 s: the median is the 1 s bound,
    # p75 half-way into the second bucket.
    assert series.quantile(0.5, {"1": 10, "5": 10}) == pytest.approx(1.0)
    assert series.quantile(0.75, {"1": 10, "5": 10}) == pytest.approx(3.0)
    assert series.quantile(0.95, {"1": 1, "inf": 99}) == 3600.0  # past the last bound: the bound


def test_series_carry_harvested_and_not_yet_harvested_counts():
    now = datetime.now(UTC)
    counters.count("jobs", 3, kind="top-customers", state="succeeded")
    counters.observe_duration("job_seconds", 0.5, kind="top-customers")
    counters.observe_duration("job_seconds", 20, kind="top-customers")
    harvest(now=now)
    counters.count("jobs", kind="top-customers", state="failed")  # not harvested yet
    counters.count("progress_polls", 7)
    counters.count("refused", 2, reason="starts")
    built = series.build(hours=4, minutes=10, now=now)
    assert built["live"] is True
    assert built["jobs"]["lines"]["succeeded"][-1] == 3
    assert built["jobs"]["lines"]["failed"][-1] == 1
    assert built["durations"]["lines"]["p50"][-1] == pytest.approx(1.0)
    assert 10 < built["durations"]["lines"]["p95"][-1] <= 30
    assert built["polls"]["lines"]["polls"][-1] == 7
    assert built["refusals"]["lines"]["starts"][-1] == 2
    assert len(built["jobs"]["labels"]) == 4 and built["jobs"]["lines"]["succeeded"][:-1] == [0, 0, 0]


def test_minute_samples_are_kept_two_days():
    old = datetime.now(UTC) - timedelta(days=3)
    counters.count("progress_polls", 5)
    harvest(now=old)
    assert CounterMinute.objects.filter(key="progress_polls").exists()
    counters.count("progress_polls")
    harvest()
    assert list(CounterMinute.objects.values_list("value", flat=True)) == [1]


# -- memcached servers -------------------------------------------------------------------


def test_server_health_reports_up_down_and_out_of_memory_refusals(tmp_path):
    process, address = memcached(tmp_path, memory_mb=2, extra=["-M"])
    try:
        host, port = address.split(":")
        client = MemcacheClient((host, int(port)), default_noreply=False)
        client.set("hit", b"x")
        client.get("hit")
        client.get("miss")
        with pytest.raises(MemcacheServerError):
            for i in range(10_000):
                client.set(f"fill{i}", b"x" * 50_000)
        health = servers.probe(address)
        assert health.up and not health.evicts_when_full
        assert health.out_of_memory >= 1 and health.evictions == 0
        assert health.items > 10 and 0 < health.bytes <= health.limit_bytes == 2 * 1024 * 1024
        assert 0 < health.hit_ratio < 1 and health.connections >= 1
    finally:
        process.stop()
    down = servers.probe(address)
    assert not down.up and "refused" in down.error.lower()


# -- queues, workers, activity -------------------------------------------------------------


def test_queues_list_themselves_again_after_memcached_loses_the_list():
    Queue("reports-in").put(b"x")
    Queue("sitelog-test").put(b"y")
    assert {"reports-in", "sitelog-test"} <= set(known_queues())
    get_client().delete("q:registry")
    get_client().delete("q:reports-in:gen")  # as a restart would
    Queue("reports-in").put(b"z")
    assert "reports-in" in known_queues()


def test_queue_messages_in_and_out_are_harvested_as_counters():
    queue = Queue("harvested-q")
    queue.put_many([b"a", b"b", b"c"])
    queue.ack(queue.claim().receipt)
    added = harvest()
    assert added["queue_messages|direction=in|queue=harvested-q"] == 3
    assert added["queue_messages|direction=out|queue=harvested-q"] >= 1
    assert "queue_messages|direction=in|queue=harvested-q" not in harvest()


def test_queues_on_the_brokers_ring_are_counted_and_shown_there(staff, settings, memcached_server):
    """Celery's queues live on the broker's ring, under a namespace of their
    own: read on the main ring they would show nothing in and nothing out."""
    settings.CELERY_BROKER_URL = f"memcached://{memcached_server}"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"servers": [memcached_server]}
    ring = broker_ring()
    queue = Queue("ringed-q", ring=ring)
    queue.prefetch = 1
    queue.put_many([b"a", b"b"])
    queue.ack(queue.claim().receipt)
    assert "ringed-q" not in known_queues()
    added = harvest()
    assert added["queue_messages|direction=in|queue=ringed-q|ring=broker"] == 2
    assert added["queue_messages|direction=out|queue=ringed-q|ring=broker"] == 1
    assert gauges()["queue_ready|queue=ringed-q|ring=broker"] == 1
    page = staff.get("/admin/dashboard/live/").content.decode()
    row = page[page.index('data-queue="broker:ringed-q"') :].split("</tr>")[0]
    waiting, _, put_in, taken_out = re.findall(r">(\d+)</td>", row)[:4]
    assert (waiting, put_in, taken_out) == ("1", "2", "1")


def test_worker_heartbeats_show_up_silent_and_stopped():
    heartbeat = Heartbeat("w1@host", concurrency=4, queues=["webfarm"], every=0.2)
    heartbeat.start()
    try:
        (worker,) = live_workers()
        assert (worker["hostname"], worker["state"], worker["concurrency"]) == ("w1@host", "up", 4)
        # Nobody beats for w1 after it is gone: three missed beats make it silent.
        assert live_workers(now=time.time() + 10)[0]["state"] == "silent"
    finally:
        heartbeat.stop()
    assert live_workers()[0]["state"] == "stopped"


def test_newest_activity_comes_from_memcached_or_else_the_file(tmp_path):
    queue = Queue(QUEUE_NAME)
    queue.put_many([json.dumps({"message": f"entry {i}", "ts": time.time()}).encode() for i in range(5)])
    path = tmp_path / "activity.log"
    drain(path)
    assert [e["message"] for e in recent.newest(3)] == ["entry 4", "entry 3", "entry 2"]
    get_client().delete(recent.KEY)  # memcached restarted
    assert [e["message"] for e in recent.newest(2, path)] == ["entry 4", "entry 3"]


def test_dashboard_still_answers_with_memcached_down(staff, settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    page = staff.get("/admin/dashboard/")
    assert page.status_code == 200
    assert b"down:" in page.content and b"memcached did not answer" in page.content


def test_workers_whose_records_expired_are_unlisted_and_a_live_one_relists_itself():
    heartbeat = Heartbeat("w2@host", concurrency=1, queues=["webfarm"], every=60)
    heartbeat.beat()
    get_client().delete(f"workers:{heartbeat.id}")  # a day passed
    assert live_workers() == []
    assert get_client().get("workers:registry") == b""
    get_client().delete("workers:registry")  # memcached restarted
    heartbeat.beat()
    assert [w["hostname"] for w in live_workers()] == ["w2@host"]


def test_the_queue_table_shows_dead_letters_with_how_to_look_at_them(staff):
    queue = Queue("dashboard-dead")
    queue.put_many([b"ok", b"bad"])
    ok, bad = queue.claim_many(2)
    queue.ack(ok.receipt)
    queue.bury(bad, "cannot be processed")
    page = staff.get("/admin/dashboard/live/").content.decode()
    row = page[page.index('data-queue="dashboard-dead"') :].split("</tr>")[0]
    assert '<td class="dead warning">1' in row and "manage.py dead_letters dashboard-dead" in row


def test_a_planted_heartbeat_or_worker_list_line_is_ignored(staff):
    client = get_client()
    client.set("workers:registry", b"0123456789abcdef\n../x\n")
    client.set("workers:0123456789abcdef", b'{"state": "up", "seen": "now"}')
    assert live_workers() == []
    assert staff.get("/admin/dashboard/live/").status_code == 200


def test_newest_activity_leaves_out_what_pages_poll_but_not_their_errors(tmp_path):
    def entry(method: str, path: str, status: int) -> bytes:
        message = f"{method} {path} {status}"
        return json.dumps(
            {"message": message, "ts": time.time(), "method": method, "path": path, "status": status}
        ).encode()

    Queue(QUEUE_NAME).put_many(
        [
            entry("POST", "/start/count/", 202),
            entry("GET", "/progress/abc/<token>/", 200),
            entry("GET", "/progress/abc/", 304),
            entry("GET", "/counters/3.json", 200),
            entry("GET", "/admin/dashboard/live/", 200),
            entry("GET", "/stats/metrics", 200),
            entry("GET", "/progress/abc/", 404),
            entry("GET", "/jobs/abc/", 200),
        ]
    )
    path = tmp_path / "activity.log"
    drain(path)
    shown = ["GET /jobs/abc/ 200", "GET /progress/abc/ 404", "POST /start/count/ 202"]
    assert [e["message"] for e in recent.newest(10)] == shown
    assert len(path.read_text().splitlines()) == 8  # the log file keeps them all
    get_client().delete(recent.KEY)
    assert [e["message"] for e in recent.newest(10, path)] == shown
