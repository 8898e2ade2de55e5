"""Farm-wide counters: cheap increments, lossless harvesting, the endpoints."""

import subprocess
import sys

import pytest
from django.db.models import Sum
from django.test import Client

from tests.harness.processes import ROOT, free_port
from tests.harness.suites import library_env
from webfarm.core import counters
from webfarm.core.client import get_client
from webfarm.stats.harvest import harvest
from webfarm.stats.models import CounterSample

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "stats-token-for-tests"


@pytest.fixture(autouse=True)
def fresh_counters(settings):
    settings.STATS_API_TOKEN = TOKEN
    counters.forget_known()
    yield
    counters.forget_known()


def _total(key: str) -> int:
    return CounterSample.objects.filter(key=key).aggregate(t=Sum("value"))["t"] or 0


def test_counts_land_in_memcached_and_harvest_moves_them_once():
    for _ in range(5):
        counters.count("jobs", kind="top-customers", state="queued")
    counters.count("jobs", 2, kind="top-customers", state="failed")
    assert harvest() == {"jobs|kind=top-customers|state=queued": 5, "jobs|kind=top-customers|state=failed": 2}
    assert harvest() == {}  # harvesting twice counts nothing twice
    counters.count("jobs", kind="top-customers", state="queued")
    assert harvest() == {"jobs|kind=top-customers|state=queued": 1}
    assert _total("jobs|kind=top-customers|state=queued") == 6


def test_bad_names_are_programming_errors():
    for name, labels in [("Bad", {}), ("ok", {"kind": "a b"}), ("ok", {"Kind": "x"}), ("x" * 65, {})]:
        with pytest.raises(ValueError):
            counters.count(name, **labels)


def test_memcached_down_never_raises_and_drops_are_counted(settings, memcached_server):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    counters.count("logins")  # must not raise
    counters.count("logins", 2)
    assert counters.dropped_here() == 3
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [memcached_server]}
    counters.count("logins")
    assert counters.dropped_here() == 0
    added = harvest()
    assert added["counters_dropped"] == 3 and added["logins"] == 1


def test_a_memcached_restart_counts_what_came_after_it():
    counters.count("downloads", 10)
    harvest()
    client = get_client()
    client.delete("c:downloads")  # memcached lost its counters...
    client.set("c:generation", b"restarted")
    counters.forget_known()
    counters.count("downloads", 3)  # ...and counting starts again
    assert harvest() == {"downloads": 3}
    assert _total("downloads") == 13


def test_concurrent_incrementers_and_two_harvesters_lose_and_double_nothing(
    memcached_server, progress_on_real_memcached, tmp_path
):
    env = library_env(memcached_server, progress_on_real_memcached, database=tmp_path / "stats.sqlite3")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)

    def spawn(*args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.harness.stats_worker", *args], cwd=ROOT, env=env
        )

    harvesters = [spawn("harvest", "0") for _ in range(2)]
    counting = [spawn("count", "3000") for _ in range(4)]
    for process in counting:
        assert process.wait(timeout=120) == 0
    get_client().set("test:stop", b"1")
    for process in harvesters:
        assert process.wait(timeout=120) == 0

    import sqlite3

    db = sqlite3.connect(tmp_path / "stats.sqlite3")
    rows = dict(db.execute("SELECT key, SUM(value) FROM webfarm_stats_countersample GROUP BY key").fetchall())
    db.close()
    assert rows == {"hits|kind=a": 6000, "hits|kind=b": 6000}


