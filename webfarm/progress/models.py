"""The app's tables. Each model names its app: a project that leaves the app
out of INSTALLED_APPS hears so from a check (webfarm.core.needs), not from
a RuntimeError as the model is imported."""

from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import models

from webfarm.progress.ids import JOB_ID_LENGTH, new_job_id, new_read_token
from webfarm.progress.states import FINAL_STATES, State


class StateQuerySet(models.QuerySet):
    """A job's or a part's state changes, each one conditional UPDATE: a row
    moves only while it is still in the state the change comes from, so the
    row decides every race (a worker and the reaper, a run and a cancel, a
    task delivered twice). Each returns how many rows it moved."""

    def move(self, *, source: State | Collection[State], target: State, **fields: Any) -> int:
        sources = [source] if isinstance(source, str) else list(source)
        return self.filter(state__in=sources).update(state=target, **fields)

    def beat(self) -> int:
        """A heartbeat written to the rows that still run (their worker cannot reach memcached)."""
        return self.filter(state=State.RUNNING).update(beat_at=datetime.now(UTC))

    def one(self, pk: str) -> Any:
        """The row with this id, or None. Without the model's ordering: a
        worker reads its job's row for every task, and Django compiling an
        ORDER BY for one row was a tenth of that read's cost."""
        return next(iter(self.filter(pk=pk).order_by()[:1]), None)


class Job(models.Model):
    """The durable side of a job: who owns it, what it was, how it ended.

    Live progress lives in memcached; this row is written when a job is
    created, starts and ends, so "my jobs" and final states survive memcached
    restarts and evictions.
    """

    id = models.CharField(primary_key=True, max_length=JOB_ID_LENGTH, default=new_job_id, editable=False)
    # None: started by no user (a django.tasks task enqueued outside a request):
    # only staff see it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    kind = models.CharField(max_length=64)
    title = models.CharField(max_length=200, blank=True)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=[(s.value, s.value) for s in State], default=State.QUEUED)
    error = models.TextField(blank=True)
    result_url = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A job whose worker died may be run again as a new job (attempt + 1).
    attempt = models.PositiveSmallIntegerField(default=1)
    retry_of = models.CharField(max_length=JOB_ID_LENGTH, blank=True)
    retried_as = models.CharField(max_length=JOB_ID_LENGTH, blank=True)
    # In the progress URL the owner's pages use (/progress/<job>/<token>/), which
    # nginx answers from memcached without Django; a retry keeps its job's token.
    read_token = models.CharField(max_length=JOB_ID_LENGTH, default=new_read_token, editable=False)
    # When its task was last handed to the broker, and how often: a queued job
    # whose task never left (the web process died) or was lost (the broker's
    # memcached restarted) is sent again, once, by the reaper.
    sent_at = models.DateTimeField(null=True, blank=True)
    sends = models.PositiveSmallIntegerField(default=0)
    # The running job's heartbeat, written here only while memcached cannot
    # take it (its worker lost its way there): the reaper must not take a job
    # for lost that is alive and merely unpublished.
    beat_at = models.DateTimeField(null=True, blank=True)
    # A job split in parts: when its merge was sent (by the part that finished
    # last), so the merge is sent once, whoever counts.
    merge_sent_at = models.DateTimeField(null=True, blank=True)
    # When a worker took the merge (one does, however often it was sent).
    merge_started_at = models.DateTimeField(null=True, blank=True)
    # How many parts it was split into (0: it runs whole, as one task).
    part_count = models.PositiveSmallIntegerField(default=0)
    # For API clients (a django.tasks result): what the body returned, each
    # failed run's exception class and traceback (users see `error`), and the
    # metadata the body saved, as it stood when the job ended.
    value = models.JSONField(null=True, blank=True)
    # The worker that ran it ("host#pid"; a job in parts: the one that merged).
    worker = models.CharField(max_length=200, blank=True)
    errors = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # The row ended the job while memcached could not be told (it was away),
    # so memcached may still say queued or running: the reaper writes the end
    # there once it answers (webfarm.progress.launching.reaper.publish_ends).
    end_unpublished = models.BooleanField(default=False)

    objects = StateQuerySet.as_manager()

    class Meta:
        app_label = "webfarm_progress"
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["owner", "-created_at"]),
            # Only the few rows waiting for memcached are in it.
            models.Index(
                fields=["end_unpublished"],
                condition=models.Q(end_unpublished=True),
                name="progress_job_end_unpublished",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.state})"

    @property
    def ended(self) -> bool:
        """Succeeded, failed, cancelled or lost: it will not change again."""
        return self.state in FINAL_STATES


class JobPart(models.Model):
    """One part of a job split to run on many workers at once (webfarm.progress.countdown).

    The row is the durable record of which parts finished: memcached counts
    them down for speed, and after a memcached restart the rows decide.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="parts")
    index = models.PositiveIntegerField()
    # Its share of the job's work (rows, ids...): the combined bar weighs parts by it.
    size = models.PositiveBigIntegerField(default=1)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=[(s.value, s.value) for s in State], default=State.QUEUED)
    worker = models.CharField(max_length=200, blank=True)
    # A part whose worker died runs again (attempt + 1); the others are kept.
    attempt = models.PositiveSmallIntegerField(default=1)
    # Its heartbeat, written here only while memcached cannot take it (as Job.beat_at).
    beat_at = models.DateTimeField(null=True, blank=True)
    # What the part hands to the merge (small: counts, partial sums, a file's name).
    result = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = StateQuerySet.as_manager()

    class Meta:
        app_label = "webfarm_progress"
        ordering = ["job", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="one_row_per_part")]

    def __str__(self) -> str:
        return f"part {self.index} of {self.job_id} ({self.state})"
