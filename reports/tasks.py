"""The task names reports used before any job type ran through progress's
own tasks: a worker of this version still runs what an older web node or
beat sent (a rolling upgrade)."""

from celery import shared_task

from progress.api import reap_lost_jobs as reap
from progress.api import run_job


@shared_task(name="reports.run_report", acks_late=True, ignore_result=True)
def run_report(job_id: str) -> None:
    run_job(job_id=job_id)


@shared_task(name="reports.reap_lost_jobs", ignore_result=True)
def reap_lost_jobs() -> None:
    reap()
