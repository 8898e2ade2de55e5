"""memcached operations on job records and cancel flags.

Every memcached failure leaves here as ProgressUnavailable, so callers deal with
one exception, never with sockets or pymemcache's error classes.

Records are sealed (webfarm.core.seal): one that was planted, copied from another
job's key or is not a record this code writes reads as missing, and callers
fall back to the database as after a memcached restart.

Every record written is also published: its public JSON document under
`pub:<job>.<read token>`, which nginx serves for /progress/<job>/<token>/
without reaching Django (deploy/nginx/webfarm.conf.template), on the
server nginx's key hash picks. A document never goes back to an older
record's: a poll's republish only adds a missing one, and a writer whose
record is newer puts its own over one made from an older record.
"""

import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import cast, overload

from pymemcache.exceptions import MemcacheError

from webfarm.core import backoff
from webfarm.core.client import MetaBatch, MetaReply, StableHashClient, get_client, get_values, read_by_nginx
from webfarm.core.seal import seal, seal_json, unseal, unseal_json
from webfarm.core.slots import SlotsTaken, Taking
from webfarm.core.tampering import refused
from webfarm.progress.conf import get_config, lost_after
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.records import CorruptRecord, JobRecord, iso

logger = logging.getLogger(__name__)

CAS_ATTEMPTS = 50  # with backoff between them: at most about 2.3 s in all


def record_key(job_id: str) -> str:
    return f"job:{job_id}"


def cancel_key(job_id: str) -> str:
    return f"cancel:{job_id}"


# Public documents: nginx's fast path reads them (the nginx configs in deploy/
# name the same prefix), so they go where nginx looks first.
PUBLIC_PREFIX = read_by_nginx("pub:")


def public_key(job_id: str, read_token: str) -> str:
    return f"{PUBLIC_PREFIX}{job_id}.{read_token}"


@contextmanager
def _memcached(action: str) -> Iterator[None]:
    try:
        yield
    except (MemcacheError, OSError) as exc:
        raise ProgressUnavailable(f"memcached {action} failed: {exc}") from exc


def _ttl(record: JobRecord | None = None) -> int:
    """A live job's record lives RECORD_TTL (its worker rewrites it every
    heartbeat, so this only bounds one nothing ends); an ended job's only
    FINAL_TTL: long enough for every open page to see the end, after which
    reads come from the database row, which keeps it for good."""
    config = get_config()
    return int(config["FINAL_TTL"] if record is not None and record.is_final else config["RECORD_TTL"])


def _sealed(record: JobRecord) -> bytes:
    return seal(record_key(record.job), record.to_bytes(), ttl=_ttl(record))


def _record(job_id: str, raw: bytes | None) -> JobRecord | None:
    """The record in `raw` read under job_id's key, or None (missing or refused)."""
    key = record_key(job_id)
    value = unseal("job", key, raw)
    if value is None:
        return None
    try:
        record = JobRecord.from_bytes(value)
    except CorruptRecord as exc:
        refused("job", key, str(exc))
        return None
    if record.job != job_id:
        refused("job", key, "another job's record")
        return None
    return record


# read()'s `raw` when the caller has not read the record yet.
UNREAD = object()


def read(job_id: str, *, raw: bytes | object | None = UNREAD) -> JobRecord | None:
    """The job's record; `raw` is its value if the caller read it already
    (with other keys in one round trip: webfarm.core.users.user_with)."""
    if raw is UNREAD:
        with _memcached("get"):
            raw = get_client().get(record_key(job_id))
    return _record(job_id, cast("bytes | None", raw))


def read_many(job_ids: list[str]) -> dict[str, JobRecord]:
    """Records of several jobs in one round trip per server; missing ones left out."""
    if not job_ids:
        return {}
    with _memcached("get_many"):
        found = get_client().get_many([record_key(job_id) for job_id in job_ids])
    records = {job_id: _record(job_id, found.get(record_key(job_id))) for job_id in job_ids}
    return {job_id: record for job_id, record in records.items() if record is not None}


