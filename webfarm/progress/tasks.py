import os
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task

from webfarm.progress import retention
from webfarm.progress.launching import running
from webfarm.progress.parts import running as parts


def _worker(task: Task) -> str:
    # The worker's name for the bar, and its process, to tell two runs of one part apart.
    return f"{task.request.hostname}#{os.getpid()}"


def _run_job(self: Task, job_id: str) -> None:
    running.run_job(job_id=job_id, worker=_worker(self))


def _run_part(self: Task, job_id: str, index: int) -> None:
    parts.run_part(job_id=job_id, index=index, worker=_worker(self))


def _merge_job(self: Task, job_id: str) -> None:
    parts.merge(job_id=job_id, worker=_worker(self))


def _reap_lost_jobs() -> None:
    running.reap_lost_jobs()


def _purge_ended_jobs() -> None:
    retention.purge_ended_jobs()


def _registered(name: str, body: Callable[..., None], **options: Any) -> Task:
    """The task `webfarm.progress.<name>`."""
    task: Task = shared_task(name=f"webfarm.progress.{name}", ignore_result=True, **options)(body)
    return task


run_job = _registered("run_job", _run_job, bind=True, acks_late=True)
run_part = _registered("run_part", _run_part, bind=True, acks_late=True)
merge_job = _registered("merge_job", _merge_job, bind=True, acks_late=True)
reap_lost_jobs = _registered("reap_lost_jobs", _reap_lost_jobs)
purge_ended_jobs = _registered("purge_ended_jobs", _purge_ended_jobs)
