"""Running a job split in parts, on the workers: each part as a task of its
own (webfarm.progress.run_part), on any worker, at once; and once every part is
done, the merge (webfarm.progress.merge_job), once, on one worker.

- The first part to start moves the job from queued to running
  (services.begin_job); every part then claims its own row
  (parts.start_part), so a part delivered twice runs once.
- Each part publishes into its entry of the job's record (PartReporter):
  one bar for the whole job.
- The part that finishes last sends the merge (parts.finish_part). The
  merge's progress takes the bar from the parts' share to 100 %, and its
  result ends the job.
- A part that fails fails the job with its reason; a cancel stops every
  part at its next write. Either way the other parts see a job that ended
  and stop (JobEnded), and the parts not started never start.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from webfarm.progress import store
from webfarm.progress.countdown import finish_part, short_worker, start_part, stop_parts
from webfarm.progress.exceptions import JobEnded, JobNotRunnable, ProgressUnavailable
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.models import Job, JobPart
from webfarm.progress.parts.combined import parts_share
from webfarm.progress.parts.reporter import PartReporter
from webfarm.progress.records import JobRecord
from webfarm.progress.registry import get_job_type
from webfarm.progress.reporter import ProgressReporter
from webfarm.progress.sending import send_merge, send_queued
from webfarm.progress.services import (
    STOPPED,
    Tracker,
    begin_job,
    finish_job,
    how_it_ended,
    internal_error,
    keep_slots,
    record_from_job,
    tracking,
)
from webfarm.progress.states import State

logger = logging.getLogger(__name__)


def run_part(*, job_id: str, index: int, worker: str) -> None:
    """The body of the webfarm.progress.run_part task."""
    job, job_type = _job(job_id)
    if job is None or job_type is None:
        return
    try:
        with track_part(job, job_type, index, worker=worker) as tracker:
            assert tracker.part is not None
            tracker.part_result = job_type.run_part(
                job=job, part=tracker.part, params=job.params, tracker=tracker
            )
    except JobNotRunnable as exc:
        logger.info("job %s part %s not run: %s", job_id, index, exc)


def merge(*, job_id: str, worker: str = "") -> None:
    """The body of the webfarm.progress.merge_job task: the job's result from
    its parts'. `worker` names the process ("celery@host#pid") on the job's
    row, as a whole job's run does, so the reaper tells a merge that is slow
    from one that is dead (webfarm.progress.liveness)."""
    job, job_type = _job(job_id)
    if job is None or job_type is None:
        return
    try:
        record = begin_merge(job, worker=worker)
    except JobNotRunnable as exc:
        logger.info("job %s: merge not run: %s", job_id, exc)
        return
    reporter = ProgressReporter(record)
    reporter.plan(job_type.stages)
    reporter.begin_after(job_type.stages[0][0])
    with tracking(record, reporter) as tracker:
        parts = list(JobPart.objects.filter(job_id=job_id).order_by("index"))
        tracker.result = job_type.merge(job=job, parts=parts, params=job.params, tracker=tracker)
    job.refresh_from_db(fields=["state"])
    logger.info("job %s ended: %s (merged from %s parts)", job_id, job.state, job.part_count)


def _job(job_id: str) -> tuple[Job | None, JobTypeBase | None]:
    job = Job.objects.one(job_id)
    job_type = get_job_type(job.kind) if job else None
    if job is None or job_type is None:
        logger.error("task for unknown job %s (kind %s) dropped", job_id, job and job.kind)
    return job, job_type


def current_record(job: Job) -> JobRecord:
    """The job's record as memcached holds it, or rebuilt from its rows."""
    try:
        record = store.read(job.id)
    except ProgressUnavailable:
        record = None
    if record is None:
        job.refresh_from_db()
        record = record_from_job(job)
    return record


def begin_part(job: Job, index: int, *, worker: str) -> tuple[JobRecord, JobPart]:
    """Start the job if it is queued (the first part does), then claim the
    part. JobNotRunnable when the job ended or the part is not queued."""
    try:
        record = begin_job(job)
    except JobNotRunnable:
        # Started by another part (maybe a moment ago: memcached says so before the row).
        record = current_record(job)
        if record.state == State.QUEUED:
            # memcached refused that part's write (full): the row says what is so.
            job.refresh_from_db()
            record = record_from_job(job)
        if record.state != State.RUNNING:
            raise
    if record.cancel_requested or _cancel_flag(job.id):
        # Seen before the part is claimed: it never starts, and the job ends
        # as asked (a part already running would end it only at its next write).
        stop_parts(job.id, State.CANCELLED)
        if finish_job(record, State.CANCELLED, ending=State.RUNNING):
            logger.info("job %s ended: cancelled (seen by part %s before it started)", job.id, index)
        raise JobNotRunnable(f"job {job.id} was cancelled")
    part = start_part(job.id, index, worker=worker)
    if part is None:
        raise JobNotRunnable(f"part {index} is not queued")
    return record, part


def _cancel_flag(job_id: str) -> bool:
    try:
        return store.is_cancel_requested(job_id)
    except ProgressUnavailable:
        return False  # the part's first write looks again


@contextmanager
def track_part(job: Job, job_type: JobTypeBase, index: int, *, worker: str) -> Iterator[Tracker]:
    """Run one part: its entry in the job's bar, a heartbeat (which keeps
    the job's slots), and at its end either its finish (the last part's
    sends the merge) or the end of the whole job (failed or cancelled)."""
    record, part = begin_part(job, index, worker=worker)
    first_stage = job_type.stages[0][0]
    reporter = PartReporter(
        record,
        index=index,
        attempt=part.attempt,
        worker=short_worker(worker),
        share=parts_share(job_type.stages),
    )
    # A part does the job's first stage; the merge the others.
    reporter.plan([(first_stage, 1)])
    tracker = Tracker(reporter)
    tracker.part = part
    keep_slots(reporter, record)
    try:
        yield tracker
    except JobEnded:
        reporter.stop_heartbeat()
        logger.warning("job %s ended elsewhere while part %s was working: it stops here", job.id, index)
        return
    except STOPPED as exc:
        state, error = how_it_ended(exc)
    except BaseException:
        reporter.stop_heartbeat()
        logger.exception("job %s part %s crashed", job.id, index)
        end_split_job(job, index, State.FAILED, internal_error(job.id))
        raise
    else:
        reporter.stop_heartbeat()
        reporter.finish()
        if finish_part(
            job.id, index, result=tracker.part_result, on_recount=lambda: send_queued(job, job_type)
        ):
            send_merge(job, job_type)
        return
    reporter.stop_heartbeat()
    end_split_job(job, index, state, error)


def end_split_job(job: Job, index: int, state: State, error: str) -> None:
    """A part failed or saw the cancel: the job ends so, and its other parts stop."""
    JobPart.objects.filter(job_id=job.id, index=index).move(
        source=State.RUNNING, target=state, finished_at=datetime.now(UTC)
    )
    stop_parts(job.id, State.CANCELLED)
    if finish_job(current_record(job), state, ending=State.RUNNING, error=error):
        logger.info("job %s ended: %s (by part %s)", job.id, state, index)


def begin_merge(job: Job, *, worker: str = "") -> JobRecord:
    """Claim the merge (one worker does, however often it was sent), on `worker`."""
    claimed = Job.objects.filter(pk=job.id, state=State.RUNNING, merge_started_at__isnull=True).update(
        merge_started_at=datetime.now(UTC), worker=worker
    )
    if not claimed:
        raise JobNotRunnable("its merge was taken, or it is not running")
    return current_record(job)
