"""The site activity log: shipped from any node through memcached, drained
to a file in order, exactly once, across crashes."""

import json
import logging
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from activity.drain import DrainerBusy, drain
from activity.handler import QUEUE_NAME, SiteLogHandler
from progress.client import get_client
from queues.core import Queue
from stats import counters
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
    settings.PROGRESS = {**settings.PROGRESS, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    logging.getLogger("activity").info("while memcached is away", extra={"user": "x"})
    _handler().flush()
    # The drop could not be counted in memcached either: it waits in the process.
    wait_for(lambda: counters.dropped_here() > before, timeout=5, what="the drop to be counted")


def test_a_crash_between_write_and_ack_neither_duplicates_nor_skips(tmp_path, settings):
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 1, "RECOVER_INTERVAL": 0.0}
    queue = Queue(QUEUE_NAME)
    queue.put_many([json.dumps({"message": f"line {i}"}).encode() for i in range(10)])
    path = tmp_path / "activity.log"

    def crash(messages):
        raise RuntimeError("drainer killed after writing, before acknowledging")

    with pytest.raises(RuntimeError):
        drain(path, before_ack=crash)
    assert [line["message"] for line in _lines(path)] == [f"line {i}" for i in range(10)]

    # The restarted drainer gets the ten again (never acknowledged), skips them,
    # and writes what came since.
    queue.put_many([json.dumps({"message": f"line {i}"}).encode() for i in range(10, 15)])
    drain(path, idle_exit=3.0)
    assert [line["message"] for line in _lines(path)] == [f"line {i}" for i in range(15)]
    assert Queue(QUEUE_NAME).stats()["redelivered"] == 10


def test_only_one_drainer_at_a_time(tmp_path):
    get_client().add("sitelog:drainer", b"other", expire=60)
    with pytest.raises(DrainerBusy):
        drain(tmp_path / f"{uuid.uuid4().hex}.log")