def test_endpoints_need_the_token_and_show_totals(client: Client = None):
    client = Client()
    counters.count("logins", 4)
    harvest()
    counters.count("logins", 1)  # not harvested yet: still shown
    assert client.get("/stats/counters.json").status_code == 401
    assert client.get("/stats/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    data = client.get("/stats/counters.json", **auth).json()
    assert data["counters"]["logins"] == 5 and data["includes_unharvested"] is True
    counters.count("jobs", kind="top-customers", state="succeeded")
    text = client.get("/stats/metrics", **auth).content.decode()
    assert "# TYPE webfarm_logins_total counter\nwebfarm_logins_total 5\n" in text
    assert 'webfarm_jobs_total{kind="top-customers",state="succeeded"} 1' in text


def test_jobs_logins_accounts_and_downloads_are_counted():
    from django.contrib.auth import get_user_model

    from webfarm.progress import services

    user = get_user_model().objects.create_user("counted", password="pw-for-counting")
    job = services.create_job(owner=user, kind="top-customers", title="t", params={})
    with services.track_job(job):
        pass
    client = Client()
    assert client.login(username="counted", password="pw-for-counting")
    counters.flush_soon()  # a start's count is tallied in the process, sent once a second
    added = harvest()
    for state in ("queued", "running", "succeeded"):
        assert added[f"jobs|kind=top-customers|state={state}"] == 1
    assert added["job_seconds|kind=top-customers|le=1"] == 1
    assert added["accounts_created"] >= 1 and added["logins"] == 1


def test_polls_are_tallied_in_the_process_and_sent_together(monkeypatch):
    from django.contrib.auth import get_user_model

    from webfarm.progress import services

    monkeypatch.setattr("webfarm.core.counters.FLUSH_EVERY", 3600)
    counters.flush_soon()
    harvest()
    user = get_user_model().objects.create_user("poller", password="x")
    job = services.create_job(owner=user, kind="top-customers", title="t", params={})
    client = Client()
    client.force_login(user)
    for _ in range(5):
        assert client.get(f"/progress/{job.id}/").status_code == 200
    assert "progress_polls" not in harvest()  # still in the process
    counters.flush_soon()
    assert harvest()["progress_polls"] == 5


def test_flush_soon_returns_only_once_what_was_tallied_is_sent(monkeypatch):
    """The sending thread may have taken the tally a moment before: a
    caller's flush waits for that send too, or what it counted is not in
    memcached yet when it returns (a harvest right after missed it)."""
    import threading

    sending, release = threading.Event(), threading.Event()
    real_count = counters.count

    def slow_count(name: str, n: int = 1, **labels: str) -> None:
        sending.set()
        release.wait(10)
        real_count(name, n, **labels)

    counters.count_soon("logins")
    monkeypatch.setattr(counters, "count", slow_count)
    sender = threading.Thread(target=counters.flush_soon)
    sender.start()
    assert sending.wait(5)  # the "thread" holds the tally, not yet sent
    monkeypatch.setattr(counters, "count", real_count)
    caller = threading.Thread(target=counters.flush_soon)
    caller.start()
    caller.join(0.5)
    assert caller.is_alive()  # waiting for the send in flight
    release.set()
    caller.join(5)
    sender.join(5)
    assert not caller.is_alive() and harvest()["logins"] == 1


def test_dead_letters_show_in_the_metrics_as_a_gauge_and_a_counter():
    from webfarm.queues.queue import Queue

    queue = Queue("metered")
    queue.put_many([b"fine", b"[]"])
    fine, bad = queue.claim_many(2)
    queue.ack(fine.receipt)
    queue.bury(bad, "not what this queue carries")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    text = Client().get("/stats/metrics", **auth).content.decode()
    assert "# TYPE webfarm_queue_dead_letters gauge" in text
    assert 'webfarm_queue_dead_letters{queue="metered"} 1' in text
    assert 'webfarm_queue_ready{queue="metered"} 0' in text
    assert 'webfarm_queue_messages_total{direction="dead",queue="metered"} 1' in text
    data = Client().get("/stats/counters.json", **auth).json()
    assert data["gauges"]["queue_dead_letters|queue=metered"] == 1


def test_a_planted_counter_or_registry_line_never_stops_the_harvest():
    counters.count("logins", 2)
    client = get_client()
    client.append("c:registry", b"not a|counter key\nqueue_messages|direction=in\n\x00\n")
    client.set("c:logins", b"lots")
    client.append("q:registry", b"../etc\nbad name\n")
    harvest()  # neither raises nor counts what is not a count
    counters.count("jobs", kind="a", state="queued")
    assert harvest()["jobs|kind=a|state=queued"] == 1
    auth = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert Client().get("/stats/metrics", **auth).status_code == 200
