"""Ending jobs whose worker died.

A running job writes its record at least every HEARTBEAT_INTERVAL. One that
has been silent for lost_after() seconds (LOST_AFTER_BEATS intervals) lost its
worker: SIGKILL, out of memory, a machine gone. The reaper, a periodic task,
ends it as `lost` in memcached and the database and hands it to `on_lost`,
which may run it again as a new job (the report types decide).

The reaper never judges by the database alone: while memcached is
unreachable nobody can see heartbeats, and it waits. A worker that alone
lost its way to memcached beats in the job's row instead (Job.beat_at), and
a job that beat there lately is alive, whatever memcached's record says. A
record missing from a memcached that answers (restarted, evicted) gets the
same grace: a live job writes it again within one heartbeat.

It also looks after queued jobs whose task never reached a worker
(`reap_queued`): the web process died between writing the job and sending
its task, or the broker lost it (a memcached broker restarted). Such a task is
sent again, once; sending twice is harmless, since a job starts only from
`queued` (webfarm.progress.services.begin_job). A job still queued long after that is
ended as lost, with the reason, so no job waits forever.

And it writes to memcached the ends it missed (`publish_ends`): a job that
ended while memcached was away still had its old record there.
"""

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.progress import liveness, store
from webfarm.progress.conf import get_config, lost_after
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.models import Job
from webfarm.progress.parts.reaper import PartSender, reap_parts
from webfarm.progress.rebuilt import record_from_job
from webfarm.progress.records import JobRecord
from webfarm.progress.sending import past_hard_limit
from webfarm.progress.services import finish_lost, finish_never_started
from webfarm.progress.states import State

logger = logging.getLogger(__name__)

OnLost = Callable[[Job, JobRecord], str | None]


def reap(
    *, on_lost: OnLost | None = None, parts: PartSender | None = None, now: float | None = None
) -> list[str]:
    """End every running job silent for lost_after(); returns their ids. A
    job split in parts is judged part by part until its merge starts
    (webfarm.progress.parts.reaper; only with `parts`, which sends their tasks)."""
    now = time.time() if now is None else now
    silence = lost_after()
    cutoff = datetime.fromtimestamp(now, UTC) - timedelta(seconds=silence)
    # A job that beat in its row lately is alive, whatever memcached says (webfarm.progress.reporter).
    suspects = list(
        Job.objects.filter(state=State.RUNNING, started_at__lt=cutoff).exclude(beat_at__gte=cutoff)
    )
    if not suspects:
        return []
    try:
        records = store.read_many([job.id for job in suspects])
        missing_since = _missing_since([job.id for job in suspects if job.id not in records], now)
        living = liveness.alive(job.worker for job in suspects)
    except (ProgressUnavailable, MemcacheError, OSError) as exc:
        logger.info("reaper waits: memcached unreachable (%s)", exc)
        return []
    lost = []  # and the split jobs acted on
    for job in suspects:
        record = records.get(job.id)
        if job.part_count and job.merge_started_at is None:
            # Parts beat in the job's record: one live part hides a dead one.
            waiting = record is None and now - missing_since[job.id] < silence
            if (
                not waiting
                and parts is not None
                and reap_parts(job, record, now=now, silence=silence, send=parts)
            ):
                lost.append(job.id)
            continue
        if record is None:
            if now - missing_since[job.id] < silence:
                continue
            record = JobRecord(job=job.id, owner=job.owner_id or 0, kind=job.kind, title=job.title)
        elif record.is_final or now - (record.heartbeat_at or record.updated_at) < silence:
            continue
        if job.worker in living and not past_hard_limit(job.kind, job.started_at, now=now, slack=silence):
            # Slow, not dead: starved of CPU, or in a C call that holds the GIL.
            logger.info("job %s: silent, but its process %s lives: waited for", job.id, job.worker)
            continue
        logger.info(
            "job %s: silent, and its process %s %s",
            job.id,
            job.worker or "(none named)",
            "is past its time limit" if job.worker in living else "is not listed as living",
        )
        if finish_lost(job, record, silent_for=silence, on_lost=on_lost):
            lost.append(job.id)
    return lost


def _missing_since(job_ids: list[str], now: float) -> dict[str, float]:
    """When the reaper first found each record missing (kept in memcached)."""
    if not job_ids:
        return {}
    client = get_client()
    keys = {job_id: f"reap:missing:{job_id}" for job_id in job_ids}
    for key in keys.values():
        client.add(key, str(now).encode(), expire=int(4 * lost_after()) + 60)
    found = client.get_many(list(keys.values()))
    return {job_id: _when(found.get(key), now) for job_id, key in keys.items()}


def _when(raw: bytes | None, now: float) -> float:
    """A time the reaper wrote; `now` for anything else (the grace starts over)."""
    try:
        when = float(raw) if raw is not None else now
    except ValueError:
        return now
    return when if 0 < when <= now else now


QUEUED_BATCH = 100


def reap_queued(*, send: Callable[[Job], None], now: float | None = None) -> list[str]:
    """Queued jobs whose task never reached a worker: their task is sent
    (again, at most once), or, when even that did not reach one, they are
    ended as lost. Returns the ids of the jobs acted on."""
    config = get_config()
    now = time.time() if now is None else now
    cutoff = datetime.fromtimestamp(now - config["SEND_GRACE"], UTC)
    waiting = list(
        Job.objects.filter(state=State.QUEUED, created_at__lt=cutoff).order_by("created_at")[:QUEUED_BATCH]
    )
    if not waiting:
        return []
    try:
        records = store.read_many([job.id for job in waiting])
    except ProgressUnavailable as exc:
        # memcached away: maybe the broker too; nothing can be judged now.
        logger.info("reaper waits: memcached unreachable (%s)", exc)
        return []
    acted = []
    for job in waiting:
        sent = job.sent_at.timestamp() if job.sent_at else None
        forgotten = job.id not in records  # memcached restarted: a memcached broker lost the task too
        if sent is None or (job.sends < 2 and (forgotten or now - sent >= config["RESEND_AFTER"])):
            if _send(job, send, forgotten):
                acted.append(job.id)
        elif job.sends >= 2 and now - sent >= config["QUEUED_LOST_AFTER"] and finish_never_started(job):
            acted.append(job.id)
    return acted


def _send(job: Job, send: Callable[[Job], None], forgotten: bool) -> bool:
    why = "never sent" if job.sent_at is None else "lost by memcached" if forgotten else "still queued"
    try:
        if forgotten:  # its page shows it queued again, not "temporarily unavailable"
            store.create_if_missing(record_from_job(job))
        send(job)
    except Exception as exc:
        logger.warning("job %s (%s): its task could not be sent again: %s", job.id, why, exc)
        return False
    logger.warning("job %s (%s): its task was sent again", job.id, why)
    return True


ENDS_BATCH = 100


def publish_ends() -> list[str]:
    """Jobs whose end the database holds and memcached was never told (it
    was away when they ended): their record, rebuilt from the row, is
    written over whatever memcached still says (queued, running). Returns
    their ids; while memcached is away, none."""
    waiting = list(Job.objects.filter(end_unpublished=True).order_by("finished_at")[:ENDS_BATCH])
    published = []
    for job in waiting:
        try:
            store.write(record_from_job(job))
        except ProgressUnavailable as exc:
            logger.info("reaper waits: memcached unreachable (%s)", exc)
            break
        published.append(job.id)
    Job.objects.filter(pk__in=published).update(end_unpublished=False)
    for job_id in published:
        logger.warning("job %s: its end, kept in the database only, is written to memcached", job_id)
    return published
