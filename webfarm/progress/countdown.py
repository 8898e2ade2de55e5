"""A job split into parts that run as separate tasks on any workers, and the
count of the parts still to finish (the fan-out of docs/jobs.md; the combined bar and
the tasks build on this).

Each part's row (JobPart) is the durable record of whether it finished. The
count lives in memcached as well (`parts:<job>:left`), so that a part that
is not the last learns so in one round trip, without a query. The part whose
finish takes the count to zero sends the merge. It is sent once:

- a part delivered twice finishes once: only the first finish changes its
  row (queued or running -> succeeded), and only that one counts down;
- a count memcached lost (restarted, evicted, unreachable) is never made
  again: the rows are counted instead, by every part that finishes after;
- a zero is believed only when the rows agree (a count planted in
  memcached cannot merge a job early), and the merge is then claimed in the
  job's row (Job.merge_sent_at), which one update wins however many parts
  counted zero at once.
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.progress.models import Job, JobPart
from webfarm.progress.states import State

logger = logging.getLogger(__name__)

_UNFINISHED = (State.QUEUED, State.RUNNING)


@dataclass(frozen=True)
class PartSpec:
    """One part as the job type splits it: its share of the work and what it works on."""

    size: int = 1
    params: dict[str, Any] = field(default_factory=dict)


def left_key(job_id: str) -> str:
    return f"parts:{job_id}:left"


def create_parts(job: Job, specs: Sequence[PartSpec]) -> list[JobPart]:
    """The job's parts, queued. Their count in memcached (`left_key`) is
    written with the job's record (services.create_job), in its round trip."""
    if not specs:
        raise ValueError("a job split in parts needs at least one part")
    return JobPart.objects.bulk_create(
        JobPart(job=job, index=index, size=max(spec.size, 0), params=spec.params)
        for index, spec in enumerate(specs)
    )


def short_worker(worker: str) -> str:
    """What the bar says a part runs on: the worker's name, without the process."""
    return worker.partition("#")[0][:200]


def start_part(job_id: str, index: int, *, worker: str) -> JobPart | None:
    """Mark a queued part running on `worker` (its name and process:
    "celery@host#pid"); None when it is not queued (delivered twice,
    stopped, or finished): the caller must not run it."""
    started = JobPart.objects.filter(job_id=job_id, index=index).move(
        source=State.QUEUED,
        target=State.RUNNING,
        worker=worker[:200],
        started_at=datetime.now(UTC),
        beat_at=None,
    )
    return JobPart.objects.filter(job_id=job_id, index=index).first() if started else None


def stop_parts(job_id: str, state: State) -> int:
    """The job ended without its merge: parts not finished end as it did, so
    none starts any more and the dashboard shows none running."""
    return JobPart.objects.filter(job_id=job_id).move(
        source=_UNFINISHED, target=state, finished_at=datetime.now(UTC)
    )


def finish_part(
    job_id: str,
    index: int,
    *,
    result: dict[str, Any] | None = None,
    on_recount: Callable[[], None] | None = None,
) -> bool:
    """Record that a part finished. True for exactly one caller per job:
    the one that must send the merge, all parts being done. `on_recount` is
    called when memcached had lost the count and parts are left: a memcached
    that restarted lost the queued tasks too, if it is the broker."""
    finished = JobPart.objects.filter(job_id=job_id, index=index).move(
        source=_UNFINISHED, target=State.SUCCEEDED, result=result or {}, finished_at=datetime.now(UTC)
    )
    if not finished:
        return False  # finished already: that finish counted
    counted = _count_down(job_id)
    left = counted
    if counted is None or counted == 0:
        # memcached lost the count, or says this was the last: the rows decide.
        left = parts_left(job_id)
    if counted is None and left and on_recount is not None:
        on_recount()
    return left == 0 and claim_merge(job_id)


def parts_left(job_id: str) -> int:
    return JobPart.objects.filter(job_id=job_id).exclude(state=State.SUCCEEDED).count()


def _count_down(job_id: str) -> int | None:
    """The count after this part's finish; None when memcached has none."""
    try:
        return get_client().decr(left_key(job_id), 1)
    except (MemcacheError, OSError) as exc:
        logger.info("job %s: parts counted in the database: %s", job_id, exc)
        return None


def claim_merge(job_id: str) -> bool:
    """Claim the sending of the merge: True for one caller only."""
    return bool(
        Job.objects.filter(pk=job_id, merge_sent_at__isnull=True).update(merge_sent_at=datetime.now(UTC))
    )
