"""Job lifecycle: create (web), begin/track/finish (worker), cancel (web)."""

import logging
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, transaction

from webfarm.core.client import MetaBatch
from webfarm.core.counters import count_in, count_soon, observe_in
from webfarm.core.slots import Lease, Taking
from webfarm.progress import store
from webfarm.progress.conf import lost_after
from webfarm.progress.countdown import PartSpec, create_parts, left_key
from webfarm.progress.exceptions import JobCancelled, JobEnded, JobFailed, JobNotRunnable, ProgressUnavailable
from webfarm.progress.ids import new_job_id, new_read_token
from webfarm.progress.models import Job, JobPart
from webfarm.progress.outcome import JobResult
from webfarm.progress.rebuilt import changed, current, or_row, record_from_job
from webfarm.progress.records import JobRecord, PartProgress
from webfarm.progress.reporter import ProgressReporter
from webfarm.progress.signals import job_ended
from webfarm.progress.states import FINAL_STATES, State

logger = logging.getLogger(__name__)

FINAL_WRITE_ATTEMPTS = 5
FINAL_WRITE_PAUSE = 0.2


def _dt(timestamp: float | None) -> datetime | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC)


def create_job(
    *,
    owner: AbstractBaseUser | None,
    kind: str,
    title: str,
    params: dict[str, Any],
    job_id: str | None = None,
    slots: list[str] | None = None,
    retry_of: str = "",
    attempt: int = 1,
    read_token: str = "",
    taking: Taking | None = None,
    parts: Sequence[PartSpec] = (),
    sending: bool = False,
) -> Job:
    """Record a queued job in the database and in memcached, both or neither.

    Call before sending the task, so no page ever shows an unknown job.
    `slots` are limit slots held for it, released when it ends: already
    taken, or taken here with the record (`taking`, one round trip for both;
    SlotsTaken, with nothing recorded, if a racer took one first).
    `read_token` is given for a retry, which keeps its job's progress URL.
    `parts`: the job is split in these parts (webfarm.progress.countdown).
    `sending`: the caller sends its task next (send_task(noted=True)).
    Raises ProgressUnavailable when memcached cannot take the record.
    """
    now = time.time()
    job = Job(
        id=job_id or new_job_id(),
        owner=owner,  # type: ignore[misc]  # any AUTH_USER_MODEL: the stubs know mypy's settings' one
        kind=kind,
        title=title,
        params=params,
        retry_of=retry_of,
        attempt=attempt,
        read_token=read_token or new_read_token(),
        part_count=len(parts),
        # Its send is noted here, not after: one write for the row. A process
        # that dies between the two leaves the reaper a job sent and still
        # queued, which it sends again after RESEND_AFTER.
        sent_at=_dt(now) if sending else None,
        sends=1 if sending else 0,
    )
    record = JobRecord(
        job=job.id,
        owner=owner.pk if owner is not None else 0,
        kind=kind,
        title=title,
        percent=0.0,
        message="waiting for a worker",
        created_at=now,
        updated_at=now,
        attempt=attempt,
        slots=slots or [],
        read_token=job.read_token,
        parts=[PartProgress(size=spec.size) for spec in parts],
    )
    counters = {left_key(job.id): len(parts)} if parts else None
    if parts:
        with transaction.atomic():
            job.save(force_insert=True)
            create_parts(job, parts)
            store.create(record, taking=taking, counters=counters)
    else:
        # One statement in its own transaction, taken back by hand if
        # memcached does not take the record: a round trip to the database
        # instead of three.
        job.save(force_insert=True)
        try:
            store.create(record, taking=taking, counters=counters)
        except BaseException:
            Job.objects.filter(pk=job.id).delete()
            raise
    count_soon("jobs", kind=kind, state=State.QUEUED)
    return job


def fail_to_queue(*, job: Job, reason: str, slots: list[str] | None = None) -> None:
    """The task could not be sent: end the job as failed everywhere (a job
    split in parts may be running already, on the parts that were sent)."""
    record = JobRecord(job=job.id, owner=job.owner_id or 0, kind=job.kind, title=job.title, slots=slots or [])
    if not finish_job(record, State.FAILED, ending=State.QUEUED, error=reason) and job.part_count:
        finish_job(record, State.FAILED, ending=State.RUNNING, error=reason)


