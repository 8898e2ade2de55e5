"""The site activity log: shipped from any node through memcached, drained
to a file in order, exactly once, across crashes."""

import json
import logging
import logging.config
import sys
import time
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.harness.processes import free_port, wait_for
from webfarm.activity.drain import DrainerBusy, drain
from webfarm.activity.handler import QUEUE_NAME, SiteLogHandler
from webfarm.core import counters
from webfarm.core.client import get_client
from webfarm.queues.queue import DeadLetter, Queue

pytestmark = pytest.mark.django_db


def _handler() -> SiteLogHandler:
    return next(h for h in logging.getLogger("activity").handlers if isinstance(h, SiteLogHandler))


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_request_is_logged_with_who_what_status_and_duration(tmp_path):
    # Names of this test's own: the shipper may still be sending an earlier test's lines.
    name, missing = f"alice{uuid.uuid4().hex[:8]}", f"/no/such/page/{uuid.uuid4().hex}/"
    user = get_user_model().objects.create_user(name, password="x")
    client = Client()
    client.force_login(user)
    client.get("/jobs/")
    Client().get(missing)
    _handler().flush()
    path = tmp_path / "activity.log"

    def ours() -> list[dict]:
        return [line for line in _lines(path) if line.get("user") == name or line.get("path") == missing]

    wait_for(lambda: drain(path) or (path.exists() and len(ours()) >= 2), timeout=10, what="two lines")
    first, second = ours()[:2]
    assert (first["user"], first["method"], first["path"], first["status"]) == (name, "GET", "/jobs/", 200)
    assert second["user"] is None and second["status"] == 404
    assert first["duration_ms"] >= 0 and first["node"] and first["q"]


def _shipped(marker: str, tmp_path) -> bool:
    path = tmp_path / "activity.log"
    drain(path)
    return any(line.get("user") == marker for line in _lines(path))


def test_the_default_handler_ships_after_logging_is_configured_again(tmp_path):
    """A second django.setup() (a WSGI file's get_wsgi_application() in a
    process that set Django up already) configures logging again, which
    closes every handler: the one the app gave the site log (no LOGGING of
    the project's) kept the lines it was given and shipped none."""
    site_log = logging.getLogger("activity")
    (handler,) = [h for h in site_log.handlers if isinstance(h, SiteLogHandler)]
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    marker = uuid.uuid4().hex
    site_log.info("after a second set-up", extra={"user": marker})
    handler.flush()
    wait_for(lambda: _shipped(marker, tmp_path), timeout=10, what="the line logged after the set-up")


def test_a_forked_child_ships_its_own_lines(tmp_path):
    """A Celery worker's pool processes are forked from the process that set
    Django up, and a thread does not survive a fork: the child ships its
    lines with a shipper of its own."""
    import multiprocessing

    marker = uuid.uuid4().hex

    def log_in_child() -> None:
        site_log = logging.getLogger("activity")
        site_log.info("from a forked child", extra={"user": marker})
        for handler in site_log.handlers:
            handler.flush()

    child = multiprocessing.get_context("fork").Process(target=log_in_child)
    child.start()
    child.join(30)
    assert child.exitcode == 0
    wait_for(lambda: _shipped(marker, tmp_path), timeout=10, what="the child's line")


def test_a_handler_a_project_s_logging_names_ships_on_this_python(tmp_path):
    # Built the way Django builds a project's LOGGING (dictConfig), whose
    # treatment of handler classes has changed between Pythons.
    config = {"class": "webfarm.activity.handler.SiteLogHandler"}
    handler = logging.config.DictConfigurator({"version": 1}).configure_handler(config)
    try:
        assert isinstance(handler, SiteLogHandler) and handler.shipper.queue_name == QUEUE_NAME
        marker = uuid.uuid4().hex
        try:
            raise ValueError("the cause")
        except ValueError:
            cause = sys.exc_info()
        record = logging.LogRecord("activity", logging.INFO, __file__, 1, "built %s", (marker,), cause)
        record.user = marker
        handler.handle(record)
        handler.flush()
        path = tmp_path / "activity.log"

        def ours() -> list[dict]:
            return [line for line in _lines(path) if line.get("user") == marker]

        wait_for(lambda: drain(path) or (path.exists() and ours()), timeout=10, what="the line")
        (line,) = ours()
        assert line["message"].startswith(f"built {marker}\nTraceback")
        assert "ValueError: the cause" in line["message"]
        assert line["level"] == "info" and line["logger"] == "activity"
    finally:
        handler.close()
    assert not handler.shipper.is_alive()


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
    from webfarm.activity import recent
    from webfarm.core.seal import seal

    client = get_client()
    for planted in (
        b"[]",
        seal(recent.KEY, b'[{"ts": 1e20}, "x", {"ts": 1700000000, "message": 5}]', ttl=60),
        b"\x80",
    ):
        client.set(recent.KEY, planted)
        assert recent.newest(10) == []
    queue = Queue(QUEUE_NAME)
    queue.put(json.dumps({"ts": time.time(), "message": "real"}).encode())
    drain(tmp_path / "activity.log")
    assert [e["message"] for e in recent.newest(10)] == ["real"]


def test_read_tokens_never_reach_the_log_the_file_or_the_dashboard(tmp_path, settings):
    from webfarm.progress import services

    settings.ACTIVITY_LOG_FILE = str(tmp_path / "activity.log")
    settings.ACTIVITY = {"POLL_SAMPLE": 1.0}  # answered polls too, as a sample would log them
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


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def logged():
    """What the activity logger is given in this test, beside the shipping."""
    kept = _Kept()
    logging.getLogger("activity").addHandler(kept)
    yield kept.records
    logging.getLogger("activity").removeHandler(kept)


