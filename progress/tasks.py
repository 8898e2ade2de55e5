import os

from celery import shared_task

from progress import retention
from progress.launching import running
from progress.parts import running as parts


@shared_task(name="progress.run_job", bind=True, acks_late=True, ignore_result=True)
def run_job(self, job_id: str) -> None:
    running.run_job(job_id=job_id, worker=f"{self.request.hostname}#{os.getpid()}")


@shared_task(name="progress.run_part", bind=True, acks_late=True, ignore_result=True)
def run_part(self, job_id: str, index: int) -> None:
    # The worker's name for the bar, and its process, to tell two runs of one part apart.
    parts.run_part(job_id=job_id, index=index, worker=f"{self.request.hostname}#{os.getpid()}")


@shared_task(name="progress.merge_job", acks_late=True, ignore_result=True)
def merge_job(job_id: str) -> None:
    parts.merge(job_id=job_id)


@shared_task(name="progress.reap_lost_jobs", ignore_result=True)
def reap_lost_jobs() -> None:
    running.reap_lost_jobs()


@shared_task(name="progress.purge_ended_jobs", ignore_result=True)
def purge_ended_jobs() -> None:
    retention.purge_ended_jobs()
