from celery import shared_task

from progress import launch


@shared_task(name="progress.run_job", acks_late=True, ignore_result=True)
def run_job(job_id: str) -> None:
    launch.run_job(job_id=job_id)


@shared_task(name="progress.reap_lost_jobs", ignore_result=True)
def reap_lost_jobs() -> None:
    launch.reap_lost_jobs()