def begin_job(job: Job, *, worker: str = "") -> JobRecord:
    """Move a queued job to running. Raises JobNotRunnable if it was
    cancelled, has ended, or is running already: a task delivered twice (sent
    again by the reaper, redelivered by the broker) never starts a second run.

    memcached's cas decides races with a cancel and with a second delivery;
    the database row follows, and its `queued -> running` update is the last
    word (also when memcached is away). `job`: its row, as the task read it
    (updated in place once the run began).
    """
    job_id = job.id
    now = time.time()

    def start(record: JobRecord) -> bool:
        if record.state != State.QUEUED or record.cancel_requested:
            return False
        record.state = State.RUNNING
        record.started_at = record.heartbeat_at = now
        record.message = "started"
        return True

    try:
        record = changed(job, start)  # memcached's record, or the row's put back
    except ProgressUnavailable as exc:
        logger.warning("job %s starts without live progress: %s", job_id, exc)
        record = record_from_job(job)
        start(record)

    if record.cancel_requested and record.state == State.QUEUED:
        finish_job(record, State.CANCELLED, ending=State.QUEUED)
        raise JobNotRunnable(f"job {job_id} was cancelled before it started")
    if record.state != State.RUNNING or record.started_at != now:
        raise JobNotRunnable(f"job {job_id} is {record.state}")
    started = Job.objects.filter(pk=job_id).move(
        source=State.QUEUED, target=State.RUNNING, started_at=_dt(now), worker=worker
    )
    if not started:
        job.refresh_from_db()
        if job.state in FINAL_STATES:  # ended meanwhile (cancelled): memcached follows the row
            finish_job(record, State(job.state), ending=State(job.state), error=job.error)
        raise JobNotRunnable(f"job {job_id} is {job.state}")
    job.state, job.started_at, job.worker = State.RUNNING, _dt(now), worker
    count_soon("jobs", kind=job.kind, state=State.RUNNING)
    return record


def finish_job(
    record: JobRecord,
    state: State,
    *,
    ending: State,
    error: str = "",
    result_url: str = "",
    summary: str = "",
    value: Any = None,
    errors: list[dict[str, str]] | None = None,
    release_slots: bool = True,
    job: Job | None = None,
) -> bool:
    """End the job as `state`, if its row is still `ending` (the state this
    ending comes from): the row decides who ends a job, so a run that the
    reaper took for lost meanwhile writes nothing over the `lost`. Returns
    whether this call ended it. `value` and `errors` are for API clients
    (what the body returned; the exception that ended it, see error_of()).
    `job`: the caller's row, brought up to date here."""
    now = time.time()
    record.state = state
    record.error = error
    record.result_url = result_url
    record.finished_at = record.updated_at = record.heartbeat_at = now
    record.eta_seconds = None
    if state == State.SUCCEEDED:
        record.percent = 100.0
        record.current = record.total or record.current
        record.message = summary or "done"
    elif state == State.CANCELLED:
        record.message = "cancelled"
    elif state == State.FAILED:
        record.message = "failed"
    elif state == State.LOST:
        record.message = (
            "the job queue lost it" if ending == State.QUEUED else "the worker running this job stopped"
        )
    fields: dict[str, Any] = {"value": value, "metadata": record.metadata}
    if errors:
        fields["errors"] = errors
    ended = Job.objects.filter(pk=record.job).move(
        source=ending, target=state, error=error, result_url=result_url, finished_at=_dt(now), **fields
    )
    if not ended:
        logger.warning("job %s was not %s any more: not ended as %s here", record.job, ending, state)
        return False
    if job is not None:  # the caller's row, as the update above left it
        job.state, job.error, job.result_url, job.finished_at = state, error, result_url, _dt(now)
        for name, value in fields.items():
            setattr(job, name, value)
    if release_slots:
        Lease(holder=record.job, ttl=0, keys=record.slots).release()
    # The counts ride with the final write: one round trip for the end.
    batch = MetaBatch()
    settles = [count_in(batch, "jobs", kind=record.kind, state=state)]
    if record.started_at is not None and state == State.SUCCEEDED:
        settles.append(observe_in(batch, "job_seconds", now - record.started_at, kind=record.kind))
    replies = None
    for attempt in range(FINAL_WRITE_ATTEMPTS):
        try:
            written = store.write(record, batch=batch if attempt == 0 else None)
            replies = written if attempt == 0 else None
            break
        except ProgressUnavailable as exc:
            if attempt == FINAL_WRITE_ATTEMPTS - 1:
                # The row above holds the final state, but memcached may still
                # hold the record from before, which readers believe: the
                # reaper writes the end there once memcached answers.
                Job.objects.filter(pk=record.job).update(end_unpublished=True)
                logger.error("job %s: final state %s kept in the database only: %s", record.job, state, exc)
            else:
                time.sleep(FINAL_WRITE_PAUSE * (attempt + 1))
    for settle in settles:
        settle(replies)
    announce_end(record.job, record.kind, state, job=job, record=record)
    return True


