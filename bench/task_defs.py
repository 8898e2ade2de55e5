"""The tasks bench.tasks enqueues: the same body on each backend (a Task
belongs to one), and a loop with and without progress on ours."""

import time
from dataclasses import dataclass

from celery import shared_task
from django.db import models
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from webfarm.djangotasks.compat import task
from webfarm.progress.api import JobResult, job_type
from webfarm.progress.models import Job


def _started() -> float:
    return time.time()


@task(backend="default")
def ours_stamp() -> float:
    return _started()


@task(backend="db")
def db_stamp() -> float:
    return _started()


@task(backend="fennel")
def fennel_stamp() -> float:
    return _started()


@shared_task(ignore_result=False)
def bare_stamp() -> float:
    """The floor: a plain Celery task, its result in the result backend."""
    return _started()


@job_type("bench-report", title="Bench report", noun="report", stages=[("reading", 90), ("writing", 10)])
def bench_report(*, job: Job, params: dict, tracker: object) -> JobResult:
    """A report job with nothing to read: what remains is its bookkeeping
    (its start, its stages and its end), which bench.task_path measures."""
    reporter = tracker.reporter  # type: ignore[attr-defined]
    reporter.stage("reading", total=1)
    reporter.update(1)
    reporter.stage("writing", total=1)
    return JobResult(summary="nothing read", value=_started())


@dataclass(frozen=True)
class Table:
    """A row's table, as the floor writes it: its model and its words."""

    model: type[models.Model]
    state: str
    value: str
    running: str
    ended: str


# Ours (the job row), and django-tasks-db's.
TABLES = {
    "job": Table(Job, "state", "value", "running", "succeeded"),
    "db": Table(DBTaskResult, "status", "return_value", "RUNNING", "SUCCESSFUL"),
}


@shared_task(ignore_result=False)
def bare_row_stamp(job_id: str, table: str) -> float:
    """The floor of a durable task on Celery: a plain Celery task whose row
    is written as django-tasks-db writes its own, at enqueue (the caller's
    INSERT, new_row), at start and at the end: what any node can read, and
    what outlives a lost broker message. `table`: a key of TABLES."""
    t = TABLES[table]
    rows = t.model.objects.filter(pk=job_id)
    rows.update(**{t.state: t.running, "started_at": timezone.now()})
    started = _started()
    rows.update(**{t.state: t.ended, "finished_at": timezone.now(), t.value: started})
    return started


def new_row(table: str) -> str:
    """A queued row, as each backend's enqueue() writes it."""
    if table == "job":
        return Job.objects.create(kind="bench").pk
    row = DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path="bench.task_defs.bare_row_stamp",
        queue_name="default",
        run_after=timezone.now(),
        backend_name="bare",
    )
    return str(row.pk)


@task(backend="default")
def plain_loop(n: int) -> float:
    """Seconds n steps of work take, with nothing reported."""
    began = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - began


@task(backend="default", takes_context=True)
def reported_loop(context, n: int) -> float:
    """The same steps, each reported to the bar and saved as metadata."""
    began = time.perf_counter()
    total = 0
    context.progress.stage("looping", total=n)
    for i in range(n):
        total += i * i
        context.progress.update(i + 1)
        context.metadata["step"] = i + 1
        context.save_metadata()
    return time.perf_counter() - began
