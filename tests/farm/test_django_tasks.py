"""Django's Tasks API on a real farm (Celery on Redis, then on memcached):
tasks enqueued in one process run on the Celery worker, report progress
and metadata while they run, and their results, errors and cancels are read
and made from other processes (any node).

tests/harness/django_tasks.py holds the tasks, written with @task."""

import json

import pytest

from tests.harness import processes

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
from progress.api import Job
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
    assert ended["errors"][0][0] == "progress.exceptions.JobCancelled"
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
