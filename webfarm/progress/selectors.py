"""Reads for the progress endpoint and the job pages."""

import time
from collections.abc import Iterable
from hmac import compare_digest
from typing import Any

from django.db.models import QuerySet

from webfarm.progress import store
from webfarm.progress.conf import lost_after
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.ids import is_valid_job_id, is_valid_read_token
from webfarm.progress.models import Job
from webfarm.progress.rebuilt import or_row, record_from_job
from webfarm.progress.records import JobRecord
from webfarm.progress.states import FINAL_STATES


def _from_database(job_id: str, owner_id: int | None) -> JobRecord | None:
    jobs = Job.objects.filter(pk=job_id)
    job = (jobs if owner_id is None else jobs.filter(owner_id=owner_id)).first()
    return None if job is None else record_from_job(job)


def owner_scope(*, pk: int, is_active: bool, is_staff: bool) -> int | None:
    """Whose jobs a user may see and cancel, as job_record's `owner_id`:
    anyone's (None) for active staff, their own for everyone else. The one
    rule for the views and the poll gate's lanes alike."""
    return None if is_active and is_staff else pk


def jobs_seen_by(user: Any) -> QuerySet[Job]:
    """The jobs `user` may see and cancel, by owner_scope's rule, for views
    that look a job up in the database."""
    owner_id = owner_scope(pk=user.pk, is_active=user.is_active, is_staff=user.is_staff)
    jobs = Job.objects.all()
    return jobs if owner_id is None else jobs.filter(owner_id=owner_id)


def job_record(
    *, job_id: str, owner_id: int | None, raw: bytes | object | None = store.UNREAD
) -> JobRecord | None:
    """The caller's job as it stands, or None if it is unknown or not theirs
    (owner_id None: anyone's, for staff).

    The hot path is one memcached get. The database is read only when the
    record is missing (expired, evicted, memcached restarted), when memcached
    is unreachable, or when a running job has stopped beating: then the row
    may know how it ended. Raises ProgressUnavailable when neither memcached
    nor the database can tell. `raw`: the record's value, if the caller
    read it already.
    """
    if not is_valid_job_id(job_id):
        return None
    try:
        record = store.read(job_id, raw=raw)
    except ProgressUnavailable:
        record = _from_database(job_id, owner_id)
        if record is None or not record.is_final:
            raise
        return record
    if record is None:
        return _from_database(job_id, owner_id)
    if owner_id is not None and record.owner != owner_id:
        return None
    if not record.is_final and _stale(record):
        stored = _from_database(job_id, owner_id)
        if stored is not None and stored.is_final:
            return stored
    return record


def cached_job_record(*, job_id: str, owner_id: int | None, raw: bytes | None) -> JobRecord | None:
    """job_record's answer when `raw` (the record's value, read from
    memcached) settles it alone: the record is there, the caller's, and not a
    running job gone silent. None when job_record must look further (the
    database, or a 404 it gives)."""
    if raw is None or not is_valid_job_id(job_id):
        return None
    record = store.read(job_id, raw=raw)
    if record is None or (owner_id is not None and record.owner != owner_id):
        return None
    if not record.is_final and _stale(record):
        return None
    return record


def job_record_by_token(*, job_id: str, token: str) -> JobRecord | None:
    """The job's record for whoever holds its read token, or None (unknown
    job, wrong token)."""
    if not (is_valid_job_id(job_id) and is_valid_read_token(token)):
        return None
    record = job_record(job_id=job_id, owner_id=None)
    if record is None or not record.read_token or not compare_digest(record.read_token, token):
        return None
    return record


def published_document(*, job_id: str, token: str) -> bytes | dict[str, Any] | None:
    """What the read-token URL answers in one get: the document published
    for nginx, as it is; None when none is published (or the ids are not
    ours): then the record tells (job_record_by_token)."""
    if not (is_valid_job_id(job_id) and is_valid_read_token(token)):
        return None
    try:
        return store.read_public(job_id, token)
    except ProgressUnavailable:
        # memcached is away: asking it again for the record would only wait
        # again. The row tells an ended job's state.
        record = _from_database(job_id, None)
        if record is None or not record.is_final:
            raise
        return record.public() if compare_digest(record.read_token, token) else None


def record_of(job: Job) -> JobRecord:
    """The job's record as it stands, for a caller that may see it: from
    memcached, or rebuilt from its row when memcached is away or has lost
    it (a page then shows the row's state, and its bar retries)."""
    try:
        record = job_record(job_id=job.id, owner_id=None)
    except ProgressUnavailable:
        record = None
    return or_row(record, job)


def job_rows(jobs: Iterable[Job]) -> list[tuple[Job, JobRecord]]:
    """Each job beside its record: live from memcached (one get_many) for jobs
    the database does not know as ended, rebuilt from the row for the rest."""
    jobs = list(jobs)
    try:
        live = store.read_many([job.id for job in jobs if job.state not in FINAL_STATES])
    except ProgressUnavailable:
        live = {}
    return [(job, or_row(live.get(job.id), job)) for job in jobs]


def _stale(record: JobRecord) -> bool:
    beat = record.heartbeat_at or record.updated_at
    return record.state == "running" and time.time() - beat > lost_after()
