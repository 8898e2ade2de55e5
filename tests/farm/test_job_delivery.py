"""No job waits forever and none runs twice at once, on real processes: a
memcached broker restarted under a queued task, a web process that died
before sending one, a task delivered twice, a stalled run the reaper took for
lost, a broker too full to take a task."""

import os
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness import processes
from tests.harness.web import DEMO_PASSWORD, WebClient

pytestmark = pytest.mark.farm

ALL_DATES = {"date_from": "2024-01-01", "date_to": "2025-12-31"}
JSON = {"Accept": "application/json"}
# A report that runs whole, as one task (the sales report runs in parts: tests/farm/test_fanout.py):
# half a year of orders, 300 chunks, runs long enough to be caught running and no longer.
WHOLE = {"date_from": "2025-01-01", "date_to": "2025-06-30", "min_units": 10}


@dataclass
class Delivery:
    dir: Path
    env: dict
    memcached: processes.Process
    port: int
    node: str

    def client(self) -> WebClient:
        return WebClient(self.node).login("alice", DEMO_PASSWORD)

    def worker(self, name: str) -> processes.Process:
        return processes.celery_worker(self.env, self.dir, name, concurrency=1)

    def shell(self, code: str) -> str:
        return processes.manage(self.env, "shell", "-c", code).strip().splitlines()[-1]

    def state(self, job: str) -> str:
        return self.shell(
            f"from webfarm.progress.models import Job; print(Job.objects.get(pk={job!r}).state)"
        )


@pytest.fixture(scope="module")
def delivery(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Delivery]:
    """memcached as store and broker (-M), one web node, no worker yet; the
    reaper runs every second with short waits for queued jobs."""
    base = tmp_path_factory.mktemp("delivery")
    with processes.stopped_after() as started:
        mc, address = processes.memcached(base, extra=["-M"])
        started.append(mc)
        env = processes.one_memcached_env(
            base,
            address,
            "delivery",
            CELERY_BROKER_VISIBILITY_TIMEOUT=4,
            DEMO_ORDERS=60000,
            # 3,600 chunks: 5 s of a core and 7 s of waits, a run long enough to stall.
            REPORTS_CHUNK_ROWS=50,
            REPORTS_CHUNK_PAUSE=0.002,
            PROGRESS_HEARTBEAT_INTERVAL=1,
            REAP_EVERY=1,
            PROGRESS_SEND_GRACE=2,
            PROGRESS_RESEND_AFTER=600,
            PROGRESS_QUEUED_LOST_AFTER=600,
            REPORTS_PER_USER=10,
            REPORTS_PER_KIND=10,
        )
        processes.migrated_and_seeded(env)
        web, url = processes.gunicorn(env, base, "delivery-node")
        started.append(web)
        farm = Delivery(dir=base, env=env, memcached=mc, port=int(address.rsplit(":", 1)[1]), node=url)
        yield farm
        started.append(farm.memcached)  # a test may have replaced it


def _beat_and_worker(farm: Delivery, name: str) -> list[processes.Process]:
    return [processes.celery_beat(farm.env, farm.dir, f"beat-{name}"), farm.worker(name)]


def test_a_task_lost_with_a_restarted_memcached_broker_is_sent_again(delivery):
    alice = delivery.client()
    job = alice.start_report("sales-by-region", ALL_DATES, node=delivery.node)["job"]
    # No worker yet: the task waits in memcached, which restarts and forgets it.
    delivery.memcached.stop(signal.SIGKILL)
    delivery.memcached, _ = processes.memcached(delivery.dir, port=delivery.port, extra=["-M"])
    with processes.stopped_after() as started:
        started += _beat_and_worker(delivery, "resend")
        done = alice.wait_until(job, lambda p: p["final"], timeout=90, what="the job sent again to finish")
        assert done["state"] == "succeeded"
        assert "lost by memcached): its task was sent again" in started[1].log()


def test_a_job_whose_web_process_died_before_sending_is_started(delivery):
    job = delivery.shell(
        "from django.contrib.auth import get_user_model; from webfarm.progress import services; "
        "alice = get_user_model().objects.get(username='alice'); "
        "print(services.create_job(owner=alice, kind='top-customers', title='t', "
        "params={'date_from': '2024-01-01', 'date_to': '2025-12-31', 'top': 5, 'region': ''}).id)"
    )
    with processes.stopped_after() as started:
        started += _beat_and_worker(delivery, "outbox")
        done = delivery.client().wait_until(job, lambda p: p["final"], timeout=90, what="the job to run")
        assert done["state"] == "succeeded"
        assert "(never sent): its task was sent again" in started[1].log()


def test_a_task_delivered_twice_runs_its_job_once(delivery):
    """The running job's task delivered again, to a second worker (on a
    queue of its own, so it takes nothing else): refused, and the first
    run ends the job once."""
    alice = delivery.client()
    with processes.stopped_after() as started:
        first = delivery.worker("first")
        second = processes.celery_worker(delivery.env, delivery.dir, "second", queues="second-delivery")
        started += [first, second]
        job = alice.start_report("return-rates", WHOLE, node=delivery.node)["job"]
        alice.wait_until(job, lambda p: p["state"] == "running", timeout=60, what="the first run")
        delivery.shell(
            "from webfarm.progress.tasks import run_job; "
            f"run_job.apply_async(args=[{job!r}], queue='second-delivery')"
        )
        processes.wait_for(
            lambda: f"job {job} not run: job {job} is running" in second.log(),
            timeout=30,
            what="the second delivery to be refused",
        )
        assert alice.wait_until(job, lambda p: p["final"], timeout=300)["state"] == "succeeded"
        # The bar shows the end a moment before the worker logs it.
        ended = f"job {job} ended: succeeded"
        processes.wait_for(lambda: ended in first.log() + second.log(), timeout=30, what="its last line")
        assert (first.log() + second.log()).count(ended) == 1


