"""Celery on the memcached broker with real worker processes: countdowns,
retries, and acks_late tasks coming back after their worker is killed."""

import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pymemcache.client.base import Client

from tests.harness import full, processes
from tests.harness.processes import wait_for
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm
SECRET = "broker-test-" + uuid.uuid4().hex


class Broker:
    def __init__(self, base, address: str) -> None:
        self.base = base
        self.address = address
        self.env = {
            **os.environ,
            "MEMCACHED_SERVERS": address,
            "CELERY_BROKER_URL": f"memcached://{address}",
            "CELERY_BROKER_VISIBILITY_TIMEOUT": "3",
            "CELERY_TASK_DEFAULT_QUEUE": "brokertest",
            "MEMCACHED_NAMESPACE": "brokertest",
            "DATABASE_URL": f"sqlite:///{base / 'db.sqlite3'}",
            "DJANGO_SECRET_KEY": SECRET,
        }

    def worker(self, name: str) -> processes.Process:
        return processes.celery_worker(
            self.env, self.base, name, concurrency=1, include="tests.harness.celery_tasks"
        )

    def send(self, task: str, *args: object, **options: object) -> None:
        processes.manage(
            self.env,
            "shell",
            "-c",
            f"from demofarm.celery import app; app.send_task({task!r}, args={list(args)!r}, "
            f"queue='brokertest', **{options!r})",
        )

    @contextmanager
    def _raw(self) -> Iterator[Client]:
        host, port = self.address.split(":")
        client = Client((host, int(port)))
        try:
            yield client
        finally:
            client.close()

    def notes(self, key: str) -> list[str]:
        with self._raw() as client:
            raw = client.get(f"brokertest:brokertest:{key}") or b""
        return [n for n in raw.decode().split(",") if n]

    def let_go(self, key: str) -> None:
        with self._raw() as client:
            client.set(f"brokertest:brokertest:{key}:go", b"1")


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Broker]:
    base = tmp_path_factory.mktemp("broker")
    mc, address = processes.memcached(base, extra=["-M"])
    try:
        yield Broker(base, address)
    finally:
        mc.stop()


def test_countdown_runs_the_task_when_due(broker):
    worker = broker.worker("countdown")
    try:
        key = uuid.uuid4().hex
        sent = time.time()
        broker.send("brokertest.stamp", key, countdown=2)
        notes = wait_for(lambda: broker.notes(key), timeout=30, what="the delayed task")
        assert float(notes[0]) - sent >= 2.0
    finally:
        worker.stop()


def test_retries_run_again_until_they_succeed(broker):
    worker = broker.worker("retry")
    try:
        key = uuid.uuid4().hex
        broker.send("brokertest.flaky", key)
        wait_for(lambda: len(broker.notes(key)) >= 3, timeout=30, what="three tries")
        assert broker.notes(key) == ["try0", "try1", "try2"]
    finally:
        worker.stop()


def test_a_killed_workers_acks_late_task_is_redelivered(broker):
    first = broker.worker("doomed")
    key = uuid.uuid4().hex
    broker.send("brokertest.hold", key)
    wait_for(lambda: broker.notes(key) == ["first"], timeout=30, what="the task to start")
    first.stop(signal.SIGKILL)  # the worker and its pool, mid-task, no goodbye

    second = broker.worker("heir")
    try:
        wait_for(lambda: "redelivered" in broker.notes(key), timeout=30, what="redelivery")
        broker.let_go(key)
        wait_for(lambda: broker.notes(key)[-1:] == ["done"], timeout=30, what="the task to finish")
        assert broker.notes(key) == ["first", "redelivered", "done"]
    finally:
        second.stop()


def test_a_message_that_is_no_task_goes_to_the_dead_letters_and_the_worker_goes_on(broker, settings):
    from webfarm.core.client import build_client
    from webfarm.queues.queue import DeadLetter, Queue

    settings.SECRET_KEY = SECRET  # the farm's key: what this test puts is the farm's own
    queue = Queue("brokertest", ring=build_client([broker.address], "brokertest:broker"))
    # Signed by the farm but not a kombu message, and one planted without a MAC.
    queue.put_many([b"[]", b'{"properties": "no"}', b"{" * 5000])
    gen = queue.layout.generation()
    with broker._raw() as raw:
        index = raw.incr(f"brokertest:broker:q:brokertest:{gen}:tail", 1)
        raw.set(
            f"brokertest:broker:q:brokertest:{gen}:m:{index}",
            b"M0 1.000 " + b"0" * 32 + b'\n{"body": "evil"}',
        )
    worker = broker.worker("after-poison")
    try:
        key = uuid.uuid4().hex
        broker.send("brokertest.stamp", key)
        wait_for(lambda: broker.notes(key), timeout=30, what="the real task behind the bad ones")
        assert worker.alive()
        dead = [DeadLetter.from_json(m.body) for m in queue.dead_letters().peek(10)]
        assert len(dead) == 4
        reasons = sorted(d.reason.split(":")[0] for d in dead)
        no_properties = "not a kombu message (no properties)"
        assert reasons == sorted(["bad MAC", "not JSON", no_properties, no_properties])
    finally:
        worker.stop()