def announce_end(
    job_id: str, kind: str, state: State, *, job: Job | None = None, record: JobRecord | None = None
) -> None:
    """job_ended, once the row holds the end; a failing receiver is logged.
    `job` and `record`, when the caller has them as they ended, spare the
    receivers a read of each."""
    ended = job_ended.send_robust(Job, job_id=job_id, kind=kind, state=state.value, job=job, record=record)
    for receiver, outcome in ended:
        if isinstance(outcome, Exception):
            logger.error("job %s: %r failed on its end: %r", job_id, receiver, outcome)


def finish_lost(
    job: Job, record: JobRecord, *, silent_for: float, on_lost: Callable[[Job, JobRecord], str | None] | None
) -> bool:
    """End a silent running job as lost, unless it ended meanwhile (the row
    decides). `on_lost` may start it again and return the new job's id; it
    runs inside the transaction, so it sends tasks with on_commit."""
    error = f"The worker running this job stopped (no heartbeat for {silent_for:.0f} s)"
    if record.percent:
        error += f" at {record.percent:.0f} %"
    error += "."
    # One transaction: a reader never sees the job lost without its retry.
    with transaction.atomic():
        if not Job.objects.filter(pk=job.id).move(source=State.RUNNING, target=State.LOST, error=error):
            return False
        logger.warning("job %s lost: %s", job.id, error)
        retried_as = None
        if on_lost is not None:
            try:
                with transaction.atomic():
                    retried_as = on_lost(job, record)
            except Exception:
                logger.exception("job %s lost and not run again", job.id)
        if retried_as:
            error += " It is being run again automatically."
            Job.objects.filter(pk=job.id).update(retried_as=retried_as, error=error)
            record.retried_as = retried_as
    finish_job(record, State.LOST, ending=State.LOST, error=error, release_slots=not retried_as)
    return True


def finish_never_started(job: Job) -> bool:
    """End a queued job whose task never reached a worker, even sent again, as
    lost (unless it started or ended meanwhile: the row decides)."""
    error = (
        "This job never started: its task did not reach a worker, even when sent again "
        "(the job queue lost it). Please start it again."
    )
    record = current(job)
    if finish_job(record, State.LOST, ending=State.QUEUED, error=error):
        logger.warning("job %s lost: %s", job.id, error)
        return True
    return False


class Tracker:
    """What track_job() yields: the reporter, and a place for the result the
    job's body returns (the runner puts it there)."""

    def __init__(self, reporter: ProgressReporter) -> None:
        self.reporter = reporter
        self.result = JobResult()
        # A job split in parts: the part this run does, and what it hands to the merge.
        self.part: JobPart | None = None
        self.part_result: dict[str, Any] = {}


@contextmanager
def track_job(job: Job, *, worker: str = "") -> Iterator[Tracker]:
    """Run a job's body: running on entry, a final state on exit, a heartbeat
    in between (see tracking()). `job`: its row, as the task read it."""
    record = begin_job(job, worker=worker)
    with tracking(record, ProgressReporter(record), job=job) as tracker:
        yield tracker


