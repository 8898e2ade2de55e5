"""A job's record rebuilt from the database, for when memcached has none
(expired, evicted, restarted, unreachable): the one place that decides
"memcached's record, or the row's"."""

from collections.abc import Callable

from webfarm.progress import store
from webfarm.progress.countdown import short_worker
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.models import Job, JobPart
from webfarm.progress.records import JobRecord, PartProgress
from webfarm.progress.states import FINAL_STATES, State


def record_from_job(job: Job) -> JobRecord:
    """A record rebuilt from the database, for when memcached has none (the
    parts of a job split in parts from their rows: one query)."""
    final = job.state in FINAL_STATES
    parts = []
    if job.part_count:
        parts = [
            PartProgress(
                size=part.size,
                done=1.0 if part.state == State.SUCCEEDED else 0.0,
                state=part.state,
                worker=short_worker(part.worker),
                attempt=part.attempt,
            )
            for part in JobPart.objects.filter(job_id=job.id).order_by("index")
        ]
    return JobRecord(
        job=job.id,
        owner=job.owner_id or 0,
        kind=job.kind,
        title=job.title,
        state=job.state,
        percent=100.0 if job.state == State.SUCCEEDED else None,
        message="" if final else "progress temporarily unavailable",
        created_at=job.created_at.timestamp(),
        started_at=job.started_at.timestamp() if job.started_at else None,
        updated_at=(job.finished_at or job.started_at or job.created_at).timestamp(),
        finished_at=job.finished_at.timestamp() if job.finished_at else None,
        result_url=job.result_url,
        error=job.error,
        attempt=job.attempt,
        retried_as=job.retried_as,
        metadata=job.metadata if isinstance(job.metadata, dict) else {},
        read_token=job.read_token,
        parts=parts,
    )


def or_row(record: JobRecord | None, job: Job) -> JobRecord:
    """`record`, as memcached gave it, or where it gave none the one `job`'s row rebuilds."""
    return record_from_job(job) if record is None else record


def current(job: Job) -> JobRecord:
    """memcached's record of the job, or the row's when memcached is away or lost it."""
    try:
        return or_row(store.read(job.id), job)
    except ProgressUnavailable:
        return record_from_job(job)


def changed(job: Job, change: Callable[[JobRecord], bool]) -> JobRecord:
    """`change` applied to memcached's record of the job (a cas); where
    memcached lost the record, to the one the row rebuilds (with the cancel
    flag memcached holds), put back unless another process put one first,
    and then that one. Raises ProgressUnavailable."""
    return store.update(job.id, change, read_token=job.read_token, missing=lambda: record_from_job(job))
