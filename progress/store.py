"""memcached operations on job records and cancel flags.

Every memcached failure leaves here as ProgressUnavailable, so callers deal with
one exception, never with sockets or pymemcache's error classes.
"""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pymemcache.exceptions import MemcacheError

from progress.client import get_client
from progress.conf import get_config
from progress.exceptions import ProgressUnavailable
from progress.records import JobRecord

CAS_ATTEMPTS = 20


def record_key(job_id: str) -> str:
    return f"job:{job_id}"


def cancel_key(job_id: str) -> str:
    return f"cancel:{job_id}"


@contextmanager
def _memcached(action: str) -> Iterator[None]:
    try:
        yield
    except (MemcacheError, OSError) as exc:
        raise ProgressUnavailable(f"memcached {action} failed: {exc}") from exc


def _ttl() -> int:
    return int(get_config()["RECORD_TTL"])


def read(job_id: str) -> JobRecord | None:
    with _memcached("get"):
        raw = get_client().get(record_key(job_id))
    return None if raw is None else JobRecord.from_bytes(raw)


def read_many(job_ids: list[str]) -> dict[str, JobRecord]:
    """Records of several jobs in one round trip per server; missing ones left out."""
    if not job_ids:
        return {}
    with _memcached("get_many"):
        found = get_client().get_many([record_key(job_id) for job_id in job_ids])
    records = (JobRecord.from_bytes(raw) for raw in found.values())
    return {record.job: record for record in records}


def read_raw(job_id: str) -> bytes | None:
    with _memcached("get"):
        return get_client().get(record_key(job_id))


def create(record: JobRecord) -> None:
    """Write a new record; refuses to overwrite an existing one."""
    with _memcached("add"):
        stored = get_client().add(record_key(record.job), record.to_bytes(), expire=_ttl())
    if not stored:
        raise ProgressUnavailable(f"job {record.job} already has a record")


def write(record: JobRecord) -> None:
    with _memcached("set"):
        stored = get_client().set(record_key(record.job), record.to_bytes(), expire=_ttl())
    if not stored:
        raise ProgressUnavailable("memcached refused the write (out of memory?)")


def update(job_id: str, change: Callable[[JobRecord], bool]) -> JobRecord | None:
    """Apply `change` atomically (gets/cas). `change` returns False to leave it.

    Returns the record as it stands afterwards, or None if there is none.
    """
    client = get_client()
    for _ in range(CAS_ATTEMPTS):
        with _memcached("gets"):
            raw, token = client.gets(record_key(job_id))
        if raw is None:
            return None
        record = JobRecord.from_bytes(raw)
        if not change(record):
            return record
        record.updated_at = time.time()
        with _memcached("cas"):
            stored = client.cas(record_key(job_id), record.to_bytes(), token, expire=_ttl())
        if stored:
            return record
        if stored is None:  # the key vanished between gets and cas
            return None
    raise ProgressUnavailable(f"job {job_id}: record kept changing, update abandoned")


def request_cancel(job_id: str) -> None:
    with _memcached("set"):
        get_client().set(cancel_key(job_id), b"1", expire=_ttl())


def is_cancel_requested(job_id: str) -> bool:
    with _memcached("get"):
        return get_client().get(cancel_key(job_id)) is not None