@contextmanager
def tracking(record: JobRecord, reporter: ProgressReporter, *, job: Job | None = None) -> Iterator[Tracker]:
    """Track a running job's body (the whole job, or the merge of a job split
    in parts): a heartbeat while it runs, a final state on exit.
    JobCancelled ends it as cancelled; JobFailed as failed with its message;
    a time limit as failed; anything else as failed and re-raised. JobEnded
    (the reaper took the job for lost while this run was stalled) ends the
    run without touching the job: it is over, and maybe running again as a
    retry. `job`: the job's row, kept up to date with its end."""
    job_id = record.job
    tracker = Tracker(reporter)
    keep_slots(reporter, record)
    try:
        yield tracker
    except JobEnded:
        reporter.stop_heartbeat()
        logger.warning("job %s ended elsewhere while this run was working: it stops here", job_id)
        return
    except STOPPED as exc:
        state, error = how_it_ended(exc)
        errors = [] if state == State.CANCELLED else [error_of(exc)]
    except BaseException as exc:
        record.metadata = reporter.stop()
        logger.exception("job %s crashed", job_id)
        finish_job(
            record,
            State.FAILED,
            ending=State.RUNNING,
            error=internal_error(job_id),
            errors=[error_of(exc)],
            job=job,
        )
        raise
    else:
        state, error, errors = State.SUCCEEDED, "", []
    record.metadata = reporter.stop()
    result = tracker.result if state == State.SUCCEEDED else JobResult()
    finish_job(
        record,
        state,
        ending=State.RUNNING,
        error=error,
        result_url=result.url,
        summary=result.summary,
        value=result.value,
        errors=errors,
        job=job,
    )


TIME_LIMIT_ERROR = "The job took longer than its time limit and was stopped."
# What a job's body (or a part's) raises to stop: how_it_ended() says how.
STOPPED = (JobCancelled, JobFailed, SoftTimeLimitExceeded)


def how_it_ended(exc: BaseException) -> tuple[State, str]:
    """The final state a STOPPED exception ends the job in, and the sentence the user sees."""
    if isinstance(exc, JobCancelled):
        return State.CANCELLED, ""
    if isinstance(exc, SoftTimeLimitExceeded):
        return State.FAILED, TIME_LIMIT_ERROR
    return State.FAILED, str(exc)


# A traceback kept for API clients is cut to this many characters (its end: the raise).
MAX_TRACEBACK = 20_000


def error_of(exc: BaseException) -> dict[str, str]:
    """The exception that ended a run, as API clients read it (django.tasks' TaskError)."""
    kind = type(exc)
    text = "".join(traceback.format_exception(exc))
    return {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": text[-MAX_TRACEBACK:],
    }


def internal_error(job_id: str) -> str:
    return f"Internal error while running the job (reference {job_id})."


def keep_slots(reporter: ProgressReporter, record: JobRecord) -> None:
    """Start the heartbeat, which renews the job's limit slots: while running,
    they live only as long as its heartbeat, so a killed worker's slots come
    free after lost_after(), even without the reaper."""
    lease = Lease(holder=record.job, ttl=int(lost_after()) + 1, keys=record.slots)
    lease.renew()
    reporter.on_beat = slots_renewer(lease)
    reporter.start_heartbeat()


def slots_renewer(lease: Lease) -> Callable[[], None]:
    """What a heartbeat calls to renew the job's slots. A slot found gone is
    taken again only while the job's row says it runs: a job split in parts
    beats in every part, and another part may have ended the job (and
    released its slots) a moment ago; taken again, they would keep the user
    out until they expired."""

    def running() -> bool:
        # The row ends before the slots are released (finish_job), so a
        # slot released for good is seen with the row that ended.
        try:
            return Job.objects.filter(pk=lease.holder, state=State.RUNNING).exists()
        except DatabaseError:
            return True  # as before: memcached, not the database, decides

    return lambda: lease.renew(still_held=running)


def republished(record: JobRecord | None) -> JobRecord | None:
    """A token poll found no document (nginx's, or the view's own get): put
    it back, so the next polls take one get; `record` passes through."""
    if record is not None:
        store.republish(record)
    return record


def cancel_job(*, job: Job) -> JobRecord:
    """Ask a job to stop. A queued job ends at once; a running one at its next
    progress write. Cancelling an ended job changes nothing."""
    if job.state in FINAL_STATES:
        return record_from_job(job)
    store.request_cancel(job.id)

    def mark(record: JobRecord) -> bool:
        if record.is_final:
            return False
        record.cancel_requested = True
        record.message = "cancelling"
        return True

    record = or_row(store.update(job.id, mark), job)
    if record.state == State.QUEUED:
        # A worker that picks it up now sees cancel_requested and gives up.
        finish_job(record, State.CANCELLED, ending=State.QUEUED)
    return record