def _polled_count(area: str, status: str) -> int:
    counters.flush_soon()
    return int(get_client().get(f"c:requests_polled|area={area}|status={status}") or 0)


@pytest.fixture
def alice_job():
    from webfarm.progress import services

    alice = get_user_model().objects.create_user("alice", password="x")
    return alice, services.create_job(owner=alice, kind="demo", title="t", params={})


def test_answered_polls_are_counted_not_logged_and_failed_ones_logged(logged, alice_job):
    alice, job = alice_job
    client = Client()
    client.force_login(alice)
    before = _polled_count("progress", "200")
    for _ in range(3):
        assert Client().get(f"/progress/{job.id}/{job.read_token}/").status_code == 200
        assert client.get(f"/progress/{job.id}/").status_code == 200
    assert _polled_count("progress", "200") == before + 6
    assert not [r for r in logged if "/progress/" in r.path]
    assert Client().get(f"/progress/{job.id}/{'x' * 22}/").status_code == 404
    assert [(r.path, r.status) for r in logged] == [(f"/progress/{job.id}/<token>/", 404)]


def test_a_sample_of_answered_polls_is_logged_when_asked(logged, alice_job, settings):
    _, job = alice_job
    settings.ACTIVITY = {"POLL_SAMPLE": 1.0}
    assert Client().get(f"/progress/{job.id}/{job.read_token}/").status_code == 200
    assert [(r.path, r.status) for r in logged] == [(f"/progress/{job.id}/<token>/", 200)]


def test_logging_a_request_never_loads_the_session_or_user_the_view_did_not(
    logged, alice_job, settings, django_assert_num_queries
):
    from tests.harness.roundtrips import counting, measure

    alice, job = alice_job
    settings.ACTIVITY = {"POLL_SAMPLE": 1.0}
    client = Client()
    client.force_login(alice)
    url = f"/progress/{job.id}/{job.read_token}/"
    with counting(settings):
        client.get(url)
        with django_assert_num_queries(0):
            cost = measure(lambda: client.get(url))
    # The token view reads neither: the log line says no user, rather than
    # a session read and a user read to say who.
    assert cost.round_trips - cost.connects == 1 and cost.verbs == {"get": 1}
    assert logged[-1].path == f"/progress/{job.id}/<token>/" and logged[-1].user is None
    # A view that loads the user gets its name logged.
    assert client.get("/jobs/").status_code == 200
    assert (logged[-1].path, logged[-1].user) == ("/jobs/", "alice")


def test_records_are_shipped_in_batches_not_one_by_one(monkeypatch, tmp_path):
    from webfarm.activity import handler

    batches: list[list[str]] = []
    ship = handler.ship

    def kept(queue_name, records):
        batches.append([r["message"] for r in records if r["message"].startswith("batch-test")])
        ship(queue_name, records)

    monkeypatch.setattr(handler, "ship", kept)
    log = logging.getLogger("activity")
    for i in range(300):
        log.info("batch-test %d", i)
    _handler().flush()
    shipped = [message for batch in batches for message in batch]
    assert shipped == [f"batch-test {i}" for i in range(300)]
    assert len([b for b in batches if b]) <= 10  # a few put_many, not 300 round trips
    path = tmp_path / "activity.log"
    wait_for(
        lambda: (
            drain(path) or sum(1 for line in _lines(path) if line["message"].startswith("batch-test")) == 300
        ),
        timeout=10,
        what="all 300 lines in the file",
    )


def test_a_poll_is_a_read_of_a_view_its_app_marks_polled_or_a_static_file():
    """activity knows no app's URLs: the URLconf says which view a path
    reaches, and the app marks it (webfarm.core.http.polled)."""
    from webfarm.activity.polling import is_poll

    job, token = "a" * 22, "b" * 22
    for path in [
        f"/progress/{job}/",
        f"/progress/{job}/{token}/",
        "/counters/3.json",
        "/admin/dashboard/live/",
        "/stats/metrics",
        "/static/webfarm_progress/progress.js",
    ]:
        assert is_poll("GET", path) and is_poll("HEAD", path), path
        assert not is_poll("POST", path), path
    for path in [
        "/",
        "/jobs/",
        "/admin/dashboard/",
        "/counters/3",
        f"/progress/{job}/cancel/",
        "/\x00",
        "/counters/" + "9" * 5000 + ".json",  # past int()'s digit limit, and far too long
        "/static/" + "a" * 300,
        None,
    ]:
        assert not is_poll("GET", path), path


def test_a_secret_an_app_names_is_left_out_of_every_log_line():
    from webfarm.core.paths import hide_in_logs, hide_tokens

    job, token = "a" * 22, "b" * 22
    assert (
        hide_tokens(f"GET /progress/{job}/{token}/?x=1 HTTP/1.1")
        == f"GET /progress/{job}/<token>/?x=1 HTTP/1.1"
    )
    assert hide_tokens(f"/progress/{job}/{token}") == f"/progress/{job}/<token>"
    assert hide_tokens(f"/progress/{job}/cancel/") == f"/progress/{job}/cancel/"
    with pytest.raises(ValueError):
        hide_in_logs(argument="token", pattern=r"/x/(\w+)")  # no group says which part is the secret
