from celery import shared_task

from reports import services


@shared_task(name="reports.run_report", acks_late=True, ignore_result=True)
def run_report(job_id: str) -> None:
    services.run_report(job_id=job_id)


@shared_task(name="reports.reap_lost_jobs", ignore_result=True)
def reap_lost_jobs() -> None:
    services.reap_lost_jobs()
