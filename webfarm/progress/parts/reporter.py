"""What one part of a job split in parts publishes its progress through.

The part's code calls the same reporter methods as a whole job's (stage,
update, set_message...). Each write is a cas over the job's record that
changes only this part's entry and the job's figures combined from all
the entries (webfarm.progress.parts.combined): one record, however many parts write it.
"""

import logging
from typing import Any

from django.db import DatabaseError

from webfarm.progress import store
from webfarm.progress.models import Job, JobPart
from webfarm.progress.parts.combined import combine
from webfarm.progress.rebuilt import record_from_job
from webfarm.progress.records import JobRecord, PartProgress
from webfarm.progress.reporter import ProgressReporter
from webfarm.progress.states import State

logger = logging.getLogger(__name__)


class PartReporter(ProgressReporter):
    def __init__(
        self, record: JobRecord, *, index: int, attempt: int, worker: str, share: float, **options: Any
    ) -> None:
        super().__init__(record, **options)
        self.index = index
        self.attempt = attempt
        self.worker = worker
        self.share = share
        self._finished = False
        self._message = ""  # the record's is another part's

    def finish(self) -> None:
        """The part's work is done: its entry says so (a last write)."""
        self._finished = True
        self.flush()

    def _entry(self, stored: JobRecord) -> PartProgress | None:
        return stored.parts[self.index] if self.index < len(stored.parts) else None

    def _ended_in(self, stored: JobRecord) -> bool:
        # The reaper gave this run up for lost and sent the part again.
        entry = self._entry(stored)
        return stored.state != State.RUNNING or (entry is not None and entry.attempt > self.attempt)

    def _onto(self, stored: JobRecord) -> bool:
        self.caught_up(stored)
        entry = self._entry(stored)
        if self._ended_in(stored) or entry is None or entry.state == State.SUCCEEDED:
            return False
        entry.state = State.SUCCEEDED if self._finished else State.RUNNING
        entry.done = 1.0 if self._finished else round(self.fraction(), 4)
        entry.rate = 0.0 if self._finished else round(self._rate or 0.0, 6)
        entry.worker = self.worker
        entry.beat_at = self.record.heartbeat_at
        entry.attempt = self.attempt
        stored.stage = self.record.stage
        # The parts line already counts the parts: the message line says what
        # the part that wrote last is doing, in its job's own words.
        if self._message and not self._finished:
            stored.message = f"Part {self.index + 1} of {len(stored.parts)}: {self._message}"
        stored.heartbeat_at = self.record.heartbeat_at
        combine(stored, share=self.share)
        return True

    def _rebuilt(self) -> JobRecord | None:
        """The record is gone (memcached restarted): rebuild it from the rows,
        with this part's entry, if the job still runs."""
        job = Job.objects.filter(pk=self.record.job).first()
        if job is None or job.state != State.RUNNING:
            return JobRecord(job=self.record.job, owner=0, kind="", state=job.state if job else State.LOST)
        record = record_from_job(job)
        record.started_at = self.record.started_at
        record.slots = self.record.slots
        record.cancel_requested = store.is_cancel_requested(job.id)
        self._onto(record)
        if not store.create_if_missing(record):
            return store.read(job.id)
        return record

    def _beat_in_database(self) -> None:
        """As a whole job's, in the part's row: the reaper then leaves this
        part running while its worker cannot reach memcached."""
        if not self._due_in_database():
            return
        try:
            JobPart.objects.filter(job_id=self.record.job, index=self.index).beat()
        except DatabaseError as exc:
            logger.warning("job %s part %s: no heartbeat anywhere: %s", self.record.job, self.index, exc)