def create(
    record: JobRecord, *, taking: Taking | None = None, counters: Mapping[str, int] | None = None
) -> None:
    """Write a new record and its public document, take the job's limit
    slots (`taking`) and set the job's `counters` (keys living as long as
    the record), in one round trip (on one server). Refuses to overwrite
    an existing record. Raises SlotsTaken, with nothing written, when a racer
    took one of the slots first."""
    batch = MetaBatch()
    if taking is not None:
        taking.add_to(batch)
    key = record_key(record.job)
    added = batch.set(key, value=_sealed(record), ttl=_ttl(record), mode="add")
    published = None
    if record.read_token:
        public, document, expire = _public_document(record)
        # Dark while the pool changes (a new job's: none to put out either).
        if not batch.ring.dark(public):
            published = batch.set(public, value=document, ttl=expire, mode="add")
    counted = [
        batch.set(counter, value=str(value).encode(), ttl=_ttl(record))
        for counter, value in (counters or {}).items()
    ]
    try:
        with _memcached("add"):
            # errors=True: a full memcached (-M) refusing the record still
            # answers for the slots, which are then given back, not left
            # held for a job that never was (QUEUED_LEASE).
            replies = batch.run(errors=True)
    except ProgressUnavailable:
        if taking is not None:
            taking.unknown()  # the caller's release reads them back
        raise
    refused = next((reply for reply in replies if reply.refused), None)
    every_slot = taking is None or taking.taken(replies)
    if refused is None and every_slot and replies[added].done:
        return
    undo = MetaBatch()
    if replies[added].done:
        undo.delete(key)
    if published is not None and replies[published].done:
        undo.delete(public)
    for counter, index in zip(counters or {}, counted, strict=True):
        if replies[index].done:
            undo.delete(counter)
    with suppress(MemcacheError, OSError):
        undo.run()
    if taking is not None:
        taking.lease.release()
    if refused is not None:
        said = (refused.value or b"").decode(errors="replace")
        raise ProgressUnavailable(f"memcached refused job {record.job}'s record: {said} (full?)")
    if not every_slot:
        raise SlotsTaken(f"job {record.job}: a slot was taken meanwhile")
    raise ProgressUnavailable(f"job {record.job} already has a record")


def create_if_missing(record: JobRecord) -> bool:
    """Write a record only where there is none (memcached lost it); False if
    one appeared meanwhile (another process rebuilt it first)."""
    with _memcached("add"):
        stored = get_client().add(record_key(record.job), _sealed(record), expire=_ttl(record))
    if stored:
        publish(record)
    return bool(stored)


def write(record: JobRecord, *, batch: MetaBatch | None = None) -> list[MetaReply]:
    """Write the record over whatever memcached holds. A final one goes with
    its public document and the job's cancel flag dropped, and with what the
    caller put in `batch` (its counters), all in one round trip; the batch's
    replies are returned."""
    batch = batch or MetaBatch()
    stored = batch.set(record_key(record.job), value=_sealed(record), ttl=_ttl(record))
    if record.is_final:
        if record.read_token:
            public, document, expire = _public_document(record)
            batch.set(public, value=document, ttl=expire)
        batch.delete(cancel_key(record.job))  # it has done its work (else it expires)
    with _memcached("set"):
        replies = batch.run(errors=True)
    if not replies[stored].done:
        raise ProgressUnavailable("memcached refused the write (out of memory?)")
    if not record.is_final:
        publish(record)
    return replies


@overload
def update(
    job_id: str, change: Callable[[JobRecord], bool], *, read_token: str = "", missing: None = None
) -> JobRecord | None: ...


@overload
def update(
    job_id: str,
    change: Callable[[JobRecord], bool],
    *,
    read_token: str = "",
    missing: Callable[[], JobRecord],
) -> JobRecord: ...