@pytest.mark.parametrize(
    ("given", "first", "servers"),
    [
        ("memcached://", "10.9.0.1:11211", ["10.9.0.1:11211", "10.9.0.2:11211"]),
        ("memcached://10.9.0.2:11211,10.9.0.1:11211", "10.9.0.2:11211", ["10.9.0.2:11211", "10.9.0.1:11211"]),
    ],
)
def test_celery_connects_where_the_settings_say_whatever_the_environment_holds(given, first, servers):
    """Celery reads CELERY_BROKER_URL from the environment itself, ahead of
    the settings that turn the memcached forms into a URL kombu can parse: a
    process must still connect to the farm's servers, never to localhost."""
    env = {
        **processes.with_secret_key(None),
        "CELERY_BROKER_URL": given,
        "MEMCACHED_SERVERS": "10.9.0.1:11211,10.9.0.2:11211",
    }
    code = (
        "from demofarm.celery import app; c = app.connection_for_write(); r = app.connection_for_read(); "
        "print(f'{c.hostname}:{c.port}', f'{r.hostname}:{r.port}', ','.join(c.transport_options['servers']))"
    )
    out = subprocess.run(
        [str(processes.BIN / "python"), "-c", code],
        env=env,
        cwd=processes.ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    write, read, listed = out.stdout.split()
    assert write == read == first
    assert listed.split(",") == servers
    assert "localhost" not in out.stdout + out.stderr


def _broker_apart(
    base, started: list, name: str, **memcached_options: object
) -> tuple[Broker, processes.Process, processes.Process, str]:
    """A `-c 1` worker whose broker has a memcached of its own (the store's
    is another): the broker's can be stopped or filled alone."""
    store, store_address = processes.memcached(base)
    started.append(store)
    broker_mc, broker_address = processes.memcached(base, **memcached_options)
    started.append(broker_mc)
    broker = Broker(base, store_address)
    broker.env["CELERY_BROKER_URL"] = f"memcached://{broker_address}"
    worker = broker.worker(name)
    started.append(worker)
    return broker, worker, broker_mc, broker_address


def test_the_dashboard_counts_the_brokers_queue_on_its_own_memcached(tmp_path):
    """The broker on a memcached of its own, the store on another: the staff
    dashboard, from a web node, counts Celery's queue where it lives (three
    tasks in, three out), not as an empty queue of the main ring."""
    with processes.stopped_after() as started:
        broker, _, _, _ = _broker_apart(tmp_path, started, "counted")
        env = {**broker.env, "DEMO_PASSWORD": DEMO_PASSWORD, "DEMO_ORDERS": "100"}
        processes.migrated_and_seeded(env)
        keys = [uuid.uuid4().hex for _ in range(3)]
        processes.manage(
            env,
            "shell",
            "-c",
            "from demofarm.celery import app\n"
            f"for key in {keys!r}: app.send_task('brokertest.stamp', args=[key], queue='brokertest')",
        )
        wait_for(lambda: all(broker.notes(key) for key in keys), timeout=60, what="the three tasks")
        node, url = processes.gunicorn(env, tmp_path, "counted-node")
        started.append(node)
        admin = WebClient(url).login("admin", DEMO_PASSWORD)

        def counted() -> tuple[str, tuple[int, ...]]:
            page = admin.get("/admin/dashboard/live/").text
            assert 'data-queue="brokertest"' not in page  # nothing of it on the main ring
            row = page[page.index('data-queue="broker:brokertest"') :].split("</tr>")[0]
            return row, tuple(int(n) for n in re.findall(r">(\d+)</td>", row)[:4])

        row, (waiting, _, put_in, taken_out) = counted()
        assert waiting == 0 and put_in >= 3 and taken_out >= 3, row
        # An acked message counts as unfinished until the worker's next
        # recovery scan moves the queue's floor past it (every second while it
        # polls; later on a loaded machine): docs/queue.md.
        wait_for(lambda: counted()[1][1] == 0, timeout=30, what="the floor past the three acked tasks")


def test_a_worker_that_fails_an_ack_while_memcached_restarts_takes_tasks_again(tmp_path):
    """A `-c 1` worker finishes its task while the broker's memcached is down:
    the ack cannot reach it. Once memcached is back (empty, as after a
    restart) the worker takes the next task: a failed ack must not keep its
    one prefetch slot for good (a chaos run saw workers go deaf)."""
    with processes.stopped_after() as started:
        broker, worker, broker_mc, broker_address = _broker_apart(tmp_path, started, "restarted")
        key = uuid.uuid4().hex
        broker.send("brokertest.hold", key)
        wait_for(lambda: broker.notes(key) == ["first"], timeout=30, what="the task to start")

        broker_mc.stop(signal.SIGKILL)  # the broker's memcached goes away mid-task
        broker.let_go(key)
        wait_for(lambda: broker.notes(key)[-1:] == ["done"], timeout=30, what="the task to finish")
        wait_for(
            lambda: "not acknowledged" in worker.log() or "Couldn't ack" in worker.log(),
            timeout=30,
            what="the failed ack",
        )

        port = int(broker_address.rsplit(":", 1)[1])
        revived, _ = processes.memcached(tmp_path, port=port)
        started.append(revived)
        started_at = time.monotonic()
        after = uuid.uuid4().hex
        broker.send("brokertest.stamp", after)
        wait_for(
            lambda: broker.notes(after), timeout=60, what="the next task on the worker that failed an ack"
        )
        print(f"the next task ran {time.monotonic() - started_at:.1f} s after memcached came back")
        assert worker.alive()


def test_a_worker_polling_a_full_memcached_lives_and_takes_tasks_once_there_is_room(tmp_path):
    """The broker's memcached (-M) full: a claim it cannot record is no task
    now, not an error that stops the worker. Found by the chaos run: kombu
    took the QueueFull of a claim for unrecoverable, and the worker exited."""
    with processes.stopped_after() as started:
        broker, worker, _, broker_address = _broker_apart(
            tmp_path, started, "crowded", memory_mb=8, extra=["-M"]
        )
        before = uuid.uuid4().hex
        broker.send("brokertest.stamp", before)
        wait_for(lambda: broker.notes(before), timeout=30, what="a task before the broker is full")

        filler = full.fill(broker_address, expire=600)
        wait_for(
            lambda: "no task claimed" in worker.log() or not worker.alive(),
            timeout=60,
            what="the worker's poll to meet the full memcached",
        )
        assert worker.alive(), worker.log()[-3000:]
        assert "Unrecoverable error" not in worker.log()

        full.empty(broker_address, filler)
        after = uuid.uuid4().hex
        broker.send("brokertest.stamp", after)
        wait_for(lambda: broker.notes(after), timeout=60, what="a task once the broker has room again")
        assert worker.alive()


def test_a_worker_waits_out_an_absent_broker_with_back_off_and_no_restart_loop(tmp_path):
    """The broker's memcached gone for seconds: the worker says it cannot
    connect and tries again later, as Celery does with any broker. Found by
    the chaos run on hosts: the transport said "Connected" without asking
    memcached, the first poll failed, and the consumer restarted five times
    a second (CRITICAL "Frequent restarts detected") for the whole outage."""
    with processes.stopped_after() as started:
        broker, worker, broker_mc, broker_address = _broker_apart(tmp_path, started, "patient")
        broker_mc.stop(signal.SIGKILL)
        wait_for(
            lambda: worker.log().count("Cannot connect to memcached") >= 2,
            timeout=30,
            what="the worker to retry its connection with a pause between tries",
        )
        log = worker.log()
        assert "Frequent restarts" not in log
        assert log.count("Connection to broker lost") == 1, log[-3000:]

        port = int(broker_address.rsplit(":", 1)[1])
        revived, _ = processes.memcached(tmp_path, port=port)
        started.append(revived)
        after = uuid.uuid4().hex
        broker.send("brokertest.stamp", after)
        wait_for(lambda: broker.notes(after), timeout=60, what="a task once memcached is back")
        assert worker.alive()
