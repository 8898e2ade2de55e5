"""Ending jobs whose worker died.

A running job writes its record at least every HEARTBEAT_INTERVAL. One that
has been silent for lost_after() seconds (LOST_AFTER_BEATS intervals) lost its
worker: SIGKILL, out of memory, a machine gone. The reaper, a periodic task,
ends it as `lost` in memcached and the database and hands it to `on_lost`,
which may run it again as a new job (the report types decide).

The reaper never judges by the database alone: while memcached is
unreachable nobody can see heartbeats, and it waits. A record missing from a
memcached that answers (restarted, evicted) gets the same grace: a live job
writes it again within one heartbeat.
"""

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from pymemcache.exceptions import MemcacheError

from progress import store
from progress.client import get_client
from progress.conf import lost_after
from progress.exceptions import ProgressUnavailable
from progress.models import Job
from progress.records import JobRecord
from progress.services import finish_lost
from progress.states import State

logger = logging.getLogger(__name__)

OnLost = Callable[[Job, JobRecord], str | None]


def reap(*, on_lost: OnLost | None = None, now: float | None = None) -> list[str]:
    """End every running job silent for lost_after(); returns their ids."""
    now = time.time() if now is None else now
    silence = lost_after()
    cutoff = datetime.fromtimestamp(now, UTC) - timedelta(seconds=silence)
    suspects = list(Job.objects.filter(state=State.RUNNING, started_at__lt=cutoff))
    if not suspects:
        return []
    try:
        records = store.read_many([job.id for job in suspects])
        missing_since = _missing_since([job.id for job in suspects if job.id not in records], now)
    except (ProgressUnavailable, MemcacheError, OSError) as exc:
        logger.info("reaper waits: memcached unreachable (%s)", exc)
        return []
    lost = []
    for job in suspects:
        record = records.get(job.id)
        if record is None:
            if now - missing_since[job.id] < silence:
                continue
            record = JobRecord(job=job.id, owner=job.owner_id, kind=job.kind, title=job.title)
        elif record.is_final or now - (record.heartbeat_at or record.updated_at) < silence:
            continue
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
    return {job_id: float(found.get(key, str(now).encode())) for job_id, key in keys.items()}
