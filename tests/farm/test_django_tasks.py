"""Django's Tasks API on a real farm (Celery on Redis, then on memcached):
tasks enqueued in one process run on the Celery worker, report progress
and metadata while they run, and their results, errors and cancels are read
and made from other processes (any node).

tests/harness/django_tasks.py holds the tasks, written with @task."""

import json
import signal
import time

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from tests.harness import processes
from tests.harness.marks import one_broker

pytestmark = pytest.mark.farm

# Run in a process of the farm's (as a web node would): prints one JSON line.
PRELUDE = """
import json
from django.contrib.auth import get_user_model
from webfarm.djangotasks.compat import task_backends
from webfarm.djangotasks.owners import owned_by
from tests.harness import django_tasks as tasks
backend = task_backends["default"]
def show(result):
    print(json.dumps({
        "id": result.id, "status": str(result.status), "metadata": result.metadata,
        "progress": {k: result.progress.get(k) for k in ("percent", "stage", "state")},
        "value": result.return_value if result.status == "SUCCESSFUL" else None,
        "errors": [[e.exception_class_path, e.traceback] for e in result.errors],
        "workers": result.worker_ids, "attempts": result.attempts,
        "started": result.started_at is not None, "finished": result.finished_at is not None,
    }))
"""


def _run(farm, code: str) -> dict:
    out = processes.manage(farm.env, "shell", "--no-imports", "-c", PRELUDE + code)
    return json.loads(out.strip().splitlines()[-1])


def _enqueue(farm, call: str) -> dict:
    return _run(
        farm,
        f"""
with owned_by(get_user_model().objects.get(username="alice")):
    show({call})
""",
    )


def _result(farm, result_id: str) -> dict:
    return _run(farm, f"show(backend.get_result({result_id!r}))")


def _until(farm, result_id: str, done, what: str) -> dict:
    """The result once `done` says so, or once it finished (the caller's
    asserts then say what went wrong)."""
    seen: dict = {}

    def look() -> bool:
        seen.clear()
        seen.update(_result(farm, result_id))
        return done(seen) or seen["status"] in {"SUCCESSFUL", "FAILED"}

    processes.wait_for(look, timeout=60, interval=0.3, what=what)
    return seen


def test_a_task_runs_on_the_worker_and_any_process_reads_its_result(farm):
    enqueued = _enqueue(farm, "tasks.count_to.enqueue(50, label='apples')")
    assert enqueued["status"] == "READY" and not enqueued["started"]
    done = _until(farm, enqueued["id"], lambda r: r["status"] == "SUCCESSFUL", "the task to succeed")
    assert done["value"] == {"apples": 50, "attempt": 1}
    assert done["metadata"] == {"counted": 50}
    assert done["progress"] == {"percent": 100.0, "stage": "counting", "state": "succeeded"}
    assert done["attempts"] == 1 and done["workers"][0].startswith(f"{farm.worker.name}@")
    assert done["started"] and done["finished"] and done["errors"] == []
    # The worker sent task_started and task_finished (django_tasks logs them).
    log = farm.worker.log()
    assert f"Task id={enqueued['id']} path=tests.harness.django_tasks.count_to state=RUNNING" in log
    assert f"Task id={enqueued['id']} path=tests.harness.django_tasks.count_to state=SUCCESSFUL" in log
    # What the task left is kept in the job's row as well as in memcached.
    kept = _run(
        farm,
        f"""
from webfarm.progress.api import Job
job = Job.objects.get(pk={enqueued["id"]!r})
print(json.dumps([job.value, job.metadata, job.worker]))
""",
    )
    assert kept == [{"apples": 50, "attempt": 1}, {"counted": 50}, done["workers"][0]]


def test_a_running_task_shows_its_metadata_and_stops_when_cancelled(farm):
    enqueued = _enqueue(farm, "tasks.wait_until_cancelled.enqueue()")
    running = _until(
        farm,
        enqueued["id"],
        lambda r: r["status"] == "RUNNING" and r["metadata"].get("beats", 0) >= 3,
        "the task to run and save its metadata",
    )
    assert running["progress"]["state"] == "running" and running["progress"]["stage"] == "waiting"
    cancelled = _run(farm, f"show(backend.cancel({enqueued['id']!r}))")
    assert cancelled["status"] in {"RUNNING", "FAILED"}
    ended = _until(farm, enqueued["id"], lambda r: r["status"] == "FAILED", "the cancelled task to stop")
    assert ended["errors"][0][0] == "webfarm.progress.exceptions.JobCancelled"
    assert ended["progress"]["state"] == "cancelled"


