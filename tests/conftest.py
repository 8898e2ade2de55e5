import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.harness import processes, scheduling, suites
from tests.harness.web import DEMO_PASSWORD, WebClient

# Where the in-process settings point between tests: a port where nothing
# listens. Each test points them at a memcached of the suite's own
# (progress_on_real_memcached); what runs outside a test (a background thread
# shipping log records after the test ended) reaches nothing, never a farm the
# suite did not start, such as a developer's `make run` on the default address.
NOWHERE = "127.0.0.1:9"


def pytest_configure(config: pytest.Config) -> None:
    # In-process tests never send tasks to a shared broker; the farm tests run
    # real workers on a Redis of their own.
    from celery import current_app
    from django.conf import settings
    from django.test.utils import override_settings

    app = current_app._get_current_object()  # the project's, made as its settings load
    # The read and write URLs too: the demo's settings set them (demofarm/settings.py).
    app.conf.broker_url = app.conf.broker_read_url = app.conf.broker_write_url = "memory://"
    # POOL_FOLLOW: in-process tests name their servers; a test of the pool's
    # changes turns it on (tests/unit/test_pool_plan.py).
    override_settings(
        MEMCACHED={**settings.MEMCACHED, "SERVERS": [NOWHERE], "POOL_FOLLOW": False},
        CACHES={"default": {**settings.CACHES["default"], "LOCATION": [NOWHERE]}},
    ).enable()


# A test's folder is its tier: `make check` runs tests/unit alone, so nothing
# there may start a farm or a browser, and every test elsewhere is marked as
# what it starts (a browser test may serve its pages itself, without a farm).
TIER_MARK = {"unit": None, "demo": None, "farm": "farm", "hosts": "farm", "browser": "browser"}


# First: pytest-xdist's worker reads the xdist_group marks in its own hook of
# this name (it appends the group to each test's id, which is what keeps a
# group on one worker), so the marks must be on before it runs.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    misplaced = []
    for item in items:
        tier = item.path.relative_to(Path(__file__).parent).parts[0]
        marks = {mark.name for mark in item.iter_markers()} & {"farm", "browser"}
        wanted = TIER_MARK.get(tier, "a tier")
        if (wanted is None and marks) or (wanted is not None and wanted not in marks):
            misplaced.append(f"{item.nodeid} (marked {sorted(marks)}, in tests/{tier}/)")
    if misplaced:
        raise pytest.UsageError("tests in the wrong tier's folder:\n  " + "\n  ".join(misplaced))
    scheduling.group_and_order(items)


def pytest_xdist_node_collection_finished(node, ids: list[str]) -> None:
    scheduling.check_grouped(node.config, ids)


def pytest_sessionstart(session: pytest.Session) -> None:
    # Once a run of the demo's suite, before any worker starts
    # (pytest-xdist's workers have workerinput): its pages render with the
    # static files' manifest, and the farms' nodes serve them.
    if suites.running() == suites.DEMO and not hasattr(session.config, "workerinput"):
        processes.collect_static_files()
        processes.templates()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if suites.running() == suites.DEMO and not hasattr(session.config, "workerinput"):
        processes.remove_templates()


@pytest.fixture(scope="session")
def memcached_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real memcached for the unit tests, one per session."""
    process, address = processes.memcached(tmp_path_factory.mktemp("memcached"))
    yield address
    process.stop()


@pytest.fixture(scope="module")
def three_memcached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """Three more real memcached servers, for a module's tests of a pool."""
    started = [processes.memcached(tmp_path_factory.mktemp("pool")) for _ in range(3)]
    yield [address for _, address in started]
    for process, _ in started:
        process.stop()


@pytest.fixture(autouse=True)
def progress_on_real_memcached(settings, memcached_server: str) -> Iterator[str]:
    """Point the progress app and Django's cache at the session's memcached,
    under a namespace of the test's own so tests never see each other's keys."""
    from webfarm.core import counters, revocations, tampering
    from webfarm.core.client import reset_client

    namespace = f"t{uuid.uuid4().hex[:12]}"
    # One process here: what it revokes it knows at once, and its database
    # starts empty, so it reads the revocations table only when a test says
    # (tests/unit/test_revocations.py); query counts stay the request's own.
    revocations.forget_known(refreshed=True)
    # A refusal is logged once a minute per key family: each test starts
    # with none logged yet, whatever the tests before it planted.
    tampering._warned.clear()
    # Password hashing is not under test here and costs a third of a second a login.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [memcached_server], "NAMESPACE": namespace}
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "LOCATION": [memcached_server],
            "KEY_PREFIX": f"{namespace}:dj",
        }
    }
    yield namespace
    _ship_the_tests_log_records()
    # And its counts (count_soon): the sending thread would send them a
    # moment later into the next test's servers, where a silent one counts
    # the send as a failed call (tests/unit/test_health.py marks one down
    # after two).
    counters.flush_soon()
    reset_client()


def _ship_the_tests_log_records() -> None:
    """Records a test logged ship now, into the test's own memcached: none is
    left in the buffer for the shipper thread to write after the settings
    have moved on."""
    import logging

    from webfarm.activity.handler import SiteLogHandler

    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in logging.root.manager.loggerDict)]
    for handler in {h for logger in loggers for h in getattr(logger, "handlers", ())}:
        if isinstance(handler, SiteLogHandler):
            handler.flush()


