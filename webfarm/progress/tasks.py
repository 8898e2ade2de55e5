import os
from typing import Any

from celery import Task, shared_task

from webfarm.progress import retention
from webfarm.progress.launching import running
from webfarm.progress.parts import running as parts


def _worker(task: Task[Any, Any]) -> str:
    # The worker's name for the bar, and its process, to tell two runs of one part apart.
    return f"{task.request.hostname}#{os.getpid()}"


@shared_task(name="webfarm.progress.run_job", bind=True, acks_late=True, ignore_result=True)
def run_job(self: Task[Any, Any], job_id: str) -> None:
    running.run_job(job_id=job_id, worker=_worker(self))


@shared_task(name="webfarm.progress.run_part", bind=True, acks_late=True, ignore_result=True)
def run_part(self: Task[Any, Any], job_id: str, index: int) -> None:
    parts.run_part(job_id=job_id, index=index, worker=_worker(self))


@shared_task(name="webfarm.progress.merge_job", bind=True, acks_late=True, ignore_result=True)
def merge_job(self: Task[Any, Any], job_id: str) -> None:
    parts.merge(job_id=job_id, worker=_worker(self))


@shared_task(name="webfarm.progress.reap_lost_jobs", ignore_result=True)
def reap_lost_jobs() -> None:
    running.reap_lost_jobs()


@shared_task(name="webfarm.progress.purge_ended_jobs", ignore_result=True)
def purge_ended_jobs() -> None:
    retention.purge_ended_jobs()
