"""Running a whole job on a worker, and what beat does for jobs whose worker
died: end them, run them again once where the type allows, send again the
tasks that never reached a worker.
"""

import contextlib
import logging

from django.db import transaction

from webfarm.core.slots import Lease
from webfarm.progress import services
from webfarm.progress.conf import get_config
from webfarm.progress.exceptions import JobNotRunnable
from webfarm.progress.ids import new_job_id
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.launching.admission import split_job
from webfarm.progress.launching.reaper import publish_ends, reap, reap_queued
from webfarm.progress.models import Job
from webfarm.progress.parts.reaper import PartSender
from webfarm.progress.records import JobRecord
from webfarm.progress.registry import get_job_type
from webfarm.progress.sending import (
    BrokerUnavailable,
    installed_type,
    send_job,
    send_merge,
    send_part,
    send_task,
)

logger = logging.getLogger(__name__)

# A job whose worker died is run again at most once.
MAX_ATTEMPTS = 2


def run_job(*, job_id: str, worker: str = "") -> None:
    """The body of the Celery task: run the job's type under progress tracking."""
    job = Job.objects.one(job_id)
    job_type = get_job_type(job.kind) if job else None
    if job is None or job_type is None:
        logger.error("task for unknown job %s (kind %s) dropped", job_id, job and job.kind)
        return
    if job.part_count:
        logger.error("job %s runs in parts, not whole: its run_job task dropped", job_id)
        return
    try:
        with services.track_job(job, worker=worker) as tracker:
            tracker.reporter.plan(job_type.stages)
            tracker.result = job_type.run(job=job, params=job.params, tracker=tracker)
    except JobNotRunnable as exc:
        logger.info("job %s not run: %s", job_id, exc)
        return
    # The record as the run left it: the row says the same (or the reaper's word, which the log has).
    logger.info("job %s ended: %s", job_id, tracker.reporter.record.state)


def retry_lost(job: Job, record: JobRecord) -> str | None:
    """The reaper's hook: run a lost job once more as a new job, if its type
    allows, in the slots the lost one held. Returns the new job's id."""
    job_type = get_job_type(job.kind)
    if job_type is None or not job_type.retry_on_lost or job.attempt >= MAX_ATTEMPTS:
        return None
    new_id = new_job_id()
    lease = Lease(holder=job.id, ttl=0, keys=record.slots).transfer(new_id, get_config()["QUEUED_LEASE"])
    again = services.create_job(
        owner=job.owner,
        kind=job.kind,
        title=job.title,
        params=job.params,
        job_id=new_id,
        slots=lease.keys,
        retry_of=job.id,
        attempt=job.attempt + 1,
        read_token=job.read_token,  # the bar follows the retry on the same URL
        parts=split_job(job_type, job.params),
    )
    # After the caller's transaction: a worker must find the new row.
    transaction.on_commit(lambda: _send_quietly(again, job_type, slots=lease.keys))
    logger.info("job %s lost; running it again as %s (attempt %s)", job.id, new_id, again.attempt)
    return new_id


def _send_quietly(job: Job, job_type: JobTypeBase, *, slots: list[str]) -> None:
    # On BrokerUnavailable _send has ended the job as failed, with the reason.
    with contextlib.suppress(BrokerUnavailable):
        send_job(job, job_type, slots=slots)


def reap_lost_jobs() -> list[str]:
    """End jobs whose worker died, running each again once where allowed
    (of a job split in parts, the part whose worker died); send again the
    tasks of queued jobs that never reached a worker; tell memcached the
    ends it missed."""
    parts = PartSender(send_part, _send_again, _send_merge, lost=retry_lost)
    return reap(on_lost=retry_lost, parts=parts) + reap_queued(send=_send_again) + publish_ends()


def _send_merge(job: Job) -> None:
    send_merge(job, installed_type(job))


def _send_again(job: Job) -> None:
    send_task(job, installed_type(job))