@pytest.fixture
def alice():
    """A user of the test database (tests that define their own alice use theirs)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("alice", password="x")


@pytest.fixture
def client_and_job(alice):
    """alice's client, getting the answer a browser would where a view raises
    (tests of bad input), and a job of hers."""
    from django.test import Client

    from webfarm.progress import services

    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client, services.create_job(owner=alice, kind="count", title="t", params={})


@pytest.fixture
def alice_client(alice):
    """Django's test client, logged in as alice."""
    from django.test import Client

    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def memcached_broker(memcached_server: str, progress_on_real_memcached: str) -> Iterator[None]:
    """Celery on the test's memcached, as the farm runs by default: a start's
    task send is a put into a memcached queue, counted like the rest."""
    from celery import current_app

    app = current_app._get_current_object()

    before = app.conf.broker_url, app.conf.broker_transport_options
    # The read and write URLs follow (the settings set them to the broker's URL).
    app.conf.broker_url = app.conf.broker_read_url = app.conf.broker_write_url = (
        f"memcached://{memcached_server}"
    )
    app.conf.broker_transport_options = {
        "servers": [memcached_server],
        "namespace": progress_on_real_memcached,
    }
    app._pool, app.amqp._producer_pool = None, None
    yield
    app.conf.broker_url, app.conf.broker_transport_options = before
    app.conf.broker_read_url = app.conf.broker_write_url = before[0]
    app._pool, app.amqp._producer_pool = None, None


@pytest.fixture
def starters(memcached_broker: None) -> list:
    """Logged-in clients of eight users with no job yet, with a CSRF cookie
    ("c" * 32), on the memcached the settings name when it is made."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    made = []
    for n in range(8):
        client = Client()
        client.force_login(get_user_model().objects.create_user(f"starter{n}", password="x"))
        client.cookies["csrftoken"] = "c" * 32
        client.get("/jobs/")  # the session and the user cached, as for anyone who browsed here first
        made.append(client)
    return made


@dataclass
class Farm:
    """One memcached, one Redis broker, one Celery worker, two web nodes."""

    dir: Path
    broker: str
    env: dict
    node_a: str
    node_b: str
    memcached: processes.Process
    memcached_address: str
    worker: processes.Process
    others: list = field(default_factory=list)

    def client(self, username: str) -> WebClient:
        return WebClient(self.node_a).login(username, DEMO_PASSWORD)

    def replace(self, old: processes.Process, new: processes.Process) -> None:
        """A test restarted one of the farm's processes: stop the new one at the end."""
        self.others.remove(old)
        if new not in self.others:
            self.others.append(new)
        if old is self.worker:
            self.worker = new
        if old is self.memcached:
            self.memcached = new


@pytest.fixture(scope="session", params=["redis", "memcached"])
def farm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    """The farm with Celery on Redis, then the same farm with Celery on memcached."""
    base = tmp_path_factory.mktemp(f"farm-{request.param}")
    with processes.stopped_after() as started:
        mc, mc_address = processes.memcached(base)
        started.append(mc)
        if request.param == "redis":
            broker, broker_url = processes.redis(base)
            started.append(broker)
        else:
            broker_url = f"memcached://{mc_address}"
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{base / 'farm.sqlite3'}",
            "MEMCACHED_SERVERS": mc_address,
            "CELERY_BROKER_URL": broker_url,
            "CELERY_TASK_DEFAULT_QUEUE": "farmtest",
            "MEMCACHED_NAMESPACE": "farmtest",
            "DJANGO_SECRET_KEY": "farm-test-" + uuid.uuid4().hex,
            "DEMO_PASSWORD": DEMO_PASSWORD,
            # Small enough to generate in seconds. A whole report is 3,600
            # chunks: 5 s of a core and 7 s of waits, as on a distant
            # database, long enough to be watched and cancelled without
            # taking the cores the other tests need.
            "DEMO_ORDERS": "120000",
            "REPORTS_CHUNK_ROWS": "100",
            "REPORTS_CHUNK_PAUSE": "0.002",
            "PROGRESS_HEARTBEAT_INTERVAL": "2",
            "DASHBOARD_WORKER_HEARTBEAT": "1",
            "DASHBOARD_CHART_TTL": "1",
            "ACTIVITY_LOG_FILE": str(base / "activity.log"),
            # Tests share alice and bob and start several jobs each; the limits
            # themselves are tested with fresh users (test_failures.py).
            "REPORTS_PER_USER": "4",
            "REPORTS_PER_KIND": "50",
            # Every report runs whole here, as one task: the tests of this farm
            # are about one job on one worker. tests/farm/test_fanout.py runs the
            # sales report in parts, on a farm of its own.
            "REPORTS_PART_ROWS": "0",
        }
        processes.migrated_and_seeded(env)
        worker = processes.celery_worker(env, base, "worker-a")
        started.append(worker)
        node_a, url_a = processes.gunicorn(env, base, "node-a")
        started.append(node_a)
        node_b, url_b = processes.gunicorn(env, base, "node-b")
        started.append(node_b)
        yield Farm(
            dir=base,
            broker=request.param,
            env=env,
            node_a=url_a,
            node_b=url_b,
            memcached=mc,
            memcached_address=mc_address,
            worker=worker,
            others=started,
        )
