"""The tasks bench.tasks enqueues: the same body on each backend (a Task
belongs to one), and a loop with and without progress on ours."""

import time

from celery import shared_task

from webfarm.djangotasks.compat import task


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
