"""What a kind of long job is: its name, stages, limits, time limit, queue,
and the body that runs it (whole, or in parts and a merge)."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.urls import reverse

from webfarm.progress.conf import get_config
from webfarm.progress.countdown import PartSpec
from webfarm.progress.models import Job, JobPart
from webfarm.progress.outcome import JobResult
from webfarm.progress.records import MAX_PARTS
from webfarm.progress.services import Tracker


@dataclass(frozen=True)
class SlotLimits:
    """How many jobs may be queued or running at once, farm-wide: per user
    (across every type of the same `group`) and per type."""

    group: str
    per_user: int
    per_kind: int


class JobTypeBase:
    """What a kind of long job is, as the code that starts, sends and runs
    jobs sees it. Job authors subclass webfarm.progress.api.JobType.

    A subclass sets these on the class; name, queue and time_limit may also
    be an instance's own (one task job type per backend and queue)."""

    name: str
    title: ClassVar[str]
    # What the user calls one in a sentence: "You already have 2 reports running".
    noun: ClassVar[str] = "job"
    # Relative cost of each stage, so the bar moves evenly across them.
    stages: ClassVar[Sequence[tuple[str, float]]] = (("working", 100),)
    # Soft limit (seconds): the job is stopped and shown as failed; its worker
    # process is killed HARD_LIMIT_GRACE seconds later if it does not stop.
    time_limit: int = 30 * 60
    # Run a job again (once) when its worker died under it: only for job
    # types that are safe to run twice.
    retry_on_lost: ClassVar[bool] = False
    # The Celery queue its task goes to (None: the default queue).
    queue: str | None = None
    # The URL name of the job's own page, taking the job id (None: no page).
    page: ClassVar[str | None] = None
    # The most parts split() may give (one record holds every part's state): read it, never set it.
    max_parts: ClassVar[int] = MAX_PARTS

    def time_limit_seconds(self) -> int:
        return self.time_limit

    def describe(self, params: dict[str, Any]) -> str:
        """The job's title on its page and in "My jobs"."""
        return self.title

    def limits(self, user: AbstractBaseUser | AnonymousUser | None) -> SlotLimits | None:
        """How many may be queued or running at once (`user` None: a job
        started by no user, held to the per-kind limit alone; None: no
        farm-wide limit)."""
        config = get_config()
        return SlotLimits(group="jobs", per_user=config["JOBS_PER_USER"], per_kind=config["JOBS_PER_KIND"])

    def page_url(self, job_id: str) -> str:
        return reverse(self.page, args=[job_id]) if self.page else ""

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        """Do the work, publishing progress through tracker.reporter; return
        the result (raise JobFailed with a sentence for the user to fail)."""
        raise NotImplementedError

    # -- a job split in parts that run at once on any workers ------------------

    def split(self, params: dict[str, Any]) -> Sequence[PartSpec] | None:
        """The parts a job of these params is split into (1 to MAX_PARTS; the
        web node asks, before the job is recorded), or None to run it whole
        with run(). Each part runs run_part() as a task of its own, on any
        worker; merge() runs once, when every part is done.

        The parts do the first of `stages`, the merge the rest: the bar fills
        the first stage's share from the parts' progress, weighed by their
        `size`, and the merge's stages take it to 100 %."""
        return None

    def run_part(
        self, *, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker
    ) -> dict[str, Any]:
        """Do one part's work (part.params says which), publishing progress
        through tracker.reporter in the first stage; return a small JSON-safe
        result, which the merge reads as part.result. Raise JobFailed with a
        sentence to fail the whole job (the other parts stop)."""
        raise NotImplementedError

    def merge(self, *, job: Job, parts: list[JobPart], params: dict[str, Any], tracker: Tracker) -> JobResult:
        """The job's result from its parts' (in index order), once every part
        is done; it reports the stages after the first."""
        raise NotImplementedError
