"""memcached operations on job records and cancel flags.

Every memcached failure leaves here as ProgressUnavailable, so callers deal with
one exception, never with sockets or pymemcache's error classes.

Every record written is also published: its public JSON document under
`pub:<job>.<read token>`, which nginx serves for /progress/<job>/<token>/
without reaching Django (deploy/nginx/webfarm.conf.template), on the
server nginx's key hash picks.
"""

import json
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pymemcache.exceptions import MemcacheError

from progress.client import NGINX_READ_PREFIX, get_client
from progress.conf import get_config, lost_after
from progress.exceptions import ProgressUnavailable
from progress.records import JobRecord

logger = logging.getLogger(__name__)

CAS_ATTEMPTS = 20


def record_key(job_id: str) -> str:
    return f"job:{job_id}"


def cancel_key(job_id: str) -> str:
    return f"cancel:{job_id}"


def public_key(job_id: str, read_token: str) -> str:
    # The prefix puts it on the server nginx asks first (progress.client.FarmHash).
    return f"{NGINX_READ_PREFIX}{job_id}.{read_token}"


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
    publish(record)


def write(record: JobRecord) -> None:
    with _memcached("set"):
        stored = get_client().set(record_key(record.job), record.to_bytes(), expire=_ttl())
    if not stored:
        raise ProgressUnavailable("memcached refused the write (out of memory?)")
    publish(record)


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
            publish(record)
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


def publish(record: JobRecord) -> None:
    """Write the record's public document for nginx's fast path. Best effort:
    without it nginx falls back to Django, which reads the record.

    A final document is kept as long as the record and never overwritten by
    a running one (a heartbeat racing the job's end loses the cas). A running
    one lives only as long as a job may stay silent, so a copy a failed write
    left behind cannot outlast the job's next beats.
    """
    if not record.read_token:
        return
    key, document, expire = _public_document(record)
    client = get_client()
    try:
        if record.is_final:
            client.set(key, document, expire=expire)
            return
        current, token = client.gets(key)
        if current is None:
            client.add(key, document, expire=expire)
        elif not json.loads(current).get("final"):
            client.cas(key, document, token, expire=expire)
    except (MemcacheError, OSError, ValueError) as exc:
        logger.warning("job %s: progress document not published: %s", record.job, exc)


def republish(record: JobRecord) -> None:
    """Put back a document a poll found missing (nginx fell back to Django):
    one `add`, which never replaces the document a writer put there meanwhile.
    Without nginx in front it is a cheap refusal."""
    if not record.read_token:
        return
    key, document, expire = _public_document(record)
    try:
        get_client().add(key, document, expire=expire)
    except (MemcacheError, OSError) as exc:
        logger.warning("job %s: progress document not published again: %s", record.job, exc)


def _public_document(record: JobRecord) -> tuple[str, bytes, int]:
    """The key, the JSON and the lifetime of a record's public document."""
    document = json.dumps(record.public(), separators=(",", ":")).encode()
    expire = _ttl() if record.is_final else max(int(lost_after()), 2)
    return public_key(record.job, record.read_token), document, expire
