"""Handing a job's tasks to the broker: a whole job's, its parts', its merge.

Tasks are sent by name (webfarm.progress.tasks registers them on the workers), so
what sends them needs nothing of what runs them.
"""

import logging
from datetime import datetime
from typing import Any

from celery import current_app
from django.db.models import F
from django.utils import timezone
from kombu.exceptions import OperationalError

from webfarm.progress import services
from webfarm.progress.exceptions import JobNotRunnable, TryLater
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.models import Job, JobPart
from webfarm.progress.registry import get_job_type
from webfarm.progress.states import State
from webfarm.queues.exceptions import QueueError, QueueFull

logger = logging.getLogger(__name__)

RUN_JOB = "webfarm.progress.run_job"
RUN_PART = "webfarm.progress.run_part"
MERGE_JOB = "webfarm.progress.merge_job"

# Seconds between the soft limit (the job stops cleanly, shown as failed) and
# the hard one (the worker process is killed).
HARD_LIMIT_GRACE = 30


class BrokerUnavailable(TryLater):
    """The task could not be sent to the workers; the job was ended as failed."""

    def __init__(self, message: str, *, full: bool = False) -> None:
        super().__init__(message)
        self.full = full


def send_job(job: Job, job_type: JobTypeBase, *, slots: list[str], noted: bool = False) -> None:
    """Hand the job's task to the broker. A broker that cannot take it
    (unreachable, or full: a memcached broker under -M) ends the job as
    failed, frees its slots, and raises BrokerUnavailable. `noted`: the row
    says it was sent already (create_job(sending=True))."""
    try:
        send_task(job, job_type, noted=noted)
    except (OperationalError, QueueError) as exc:
        full = isinstance(exc, QueueFull)
        logger.error("job %s not queued: broker %s: %s", job.id, "full" if full else "unavailable", exc)
        reason = "The job queue is full right now" if full else "The job queue is unavailable"
        services.fail_to_queue(job=job, reason=f"{reason}; please try again.", slots=slots)
        raise BrokerUnavailable(str(exc), full=full) from exc


def send_task(job: Job, job_type: JobTypeBase, *, noted: bool = False) -> None:
    """Send the job's task (a job split in parts: the task of every part
    still queued) and note it on the row, unless `noted` (the reaper sends
    again what never left or what the broker lost). Raises what the broker
    raises."""
    options = task_options(job_type)
    if job.part_count:
        # A first send finds every part queued, as create_job made them.
        queued = (
            range(job.part_count)
            if job.sends == 0
            else JobPart.objects.filter(job_id=job.id, state=State.QUEUED).values_list("index", flat=True)
        )
        for index in queued:
            current_app.send_task(RUN_PART, args=[job.id, index], **options)
    else:
        current_app.send_task(RUN_JOB, args=[job.id], **options)
    if not noted:
        Job.objects.filter(pk=job.id).update(sent_at=timezone.now(), sends=F("sends") + 1)


def send_part(job: Job, index: int) -> None:
    """Send one part's task again (the reaper: its worker died)."""
    current_app.send_task(RUN_PART, args=[job.id, index], **task_options(installed_type(job)))


def send_queued(job: Job, job_type: JobTypeBase) -> None:
    """memcached lost the parts' count (it restarted): as the broker, it lost
    the queued parts' tasks with it. They are sent again at once (a part
    delivered twice runs once)."""
    try:
        send_task(job, job_type)
        logger.warning("job %s: memcached lost its parts' count: the queued parts were sent again", job.id)
    except Exception as exc:  # the reaper sends them when none is left running
        logger.warning("job %s: queued parts not sent again: %s", job.id, exc)


def send_merge(job: Job, job_type: JobTypeBase) -> None:
    """Send the merge's task. One that cannot be sent now is sent by the
    reaper's next pass: its claim is given back, so the reaper sees a merge
    never sent, not one sent and waiting (which it leaves for RESEND_AFTER)."""
    try:
        current_app.send_task(MERGE_JOB, args=[job.id], **task_options(job_type))
    except Exception as exc:  # the broker's errors are many; the reaper sends it again
        Job.objects.filter(pk=job.id, merge_started_at__isnull=True).update(merge_sent_at=None)
        logger.warning("job %s: merge not sent (the reaper sends it again): %s", job.id, exc)


def task_options(job_type: JobTypeBase) -> dict[str, Any]:
    """The time limits and queue of the job type's tasks (a whole job, a part or a merge)."""
    limit = job_type.time_limit_seconds()
    options: dict[str, Any] = {"soft_time_limit": limit, "time_limit": limit + HARD_LIMIT_GRACE}
    if job_type.queue:
        options["queue"] = job_type.queue
    return options


def past_hard_limit(kind: str, started: datetime | None, *, now: float, slack: float) -> bool:
    """Whether a run of a job of `kind` begun at `started` is past the time
    Celery kills its task (its hard time limit), `slack` seconds more: no
    live process may claim it longer, whatever memcached says."""
    job_type = get_job_type(kind)
    limit = job_type.time_limit_seconds() if job_type is not None else JobTypeBase.time_limit
    return started is None or now - started.timestamp() > limit + HARD_LIMIT_GRACE + slack


def installed_type(job: Job) -> JobTypeBase:
    """The job's type, for sending its tasks again (JobNotRunnable if it is gone)."""
    job_type = get_job_type(job.kind)
    if job_type is None:
        raise JobNotRunnable(f"no job type {job.kind!r}")
    return job_type