def update(
    job_id: str,
    change: Callable[[JobRecord], bool],
    *,
    read_token: str = "",
    missing: Callable[[], JobRecord] | None = None,
) -> JobRecord | None:
    """Apply `change` atomically (gets/cas). `change` returns False to leave it;
    it sees the job's cancel flag as `cancel_requested`.

    Returns the record as it stands afterwards, or None if there is none.
    `read_token`: the job's, if the caller knows it: its public document is
    then read with the record and written with it, two round trips in all.
    `missing`: where memcached has no record (lost, or refused as planted),
    `change` goes to the one `missing()` makes instead, with memcached's
    cancel flag, and that one is put back unless another process put one
    first; then theirs is returned (webfarm.progress.rebuilt.changed).
    """
    record = _update(job_id, change, read_token)
    if record is not None or missing is None:
        return record
    record = missing()
    record.cancel_requested = is_cancel_requested(job_id)
    if change(record) and not create_if_missing(record):
        return read(job_id) or missing()
    return record


def _update(job_id: str, change: Callable[[JobRecord], bool], read_token: str) -> JobRecord | None:
    key, flag = record_key(job_id), cancel_key(job_id)
    public = public_key(job_id, read_token) if read_token else None
    for attempt in range(CAS_ATTEMPTS):
        if attempt:
            backoff.after_lost_race(attempt)
        # Each try reads and writes through one ring (a cas token is good only
        # on the ring that issued it), the one the process is on as it
        # begins: the pauses between tries may outlast a stage of a pool change.
        client = get_client()
        with _memcached("gets"):
            found = client.gets_many([key, flag] if public is None else [key, flag, public])
        raw, token = found.get(key, (None, None))
        if raw is None:
            return None
        record = _record(job_id, raw)
        if record is None:  # refused: as good as missing; the caller rebuilds it
            return None
        # The cancel flag, read in the same round trip, says what the record's field says.
        record.cancel_requested = record.cancel_requested or _cancel_flag(job_id, found.get(flag, (None,))[0])
        if not change(record):
            return record
        record.updated_at = time.time()
        if public is not None and record.read_token == read_token and not record.is_final:
            stored = _cas_with_document(client, record, token, found.get(public, (None, None)))
        else:
            with _memcached("cas"):
                stored = client.cas(record_key(job_id), _sealed(record), token, expire=_ttl(record))
            if stored:
                publish(record)
        if stored:
            return record
        if stored is None:  # the key vanished between gets and cas
            return None
    raise ProgressUnavailable(f"job {job_id}: record kept changing, update abandoned")


def _cas_with_document(
    client: StableHashClient, record: JobRecord, token: bytes, document_found: tuple
) -> bool | None:
    """cas the running record and its public document in one round trip:
    True stored, False changed meanwhile, None gone. The document goes by
    its own cas (or add): should the record's cas fail, whoever changed the
    record writes the document after it, so the last document is theirs.

    On `client`, the ring the tokens were read on: a CAS token is its ring's
    (a ChangingRing's say which server issued them), and the process may
    have moved to the next stage of a pool change since the read."""
    batch = MetaBatch(client)
    stored = batch.set(record_key(record.job), value=_sealed(record), ttl=_ttl(record), cas=token)
    public, document, expire = _public_document(record)
    current, current_token = document_found
    written = None
    if current is None:
        written = batch.set(public, value=document, ttl=expire, mode="add")
    elif not _final_document(public, current):
        written = batch.set(public, value=document, ttl=expire, cas=current_token)
    with _memcached("cas"):
        replies = batch.run(errors=True)
    if replies[stored].done:
        if written is not None and not replies[written].done:
            # Our record is the newest, but a document was put there since we
            # read: a poll's republish, from the record as it was before ours
            # (a bar would go back through nginx until the next write).
            _publish_over_older(record)
        return True
    if replies[stored].refused:
        raise ProgressUnavailable("memcached refused the write (out of memory?)")
    return None if replies[stored].missing else False


# A cancel flag is sealed like a record: one planted by anyone who can reach
# memcached (job ids can be listed there) cancels nothing.
CANCEL = b"1"