def test_a_stalled_run_the_reaper_took_for_lost_never_writes_over_it(delivery):
    alice = delivery.client()
    with processes.stopped_after() as started:
        stalled = delivery.worker("stalled")
        started.append(stalled)
        job = alice.start_report("return-rates", WHOLE, node=delivery.node)["job"]
        alice.wait_until(job, lambda p: p["state"] == "running" and p["percent"] > 1, timeout=60)
        os.killpg(stalled.proc.pid, signal.SIGSTOP)  # hung: no heartbeat, no progress
        try:
            started += _beat_and_worker(delivery, "rescuer")
            lost = alice.wait_until(job, lambda p: p["state"] == "lost", timeout=60, what="the reaper")
            assert lost["retried_as"]
        finally:
            os.killpg(stalled.proc.pid, signal.SIGCONT)
        processes.wait_for(
            lambda: f"job {job} ended elsewhere" in stalled.log(),
            timeout=30,
            what="the stalled run to notice and stop",
        )
        # Its record and row stay lost: the run that woke up wrote nothing over them.
        assert alice.progress(job)["state"] == "lost" and delivery.state(job) == "lost"
        retry = alice.wait_until(lost["retried_as"], lambda p: p["final"], timeout=120, what="the retry")
        assert retry["state"] == "succeeded"
        assert alice.progress(job)["state"] == "lost"


def test_a_run_whose_process_lives_is_never_taken_for_lost(delivery):
    """A task in a C call that holds the GIL for 8 s, over twice the lost
    bound (3 s): its heartbeat thread cannot beat, but its worker's main
    process says its process lives. The reaper, on a worker of its own and
    running before the task starts, waits for it (and says so) the whole
    time; it ends succeeded, run once."""
    reaping = {**delivery.env, "HOUSEKEEPING_QUEUE": "lives-reaper"}
    with processes.stopped_after() as started:
        started.append(processes.celery_beat(reaping, delivery.dir, "beat-lives"))
        reaper = processes.celery_worker(reaping, delivery.dir, "lives-reaper", queues="lives-reaper")
        started.append(reaper)
        started.append(delivery.worker("gil-holder"))
        result = delivery.shell(
            "from django.contrib.auth import get_user_model\n"
            "from webfarm.djangotasks.owners import owned_by\n"
            "from tests.harness import django_tasks as tasks\n"
            "with owned_by(get_user_model().objects.get(username='alice')):\n"
            "    print(tasks.hold_the_gil.enqueue(8).id)"
        )
        status = (
            "from webfarm.djangotasks.compat import task_backends\n"
            f"r = task_backends['default'].get_result({result!r}); print(r.status, r.attempts)"
        )
        ended = processes.wait_for(
            lambda: (seen := delivery.shell(status)).split()[0] in ("SUCCESSFUL", "FAILED") and seen,
            timeout=90,
            interval=0.5,
            what="the task to end",
        )
        assert ended == "SUCCESSFUL 1", ended
        said = reaper.log()
        assert f"job {result}: silent, but its process" in said
        assert f"job {result}: silent, and its process" not in said
        # This job only: the module's other tests lose jobs on purpose.
        counts = (
            "from webfarm.progress.models import Job as J; "
            f"print(J.objects.get(pk={result!r}).state, J.objects.filter(retry_of={result!r}).count())"
        )
        assert delivery.shell(counts) == "succeeded 0"


def test_a_broker_too_full_to_take_the_task_gets_503_and_frees_everything(tmp_path):
    with processes.stopped_after() as started:
        store, store_address = processes.memcached(tmp_path)
        broker, broker_address = processes.memcached(tmp_path, memory_mb=2, extra=["-M"])
        started += [store, broker]
        env = processes.one_memcached_env(
            tmp_path,
            store_address,
            "full",
            CELERY_BROKER_URL=f"memcached://{broker_address}",  # a broker of its own, 2 MB, -M
            DEMO_ORDERS=100,
            REPORTS_PER_USER=1,  # a start that kept its slot would block the next one
        )
        processes.migrated_and_seeded(env)
        web, url = processes.gunicorn(env, tmp_path, "full-node")
        started.append(web)
        _fill(broker_address)
        alice = WebClient(url).login("alice")
        refused = alice.post("/reports/sales-by-region/", ALL_DATES, headers=JSON)
        assert refused.status_code == 503 and int(refused.headers["Retry-After"]) > 0
        assert "full" in refused.json()["error"]
        page = alice.post("/reports/sales-by-region/", ALL_DATES)  # a browser gets a page saying so
        assert page.status_code == 503 and "full" in page.text
        states = processes.manage(
            env,
            "shell",
            "-c",
            "from webfarm.progress.models import Job; "
            "print(sorted(set(Job.objects.values_list('state', flat=True))))",
        )
        assert "['failed']" in states  # no job left queued
        _empty(broker_address)
        assert alice.post("/reports/sales-by-region/", ALL_DATES, headers=JSON).status_code == 202


def _fill(address: str) -> None:
    """Write until a -M memcached refuses values of every size: what a day of
    traffic would do (memcached keeps memory per size class)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        for size in (60_000, 8_000, 2_000, 900, 400, 150, 50):
            value = b"x" * size
            for i in range(100_000):
                sock.sendall(b"set filler:%d:%d 0 0 %d\r\n%s\r\n" % (size, i, size, value))
                if sock.recv(256).startswith(b"SERVER_ERROR"):
                    break
            else:
                raise AssertionError("memcached never filled up")


def _empty(address: str) -> None:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"flush_all\r\n")
        assert sock.recv(64).startswith(b"OK")
