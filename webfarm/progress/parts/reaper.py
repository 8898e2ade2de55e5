"""The reaper's work on a job split in parts, before its merge starts
(webfarm.progress.launching.reaper calls it for every such job running for lost_after()).

- A running part silent for lost_after() (no write in its entry of the
  job's record, none in its row while memcached was away) lost its worker:
  that part alone goes back to queued, one attempt more, and its task is
  sent again. The other parts, running or done, are kept. A part lost
  MAX_PART_ATTEMPTS times ends the job as lost, and the job runs again as
  a new one where its type allows (retry_on_lost), as a whole job would.
- Every part done and no merge sent (the last part's worker died between
  its finish and the send, or the broker refused it): the merge is
  claimed and sent. A merge sent and not started after RESEND_AFTER, or
  at once when memcached lost the record, is sent again (it starts once:
  fanout.begin_merge).
- No part running and some queued, with nothing heard for RESEND_AFTER, or
  no record at all (the broker lost their tasks: a memcached broker
  restarted): their tasks are sent once more, and the job is ended as lost
  QUEUED_LOST_AFTER later. (A part that finishes and finds the parts' count
  gone sends them at once: webfarm.progress.sending.send_queued.)
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import F
from pymemcache.exceptions import MemcacheError

from webfarm.progress import liveness, store
from webfarm.progress.conf import get_config
from webfarm.progress.countdown import claim_merge, stop_parts
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.models import Job, JobPart
from webfarm.progress.rebuilt import or_row
from webfarm.progress.records import JobRecord
from webfarm.progress.sending import past_hard_limit
from webfarm.progress.services import finish_lost
from webfarm.progress.states import State

logger = logging.getLogger(__name__)

MAX_PART_ATTEMPTS = 2


@dataclass(frozen=True)
class PartSender:
    """How the reaper sends tasks again (webfarm.progress.launching.running gives them)."""

    part: Callable[[Job, int], None]  # one part's
    queued: Callable[[Job], None]  # every queued part's
    merge: Callable[[Job], None]
    # A job lost for good (a part lost MAX_PART_ATTEMPTS times): run it again
    # as a new job where its type allows (launching.running.retry_lost).
    lost: Callable[[Job, JobRecord], str | None] | None = None


def reap_parts(job: Job, record: JobRecord | None, *, now: float, silence: float, send: PartSender) -> bool:
    """Act on a split job whose merge has not started; returns whether it did."""
    rows = list(JobPart.objects.filter(job_id=job.id).order_by("index"))
    if rows and all(row.state == State.SUCCEEDED for row in rows):
        return _merge_again(job, now=now, send=send, forgotten=record is None)
    entries = record.parts if record is not None else []
    running = [row for row in rows if row.state == State.RUNNING]
    silent = [row for row in running if now - _last_beat(row, entries) >= silence]
    living = _living([row.worker for row in silent])
    for row in silent:
        if row.worker in living and not past_hard_limit(job.kind, row.started_at, now=now, slack=silence):
            # Slow, not dead (webfarm.progress.liveness).
            logger.info(
                "job %s: part %s silent, but its process %s lives: waited for", job.id, row.index, row.worker
            )
            continue
        return _part_lost(job, row, record, silence=silence, send=send)
    if not running and any(row.state == State.QUEUED for row in rows):
        return _queued_again(job, record, now=now, send=send)
    return False


def _living(workers: list[str]) -> set[str]:
    try:
        return liveness.alive(workers)
    except (MemcacheError, OSError) as exc:  # judged by their beats alone, as before
        logger.info("parts' liveness not read: %s", exc)
        return set()


def _when(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else 0.0


def _last_beat(row: JobPart, entries: list) -> float:
    """When the part last proved alive: its start, its row's beat, its entry's."""
    beats = [_when(row.started_at), _when(row.beat_at)]
    entry = entries[row.index] if row.index < len(entries) else None
    if entry is not None and entry.attempt == row.attempt and entry.beat_at is not None:
        beats.append(entry.beat_at)
    return max(beats)


def _part_lost(job: Job, row: JobPart, record: JobRecord | None, *, silence: float, send: PartSender) -> bool:
    if row.attempt >= MAX_PART_ATTEMPTS:
        logger.warning("job %s: part %s lost %s times: the job is lost", job.id, row.index, row.attempt)
        ended = finish_lost(job, or_row(record, job), silent_for=silence, on_lost=send.lost)
        if ended:
            JobPart.objects.filter(pk=row.pk).move(source=State.RUNNING, target=State.LOST)
            stop_parts(job.id, State.CANCELLED)
        return ended
    again = JobPart.objects.filter(pk=row.pk, attempt=row.attempt).move(
        source=State.RUNNING,
        target=State.QUEUED,
        attempt=F("attempt") + 1,
        worker="",
        beat_at=None,
        started_at=None,
    )
    if not again:
        return False
    _entry_queued(job.id, row.index, row.attempt + 1)
    logger.warning(
        "job %s: part %s lost its worker %s (no heartbeat for %.0f s): it runs again",
        job.id,
        row.index,
        row.worker,
        silence,
    )
    try:
        send.part(job, row.index)
    except Exception as exc:  # the part is queued: sent with the queued ones later
        logger.warning("job %s: part %s not sent again: %s", job.id, row.index, exc)
    return True


def _entry_queued(job_id: str, index: int, attempt: int) -> None:
    """The bar shows the part waiting again, and its old run (if it is only
    stalled) sees a newer attempt and stops writing."""

    def requeue(record: JobRecord) -> bool:
        if index >= len(record.parts):
            return False
        entry = record.parts[index]
        entry.state, entry.done, entry.rate, entry.worker, entry.attempt = State.QUEUED, 0.0, 0.0, "", attempt
        return True

    try:
        store.update(job_id, requeue)
    except ProgressUnavailable as exc:
        logger.info("job %s: part %s shown as before: %s", job_id, index, exc)


def _merge_again(job: Job, *, now: float, send: PartSender, forgotten: bool) -> bool:
    """`forgotten`: memcached lost the job's record (it restarted), and a
    memcached broker lost the merge's task with it: sent again at once, not
    RESEND_AFTER after it was sent (a merge delivered twice runs once)."""
    if job.merge_sent_at is None:
        if not claim_merge(job.id):
            return False
        why = "never sent"
    elif job.merge_started_at is None and (
        forgotten or now - _when(job.merge_sent_at) >= get_config()["RESEND_AFTER"]
    ):
        Job.objects.filter(pk=job.id, merge_started_at__isnull=True).update(merge_sent_at=datetime.now(UTC))
        why = "not started"
    else:
        return False
    logger.warning("job %s: every part done, merge %s: it is sent", job.id, why)
    send.merge(job)
    return True


def _queued_again(job: Job, record: JobRecord | None, *, now: float, send: PartSender) -> bool:
    config = get_config()
    heard = max(_when(job.sent_at), (record.heartbeat_at or 0.0) if record is not None else 0.0)
    forgotten = record is None  # memcached restarted: a memcached broker lost the tasks too
    if job.sends < 2 and (forgotten or now - heard >= config["RESEND_AFTER"]):
        logger.warning("job %s: parts queued and none running: their tasks are sent again", job.id)
        send.queued(job)
        return True
    if job.sends >= 2 and now - heard >= config["QUEUED_LOST_AFTER"]:
        ended = finish_lost(job, or_row(record, job), silent_for=now - heard, on_lost=None)
        if ended:
            stop_parts(job.id, State.CANCELLED)
        return ended
    return False