def request_cancel(job_id: str) -> None:
    key = cancel_key(job_id)
    with _memcached("set"):
        get_client().set(key, seal(key, CANCEL, ttl=_ttl()), expire=_ttl())


def _cancel_flag(job_id: str, raw: bytes | None) -> bool:
    return raw is not None and unseal("cancel", cancel_key(job_id), raw) == CANCEL


def is_cancel_requested(job_id: str) -> bool:
    with _memcached("get"):
        raw = get_client().get(cancel_key(job_id))
    return _cancel_flag(job_id, raw)


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
        elif not _final_document(key, current):
            client.cas(key, document, token, expire=expire)
    except (MemcacheError, OSError) as exc:
        logger.warning("job %s: progress document not published: %s", record.job, exc)


def _publish_over_older(record: JobRecord) -> None:
    """Put the running record's document in place of one made from an
    older record (by its `updated_at`); a newer or final one stays."""
    key, document, expire = _public_document(record)
    ours = iso(record.updated_at) or ""
    try:
        for attempt in range(CAS_ATTEMPTS):
            if attempt:
                backoff.after_lost_race(attempt)
            client = get_client()  # each try on the ring of its moment, as in update()
            if client.dark(key):
                return  # the pool changes: the record's write put it out, and it stays out
            current, token = client.gets(key)
            if current is None:
                if client.add(key, document, expire=expire, noreply=False):
                    return
                continue
            theirs = _document_of(key, current)
            if theirs is not None:
                stamp = theirs.get("updated_at")
                if theirs.get("final") is True or (isinstance(stamp, str) and stamp >= ours):
                    return
            if client.cas(key, document, token, expire=expire, noreply=False):
                return
    except (MemcacheError, OSError) as exc:
        logger.warning("job %s: progress document not published: %s", record.job, exc)


def read_public(job_id: str, read_token: str) -> bytes | None:
    """The job's public document as published for nginx, without its seal, if
    it carries this farm's seal for this job and token (else None, as if it
    were missing).
    One get: what a poll on the read-token URL costs when Django answers it."""
    key = public_key(job_id, read_token)
    with _memcached("get"):
        raw = get_values([key]).get(key)
    return public_body(job_id, read_token, raw)


def public_body(job_id: str, read_token: str, raw: bytes | None) -> bytes | None:
    """read_public's answer when `raw` is the value read under the document's
    key (public_key) already."""
    if raw is None:
        return None
    body = unseal_json(public_key(job_id, read_token), raw)
    if body is None:
        # The read token is a bearer secret: the log shows the key without it.
        refused("pub", public_key(job_id, "<token>"), "not a progress document of this job")
    return body


def _document_of(key: str, raw: bytes) -> dict | None:
    """A public document of ours, parsed (None for anything else: a planted
    or broken value, which the next write replaces)."""
    body = unseal_json(key, raw)
    if body is None:
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def _final_document(key: str, raw: bytes) -> bool:
    """Whether the public document memcached holds is a final one of ours:
    a planted final document (or anything else) is replaced by the next write."""
    document = _document_of(key, raw)
    return document is not None and document.get("final") is True


def republish(record: JobRecord) -> None:
    """Put back a document a poll found missing: one `add`, which never
    replaces the document a writer put there meanwhile."""
    if not record.read_token:
        return
    key, document, expire = _public_document(record)
    try:
        client = get_client()
        if client.dark(key):
            return  # the pool changes: it stays missing, and the poll costs no trip more
        client.add(key, document, expire=expire)
    except (MemcacheError, OSError) as exc:
        logger.warning("job %s: progress document not published again: %s", record.job, exc)


def _public_document(record: JobRecord) -> tuple[str, bytes, int]:
    """The key, the JSON and the lifetime of a record's public document."""
    key = public_key(record.job, record.read_token)
    document = seal_json(key, json.dumps(record.public(), separators=(",", ":")).encode())
    expire = _ttl(record) if record.is_final else max(int(lost_after()), 2)
    return key, document, expire
