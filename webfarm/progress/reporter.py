"""What task code calls to publish progress.

    reporter.plan([("reading orders", 80), ("aggregating", 5), ("writing file", 15)])
    reporter.stage("reading orders", total=rows)
    for i, row in enumerate(rows, 1):
        ...
        reporter.update(i)

update() only stores numbers in memory and compares the clock with a deadline:
memcached sees at most one write per FLUSH_INTERVAL, so a task may call it a
million times in a tight loop. Each write is a compare-and-swap on the
record as memcached holds it: it reads the cancel request that came in (a
cancelled job gets JobCancelled from its next update()), and it never
writes over a record someone else ended (the reaper took the job for lost
while this worker was stalled): the task gets JobEnded and stops.
"""

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from django.db import DatabaseError

from webfarm.progress import heartbeats, store
from webfarm.progress.conf import get_config
from webfarm.progress.exceptions import JobCancelled, JobEnded, ProgressUnavailable
from webfarm.progress.models import Job
from webfarm.progress.records import JobRecord, metadata_problem
from webfarm.progress.states import State

logger = logging.getLogger(__name__)

# Weight of the newest rate sample in the ETA's moving average.
ETA_SMOOTHING = 0.3
# Wait this long between warnings about an unreachable memcached.
WARN_EVERY = 30.0
_monotonic = time.monotonic  # a module global: update() is the hot path


