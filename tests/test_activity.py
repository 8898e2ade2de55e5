"""The site activity log: shipped from any node through memcached, drained
to a file in order, exactly once, across crashes."""

import json
import logging
import time
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from activity.drain import DrainerBusy, drain
from activity.handler import QUEUE_NAME, SiteLogHandler
from core import counters
from core.client import get_client
from queues.core import DeadLetter, Queue
from tests.processes import free_port, wait_for

pytestmark = pytest.mark.django_db


def _handler() -> SiteLogHandler:
    return next(h for h in logging.getLogger("activity").handlers if isinstance(h, SiteLogHandler))


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_request_is_logged_with_who_what_status_and_duration(tmp_path):
    user = get_user_model().objects.create_user("alice", password="x")
    client = Client()
    client.force_login(user)
    client.get("/jobs/")
    Client().get("/no/such/page/")
    _handler().flush()
    path = tmp_path / "activity.log"

    # Only this test's requests: the shipper may still be sending an earlier test's lines.
    def ours() -> list[dict]:
        return [line for line in _lines(path) if line.get("path") in ("/jobs/", "/no/such/page/")]

    wait_for(lambda: drain(path) or (path.exists() and len(ours()) >= 2), timeout=10, what="two lines")
    first, second = ours()[:2]
    assert (first["user"], first["method"], first["path"], first["status"]) == ("alice", "GET", "/jobs/", 200)
    assert second["user"] is None and second["status"] == 404
    assert first["duration_ms"] >= 0 and first["node"] and first["q"]


def test_shipping_never_raises_when_memcached_is_down(settings):
    counters.forget_known()
    before = counters.dropped_here()
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    logging.getLogger("activity").info("while memcached is away", extra={"user": "x"})
    _handler().flush()
    # The drop could not be counted in memcached either: it waits in the process.
    wait_for(lambda: counters.dropped_here() > before, timeout=5, what="the drop to be counted")


def test_a_crash_between_write_and_ack_neither_duplicates_nor_skips(tmp_path, settings):
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 1, "RECOVER_INTERVAL": 0.0}
    queue = Queue(QUEUE_NAME)
    queue.put_many([json.dumps({"message": f"line {i}", "ts": time.time()}).encode() for i in range(10)])
    path = tmp_path / "activity.log"

    def crash(messages):
        raise RuntimeError("drainer killed after writing, before acknowledging")

    with pytest.raises(RuntimeError):
        drain(path, before_ack=crash)
    assert [line["message"] for line in _lines(path)] == [f"line {i}" for i in range(10)]

    # The restarted drainer gets the ten again (never acknowledged), skips them,
    # and writes what came since.
    queue.put_many([json.dumps({"message": f"line {i}", "ts": time.time()}).encode() for i in range(10, 15)])
    drain(path, idle_exit=3.0)
    assert [line["message"] for line in _lines(path)] == [f"line {i}" for i in range(15)]
    assert Queue(QUEUE_NAME).stats()["redelivered"] == 10


def test_only_one_drainer_at_a_time(tmp_path):
    get_client().add("sitelog:drainer", b"other", expire=60)
    with pytest.raises(DrainerBusy):
        drain(tmp_path / f"{uuid.uuid4().hex}.log")


MALFORMED = [
    b"[]",
    b'{"message": "no time"}',
    b'{"ts": 1e20, "message": "too late"}',
    b'{"ts": "yesterday", "message": "not a number"}',
    b'{"ts": 1700000000, "message": ["not", "text"]}',
    b"not json at all",
    b"[" * 5000 + b"]" * 5000,
]


def test_malformed_entries_go_to_the_dead_letters_and_the_rest_is_written(tmp_path, settings):
    settings.QUEUES = {**settings.QUEUES, "RECOVER_INTERVAL": 0.0}
    queue = Queue(QUEUE_NAME)
    good = [json.dumps({"ts": time.time(), "message": f"good {i}"}).encode() for i in range(3)]
    queue.put_many([good[0], *MALFORMED[:4], good[1], *MALFORMED[4:], good[2]])
    path = tmp_path / "activity.log"
    assert drain(path) == 3
    assert [line["message"] for line in _lines(path)] == ["good 0", "good 1", "good 2"]
    assert drain(path) == 0  # nothing is delivered again: the bad ones are not in the way
    dead = [DeadLetter.from_json(m.body) for m in queue.dead_letters().peek(20)]
    assert sorted(letter.body for letter in dead) == sorted(MALFORMED)
    assert all("not a site-log entry" in letter.reason for letter in dead)
    assert queue.stats()["dead_letters"] == len(MALFORMED)


def test_the_newest_activity_ignores_what_someone_else_put_in_memcached(tmp_path):
    from activity import recent
    from core.seal import seal

    client = get_client()
    for planted in (
        b"[]",
        seal(recent.KEY, b'[{"ts": 1e20}, "x", {"ts": 1700000000, "message": 5}]'),
        b"\x80",
    ):
        client.set(recent.KEY, planted)
        assert recent.newest(10) == []
    queue = Queue(QUEUE_NAME)
    queue.put(json.dumps({"ts": time.time(), "message": "real"}).encode())
    drain(tmp_path / "activity.log")
    assert [e["message"] for e in recent.newest(10)] == ["real"]


def test_read_tokens_never_reach_the_log_the_file_or_the_dashboard(tmp_path, settings):
    from progress import services

    settings.ACTIVITY_LOG_FILE = str(tmp_path / "activity.log")
    alice = get_user_model().objects.create_user("alice", password="x")
    job = services.create_job(owner=alice, kind="top-customers", title="t", params={})
    assert Client().get(f"/progress/{job.id}/{job.read_token}/").status_code == 200
    # A poll that failed shows on the dashboard (answered ones are left out there).
    guess = "g" * len(job.read_token)
    assert Client().get(f"/progress/{job.id}/{guess}/").status_code == 404
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("root", password="x", is_staff=True))
    _handler().flush()
    path = tmp_path / "activity.log"
    wait_for(
        lambda: drain(path) or sum(job.id in line.get("path", "") for line in _lines(path)) >= 2,
        timeout=10,
        what="the polls' lines",
    )
    text = path.read_text()
    assert f"/progress/{job.id}/<token>/" in text and job.read_token not in text and guess not in text
    page = staff.get("/admin/dashboard/live/").content.decode()
    assert job.id in page and job.read_token not in page and guess not in page