def test_a_failing_task_says_which_exception_with_its_traceback(farm):
    enqueued = _enqueue(farm, "tasks.divide.enqueue(1, 0)")
    ended = _until(farm, enqueued["id"], lambda r: r["status"] == "FAILED", "the task to fail")
    (path, traceback), *_ = ended["errors"]
    assert path == "builtins.ZeroDivisionError"
    assert "ZeroDivisionError" in traceback and "return a / b" in traceback


def test_an_async_task_runs_too(farm):
    enqueued = _enqueue(farm, "tasks.add_later.enqueue(2, 3)")
    done = _until(farm, enqueued["id"], lambda r: r["status"] == "SUCCESSFUL", "the async task")
    assert done["value"] == 5


@one_broker
def test_a_task_over_its_time_limit_is_stopped_and_says_so(farm):
    # A backend whose OPTIONS give its tasks 1 s: the limit travels with the task to the worker.
    enqueued = _run(
        farm,
        """
from webfarm.djangotasks.backend import CeleryBackend
short = CeleryBackend("default", {"OPTIONS": {"TIME_LIMIT": 1}})
with owned_by(get_user_model().objects.get(username="alice")):
    show(short.enqueue(tasks.wait_until_cancelled, [], {}))
""",
    )
    ended = _until(farm, enqueued["id"], lambda r: r["status"] == "FAILED", "the time limit")
    (path, traceback), *_ = ended["errors"]
    # Celery's SoftTimeLimitExceeded, which is billiard's class: the path names where it is defined.
    assert path == f"{SoftTimeLimitExceeded.__module__}.{SoftTimeLimitExceeded.__qualname__}"
    assert "context.save_metadata()" in traceback or "time.sleep(beats)" in traceback
    assert ended["progress"]["state"] == "failed" and ended["metadata"]["beats"] > 3
    kept = _run(
        farm,
        "from webfarm.progress.api import Job; "
        f"print(json.dumps(Job.objects.get(pk={enqueued['id']!r}).error))",
    )
    assert kept == "The job took longer than its time limit and was stopped."


# The reaper reads records, not the broker: one broker is enough.
@one_broker
def test_a_task_whose_worker_is_killed_is_failed_as_lost_not_left_running(farm):
    """SIGKILL the worker running a task: the reaper (a real celery beat)
    ends it FAILED, naming JobLost, within the heartbeat bound; the metadata
    it saved last is still there. A task is not run again on its own (it may
    not be safe to): the caller enqueues it again if it is."""
    beat = processes.celery_beat({**farm.env, "REAP_EVERY": "1"}, farm.dir, f"beat-tasks-{farm.broker}")
    try:
        enqueued = _enqueue(farm, "tasks.wait_until_cancelled.enqueue()")
        running = _until(
            farm,
            enqueued["id"],
            lambda r: r["status"] == "RUNNING" and r["metadata"].get("beats", 0) >= 3,
            "the task to run",
        )
        other = processes.celery_worker(farm.env, farm.dir, f"worker-t-{farm.broker}")
        farm.others.append(other)
        farm.worker.stop(signal.SIGKILL)
        farm.replace(farm.worker, other)
        killed_at = time.monotonic()
        lost = _until(farm, enqueued["id"], lambda r: r["status"] == "FAILED", "the task to be declared lost")
        took = time.monotonic() - killed_at
        # PROGRESS_HEARTBEAT_INTERVAL 2 s x 3 beats, a reaper every second, and slack.
        assert lost["status"] == "FAILED" and took < 15, (lost, took)
        (path, reason), *_ = lost["errors"]
        assert path == "webfarm.progress.exceptions.JobLost" and "worker running this job stopped" in reason
        assert lost["progress"]["state"] == "lost"
        assert lost["metadata"]["beats"] >= running["metadata"]["beats"]
        assert lost["workers"] == running["workers"] and lost["attempts"] == 1
        # task_finished, from the worker whose reaper ended it (django_tasks logs it).
        ended = f"Task id={enqueued['id']} path=tests.harness.django_tasks.wait_until_cancelled state=FAILED"
        processes.wait_for(lambda: ended in other.log(), timeout=10, what="task_finished for the lost task")
        # The new worker takes tasks.
        after = _enqueue(farm, "tasks.divide.enqueue(6, 3)")
        done = _until(farm, after["id"], lambda r: r["status"] == "SUCCESSFUL", "a task after the kill")
        assert done["value"] == 2.0
    finally:
        beat.stop()
