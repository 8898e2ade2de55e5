"""Starting and running report jobs."""

import logging
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from kombu.exceptions import OperationalError

from progress import services as progress
from progress.exceptions import JobNotRunnable
from progress.models import Job
from reports.definitions.base import Report
from reports.registry import get_report

logger = logging.getLogger(__name__)

# Seconds between the soft limit (the job stops cleanly, shown as failed) and
# the hard one (the worker process is killed).
HARD_LIMIT_GRACE = 30


class BrokerUnavailable(Exception):
    """The task could not be sent to the workers; the job was ended as failed."""


def start_report(*, user: AbstractBaseUser, report: Report, params: dict[str, Any]) -> Job:
    """Record the job as queued in memcached and the database, then send the task.

    Raises ProgressUnavailable (nothing recorded) or BrokerUnavailable (the
    job is recorded as failed with the reason).
    """
    from reports.tasks import run_report

    job = progress.create_job(owner=user, kind=report.name, title=report.describe(params), params=params)
    try:
        run_report.apply_async(
            args=[job.id],
            soft_time_limit=report.time_limit,
            time_limit=report.time_limit + HARD_LIMIT_GRACE,
        )
    except OperationalError as exc:
        logger.error("job %s not queued: broker unavailable: %s", job.id, exc)
        progress.fail_to_queue(job=job, reason="The job queue is unavailable; please try again.")
        raise BrokerUnavailable(str(exc)) from exc
    return job


def run_report(*, job_id: str) -> None:
    """The body of the Celery task: run the job's report under progress tracking."""
    job = Job.objects.filter(pk=job_id).first()
    report = get_report(job.kind) if job else None
    if job is None or report is None:
        logger.error("task for unknown job %s (kind %s) dropped", job_id, job and job.kind)
        return
    try:
        with progress.track_job(job_id) as tracker:
            tracker.reporter.plan(report.stages)
            report.run(job=job, params=job.params, tracker=tracker)
    except JobNotRunnable as exc:
        logger.info("job %s not run: %s", job_id, exc)
        return
    job.refresh_from_db(fields=["state"])
    logger.info("job %s ended: %s", job_id, job.state)