class ProgressReporter:
    def __init__(
        self,
        record: JobRecord,
        *,
        flush_interval: float | None = None,
        heartbeat_interval: float | None = None,
    ) -> None:
        config = get_config()
        self.record = record
        self.flush_interval = config["FLUSH_INTERVAL"] if flush_interval is None else flush_interval
        self.heartbeat_interval = (
            config["HEARTBEAT_INTERVAL"] if heartbeat_interval is None else heartbeat_interval
        )
        self._current = record.current
        self._total = record.total
        self._message = record.message
        self._weights: dict[str, float] = {}
        self._done_weight = 0.0  # share of the job finished by earlier stages
        self._stage_weight = 1.0  # share of the job the current stage stands for
        self._cancelled = False
        self._ended = False  # ended by someone else: write nothing more
        self._due = 0.0  # monotonic time of the next write
        self._last_flush = 0.0
        self._published = time.monotonic()  # the last write memcached took
        self._beat_in_db = 0.0
        self._rate: float | None = None  # fraction of the job per second
        self._last_sample: tuple[float, float] | None = None
        self._last_warning = -WARN_EVERY
        self._lock = threading.Lock()
        self._heartbeat: int | None = None  # its id on the process's heartbeat thread
        self.flushes = 0
        # Called on every heartbeat (renewing what the job holds: limit slots).
        self.on_beat: Callable[[], None] | None = None
        # What the body keeps for its callers (django.tasks' proposed
        # context.metadata): published by save_metadata() and at the end.
        self.metadata: dict[str, Any] = dict(record.metadata)
        self._metadata_saved = False  # saved since the last write

    # -- what task code calls -------------------------------------------------

    def plan(self, stages: Iterable[tuple[str, float]]) -> None:
        """Declare the stages and their relative cost, so percent moves evenly."""
        stages = list(stages)
        whole = sum(weight for _, weight in stages) or 1.0
        self._weights = {name: weight / whole for name, weight in stages}

    def stage(self, name: str, *, total: int | None = None, message: str = "") -> None:
        """Start a stage; current counts from 0 towards `total` (None: unknown).
        With a plan, the stage must be one of it: an unplanned one would weigh
        nothing, and the bar would stand still through it."""
        if self._weights and name not in self._weights:
            raise ValueError(f"stage {name!r} is not in the plan {list(self._weights)}")
        with self._lock:
            # Without a plan, each stage fills the bar anew.
            if self._weights and self.record.stage and self.record.stage != name:
                self._done_weight += self._stage_weight
            self._stage_weight = self._weights.get(name, 0.0 if self._weights else 1.0)
            self.record.stage = name
            self._current = 0
            self._total = total
            self._message = message
        self.flush()

    def update(self, current: int, *, total: int | None = None, message: str | None = None) -> None:
        """Record progress in the current stage. Cheap: call it as often as you like."""
        self._current = current
        if total is not None:
            self._total = total
        if message is not None:
            self._message = message
        # A seen cancel or end sets _due to 0, so this one comparison covers all.
        if _monotonic() >= self._due:
            if not (self._cancelled or self._ended):
                self._take_metadata_quietly()
                self.flush()
            self.check_cancelled()

    def set_message(self, message: str) -> None:
        self._message = message

    def save_metadata(self) -> None:
        """Publish `metadata` (a JSON object of at most MAX_METADATA_BYTES; a
        ValueError says why not) with the next write: now if one is due, else
        an update's, the heartbeat's or the final one. As cheap as update()
        between writes, so a body may save as often as it updates; it is
        checked, copied and written once per FLUSH_INTERVAL. Raises
        JobCancelled or JobEnded as update() does."""
        self._metadata_saved = True
        # A seen cancel or end sets _due to 0, as for update().
        if _monotonic() >= self._due:
            self._take_metadata()
            if not (self._cancelled or self._ended):
                self.flush()
            self.check_cancelled()

    def _take_metadata_quietly(self) -> None:
        """As _take_metadata(), where no caller can be told (an update, the
        heartbeat): metadata that cannot be written stays as last written."""
        try:
            self._take_metadata()
        except (ValueError, RuntimeError) as exc:  # RuntimeError: changed while read
            logger.warning("job %s: metadata not written: %s", self.record.job, exc)

    def _take_metadata(self) -> None:
        """The saved metadata into the record, for the write about to be made."""
        if self._metadata_saved:
            self._metadata_saved = False
            saved = self._checked_metadata()
            with self._lock:
                self.record.metadata = saved

    def stop(self) -> dict[str, Any]:
        """The body is done: the heartbeat stops (it writes the record the
        final write writes), and the metadata for that write."""
        self.stop_heartbeat()
        return self.kept_metadata()

    def kept_metadata(self) -> dict[str, Any]:
        """The metadata for the final write: as the body left it if it can be
        kept, else as last saved."""
        try:
            return self._checked_metadata()
        except ValueError as exc:
            logger.warning("job %s: metadata not kept at the end: %s", self.record.job, exc)
            return self.record.metadata

    def _checked_metadata(self) -> dict[str, Any]:
        problem = metadata_problem(self.metadata)
        if problem is not None:
            raise ValueError(problem)
        # A copy: what the body changes after saving is not published half-way.
        copied: dict[str, Any] = json.loads(json.dumps(self.metadata))
        return copied

    def check_cancelled(self) -> None:
        """Raise JobCancelled now if the job was cancelled, JobEnded if it was
        ended elsewhere (no memcached trip)."""
        if self._ended:
            raise JobEnded(self.record.job)
        if self._cancelled:
            raise JobCancelled(self.record.job)

    @property
    def ended_elsewhere(self) -> bool:
        return self._ended

    @property
    def cancel_seen(self) -> bool:
        """A write (an update's or the heartbeat's) found the cancel request."""
        return self._cancelled

    # -- writing ----------------------------------------------------------------

    def fraction(self) -> float:
        total = self._total
        within = min(self._current / total, 1.0) if total else 0.0
        return min(self._done_weight + self._stage_weight * within, 1.0)

    def flush(self) -> None:
        """Write the record now, as a cas over what memcached holds; never
        raises for memcached."""
        with self._lock:
            if self._ended:
                return
            now_mono = time.monotonic()
            self._due = 0.0 if self._cancelled else now_mono + self.flush_interval
            self._last_flush = now_mono
            fraction = self.fraction()
            self._update_eta(now_mono, fraction)
            record = self.record
            now = time.time()
            record.current = self._current
            record.total = self._total
            record.message = self._message
            record.percent = round(fraction * 100, 1)
            record.updated_at = record.heartbeat_at = now
            try:
                stored = store.update(record.job, self._onto, read_token=record.read_token)
                if stored is None:  # memcached lost it (restart): put ours back, if still ours
                    stored = self._rebuilt()
                if stored is not None and self._ended_in(stored):
                    self._ended = True  # ended by someone else: stop, write nothing
                    self._due = 0.0
                    logger.warning(
                        "job %s was ended elsewhere (%s): this run stops", record.job, stored.state
                    )
                elif stored is not None and stored.cancel_requested:
                    record.cancel_requested = True
                    self._cancelled = True
                    self._due = 0.0  # the next update() raises
                self.flushes += 1
                self._published = now_mono
            except ProgressUnavailable as exc:
                # The job goes on: progress is a view of the work, not the work.
                if now_mono - self._last_warning >= WARN_EVERY:
                    self._last_warning = now_mono
                    logger.warning("job %s: progress not published: %s", record.job, exc)

    def _ended_in(self, stored: JobRecord) -> bool:
        """Whether the record memcached holds says this run is over."""
        return stored.state != State.RUNNING

    def begin_after(self, stage: str) -> None:
        """Count the planned stages up to `stage` as done: another run did
        them (the parts of a job split in parts, before its merge)."""
        names = list(self._weights)
        if stage not in names:
            raise ValueError(f"stage {stage!r} is not in the plan {names}")
        with self._lock:
            self._done_weight = sum(self._weights[name] for name in names[: names.index(stage) + 1])
            self._stage_weight = 0.0
            self.record.stage = stage

    _PROGRESS_FIELDS = (
        "current",
        "total",
        "message",
        "percent",
        "eta_seconds",
        "stage",
        "heartbeat_at",
        "metadata",
    )

    def caught_up(self, stored: JobRecord) -> None:
        """A record still queued while this run runs is one memcached refused
        the start's write to (full under -M): the database row moved to
        running, and said so to this run. It is brought up to this run, so
        that a queued record is never taken for one ended elsewhere."""
        if stored.state == State.QUEUED and self.record.state == State.RUNNING:
            stored.state, stored.started_at = State.RUNNING, self.record.started_at

    def _onto(self, stored: JobRecord) -> bool:
        """Put this run's progress onto the record memcached holds, if the job
        is still running there (a record someone ended is left as it is)."""
        self.caught_up(stored)
        if stored.state != State.RUNNING or stored.started_at != self.record.started_at:
            return False
        for name in self._PROGRESS_FIELDS:
            setattr(stored, name, getattr(self.record, name))
        return True

    def _rebuilt(self) -> JobRecord | None:
        """The record is gone: write this run's back if the database still says
        it runs; otherwise report how it ended."""
        job_id = self.record.job
        state = Job.objects.filter(pk=job_id).values_list("state", flat=True).first()
        if state != State.RUNNING:
            return replace(self.record, state=state or State.LOST)
        if store.is_cancel_requested(job_id):
            self.record.cancel_requested = True
        if not store.create_if_missing(self.record):
            return store.read(job_id)
        return self.record

    def _update_eta(self, now: float, fraction: float) -> None:
        if self._last_sample is not None:
            then, before = self._last_sample
            if now > then and fraction >= before:
                sample = (fraction - before) / (now - then)
                self._rate = (
                    sample
                    if self._rate is None
                    else ETA_SMOOTHING * sample + (1 - ETA_SMOOTHING) * self._rate
                )
        self._last_sample = (now, fraction)
        if self._rate and self._rate > 0:
            self.record.eta_seconds = round((1.0 - fraction) / self._rate, 1)
        else:
            self.record.eta_seconds = None

    # -- heartbeat --------------------------------------------------------------

    def start_heartbeat(self) -> None:
        """Write at least every HEARTBEAT_INTERVAL even while the task is inside
        one long step, so watchers can tell a slow job from a dead one."""
        if self._heartbeat is None:
            self._heartbeat = heartbeats.start(self.heartbeat_interval / 2, self._beat)

    def stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            heartbeats.stop(self._heartbeat)
            self._heartbeat = None

    def _beat(self) -> None:
        # Saved metadata waits at most this long for a write of its own.
        if self._metadata_saved or time.monotonic() - self._last_flush >= self.heartbeat_interval / 2:
            self._take_metadata_quietly()
            self.flush()
        if self.on_beat is not None:
            self.on_beat()
        self._beat_in_database()

    def _due_in_database(self) -> bool:
        """Whether a heartbeat goes to the database now: memcached has taken
        no write for an interval, and none went there for one."""
        now = time.monotonic()
        interval = self.heartbeat_interval
        if self._ended or now - self._published < interval or now - self._beat_in_db < interval:
            return False
        self._beat_in_db = now
        return True

    def _beat_in_database(self) -> None:
        """While memcached takes no write (this worker lost its way there),
        the heartbeat goes to the job's row, once an interval: the reaper
        on another worker, which still reads memcached's stale heartbeat,
        sees the job is alive and leaves it running."""
        if not self._due_in_database():
            return
        try:
            Job.objects.filter(pk=self.record.job).beat()
        except DatabaseError as exc:
            logger.warning("job %s: no heartbeat anywhere: %s", self.record.job, exc)
