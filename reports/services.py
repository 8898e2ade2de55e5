"""Starting and running report jobs."""

import contextlib
import logging
import math
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F
from django.template.defaultfilters import pluralize
from django.utils import timezone
from kombu.exceptions import OperationalError

from core.slots import Lease, LimitReached, SlotsUnavailable, acquire
from limits.conf import get_config as get_limits
from progress import services as progress
from progress import store
from progress.exceptions import JobNotRunnable, ProgressUnavailable
from progress.ids import new_job_id
from progress.models import Job
from progress.reaper import reap, reap_queued
from progress.records import JobRecord
from queues.exceptions import QueueError, QueueFull
from reports.definitions.base import Report
from reports.registry import get_report

logger = logging.getLogger(__name__)

# A job whose worker died is run again at most once.
MAX_ATTEMPTS = 2

# Seconds between the soft limit (the job stops cleanly, shown as failed) and
# the hard one (the worker process is killed).
HARD_LIMIT_GRACE = 30


class BrokerUnavailable(Exception):
    """The task could not be sent to the workers; the job was ended as failed."""

    def __init__(self, message: str, *, full: bool = False) -> None:
        super().__init__(message)
        self.full = full


class StartRefused(Exception):
    """Over a farm-wide limit: nothing was recorded; try again after retry_after."""

    def __init__(self, message: str, *, reason: str, retry_after: int) -> None:
        super().__init__(message)
        self.message, self.reason, self.retry_after = message, reason, retry_after


def start_report(*, user: AbstractBaseUser, report: Report, params: dict[str, Any]) -> Job:
    """Take the job's limit slots, record it as queued in memcached and the
    database, then send the task.

    Raises StartRefused (over a limit), ProgressUnavailable (nothing recorded)
    or BrokerUnavailable (the job is recorded as failed with the reason).
    """
    job_id = new_job_id()
    lease = _take_slots(user, report, job_id)
    try:
        job = progress.create_job(
            owner=user,
            kind=report.name,
            title=report.describe(params),
            params=params,
            job_id=job_id,
            slots=lease.keys,
        )
    except BaseException:
        lease.release()
        raise
    _send(job, report, slots=lease.keys)
    return job


def _send(job: Job, report: Report, *, slots: list[str]) -> None:
    """Hand the job's task to the broker. A broker that cannot take it
    (unreachable, or full: a memcached broker under -M) ends the job as
    failed, frees its slots, and raises BrokerUnavailable."""
    try:
        send_task(job, report)
    except (OperationalError, QueueError) as exc:
        full = isinstance(exc, QueueFull)
        logger.error("job %s not queued: broker %s: %s", job.id, "full" if full else "unavailable", exc)
        reason = "The job queue is full right now" if full else "The job queue is unavailable"
        progress.fail_to_queue(job=job, reason=f"{reason}; please try again.", slots=slots)
        raise BrokerUnavailable(str(exc), full=full) from exc


def send_task(job: Job, report: Report) -> None:
    """Send the job's task and note it on the row (the reaper sends again
    what never left or what the broker lost). Raises what the broker raises."""
    from reports.tasks import run_report

    limit = report.time_limit_seconds()
    run_report.apply_async(args=[job.id], soft_time_limit=limit, time_limit=limit + HARD_LIMIT_GRACE)
    Job.objects.filter(pk=job.id).update(sent_at=timezone.now(), sends=F("sends") + 1)


def _take_slots(user: AbstractBaseUser, report: Report, job_id: str) -> Lease:
    config = get_limits()
    per_user, per_kind = config["REPORTS_PER_USER"], config["REPORTS_PER_KIND"]
    try:
        return acquire(
            [(f"reports-user:{user.pk}", per_user), (f"reports-kind:{report.name}", per_kind)],
            job_id,
            ttl=config["QUEUED_LEASE"],
            attempts=config["ATTEMPTS"],
            pause=config["PAUSE"],
        )
    except SlotsUnavailable as exc:
        raise ProgressUnavailable(str(exc)) from exc
    except LimitReached as refusal:
        retry_after = _retry_after(refusal.holders, default=config["RETRY_AFTER"])
        if refusal.scope.startswith("reports-user:"):
            message = (
                f"You already have {per_user} report{pluralize(per_user)} queued or running, the most "
                f"anyone may have at once. Try again in about {retry_after} s, when one has finished."
            )
            reason = "reports-user"
        else:
            message = (
                f"{report.title} is already being run {per_kind} time{pluralize(per_kind)} on the farm, "
                f"the most at once. Try again in about {retry_after} s."
            )
            reason = "reports-kind"
        raise StartRefused(message, reason=reason, retry_after=retry_after) from refusal


def _retry_after(holders: list[str], *, default: int) -> int:
    """When a slot is likely to come free: the soonest ETA of (a sample of) the
    jobs holding them. A refusal must stay cheap, so at most ten are read."""
    try:
        sample = holders[:10]
        etas = [r.eta_seconds for r in store.read_many(sample).values() if r.eta_seconds is not None]
    except ProgressUnavailable:
        etas = []
    soonest = min(etas, default=default)
    return max(1, min(60, math.ceil(soonest)))


def retry_lost(job: Job, record: JobRecord) -> str | None:
    """The reaper's hook: run a lost job once more as a new job, if its report
    type allows, in the slots the lost one held. Returns the new job's id."""
    report = get_report(job.kind)
    if report is None or not report.retry_on_lost or job.attempt >= MAX_ATTEMPTS:
        return None
    new_id = new_job_id()
    lease = Lease(holder=job.id, ttl=0, keys=record.slots).transfer(new_id, get_limits()["QUEUED_LEASE"])
    again = progress.create_job(
        owner=job.owner,
        kind=job.kind,
        title=job.title,
        params=job.params,
        job_id=new_id,
        slots=lease.keys,
        retry_of=job.id,
        attempt=job.attempt + 1,
        read_token=job.read_token,  # the bar follows the retry on the same URL
    )
    # After the caller's transaction: a worker must find the new row.
    transaction.on_commit(lambda: _send_quietly(again, report, slots=lease.keys))
    logger.info("job %s lost; running it again as %s (attempt %s)", job.id, new_id, again.attempt)
    return new_id


def _send_quietly(job: Job, report: Report, *, slots: list[str]) -> None:
    # On BrokerUnavailable _send has ended the job as failed, with the reason.
    with contextlib.suppress(BrokerUnavailable):
        _send(job, report, slots=slots)


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
            tracker.result = report.run(job=job, params=job.params, tracker=tracker)
    except JobNotRunnable as exc:
        logger.info("job %s not run: %s", job_id, exc)
        return
    job.refresh_from_db(fields=["state"])
    logger.info("job %s ended: %s", job_id, job.state)


def reap_lost_jobs() -> list[str]:
    """End jobs whose worker died, running each again once where allowed;
    send again the tasks of queued jobs that never reached a worker."""
    return reap(on_lost=retry_lost) + reap_queued(send=_send_again)


def _send_again(job: Job) -> None:
    report = get_report(job.kind)
    if report is None:
        raise JobNotRunnable(f"no report type {job.kind!r}")
    send_task(job, report)
