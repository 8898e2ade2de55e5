"""Job types: what a kind of long job is, and the registry that finds one by
name on any node (the web node that starts it, the worker that runs it, the
reaper that runs it again).

A job type is registered by the @job_type decorator (a function becomes one)
or by register() (an instance of a JobType subclass), in a `jobs` module of
any installed app, which the progress app imports at start-up. An app whose
job types come from a setting adds a source instead (add_source()), read on
every lookup, so the setting can change under a test.
"""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from django.contrib.auth.models import AbstractBaseUser
from django.urls import reverse

from progress.conf import get_config
from progress.models import Job, JobPart
from progress.outcome import JobResult
from progress.parts import PartSpec
from progress.services import Tracker

# A job type's name is in URLs, counters' labels and the job row (max 64).
MAX_NAME = 64


@dataclass(frozen=True)
class SlotLimits:
    """How many jobs may be queued or running at once, farm-wide: per user
    (across every type of the same `group`) and per type."""

    group: str
    per_user: int
    per_kind: int


class JobType:
    """A kind of long job. Subclasses set the class attributes and run()."""

    name: ClassVar[str]
    title: ClassVar[str]
    # What the user calls one in a sentence: "You already have 2 reports running".
    noun: ClassVar[str] = "job"
    # Relative cost of each stage, so the bar moves evenly across them.
    stages: ClassVar[Sequence[tuple[str, float]]] = (("working", 100),)
    # Soft limit (seconds): the job is stopped and shown as failed; its worker
    # process is killed HARD_LIMIT_GRACE seconds later if it does not stop.
    time_limit: ClassVar[int] = 30 * 60
    # Run a job again (once) when its worker died under it: only for job
    # types that are safe to run twice.
    retry_on_lost: ClassVar[bool] = False
    # The Celery queue its task goes to (None: the default queue).
    queue: ClassVar[str | None] = None
    # The URL name of the job's own page, taking the job id (None: no page).
    page: ClassVar[str | None] = None

    def time_limit_seconds(self) -> int:
        return self.time_limit

    def describe(self, params: dict[str, Any]) -> str:
        """The job's title on its page and in "My jobs"."""
        return self.title

    def limits(self, user: AbstractBaseUser) -> SlotLimits:
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

    def start(self, *, user: AbstractBaseUser, params: dict[str, Any]) -> Job:
        """Start a job of this type for `user` (see progress.launch.start_job)."""
        from progress.launch import start_job

        return start_job(user=user, job_type=self, params=params)


JobBody = Callable[..., JobResult]


Split = Callable[[dict[str, Any]], Sequence[PartSpec] | None]
Merge = Callable[..., JobResult]


class _FunctionJobType(JobType):
    def __init__(
        self,
        body: JobBody,
        describe: Callable[[dict[str, Any]], str] | None,
        split: Split | None = None,
        merge: Merge | None = None,
    ) -> None:
        self.body = body
        self._describe = describe
        self._split = split
        self._merge = merge

    def describe(self, params: dict[str, Any]) -> str:
        return self._describe(params) if self._describe else self.title

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        return self.body(job=job, params=params, tracker=tracker)

    def split(self, params: dict[str, Any]) -> Sequence[PartSpec] | None:
        return self._split(params) if self._split else None

    def run_part(
        self, *, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker
    ) -> dict[str, Any]:
        return self.body(job=job, part=part, params=params, tracker=tracker)

    def merge(self, *, job: Job, parts: list[JobPart], params: dict[str, Any], tracker: Tracker) -> JobResult:
        assert self._merge is not None
        return self._merge(job=job, parts=parts, params=params, tracker=tracker)


def job_type(
    name: str,
    *,
    title: str,
    noun: str = "job",
    stages: Sequence[tuple[str, float]] = (("working", 100),),
    time_limit: int = 30 * 60,
    retry_on_lost: bool = False,
    queue: str | None = None,
    page: str | None = None,
    describe: Callable[[dict[str, Any]], str] | None = None,
    split: Split | None = None,
    merge: Merge | None = None,
) -> Callable[[JobBody], JobType]:
    """Make a function `body(*, job, params, tracker) -> JobResult` a job
    type and register it. The returned JobType starts jobs (`.start()`);
    the progress app's task runs them, tracked: running, heartbeat, cancel,
    time limit, final state, and a run again when a worker dies (if
    `retry_on_lost`).

    With `split(params) -> [PartSpec]` and `merge(*, job, parts, params,
    tracker) -> JobResult`, a job runs in parts at once on any workers
    (JobType.split): the body then does one part, `body(*, job, part,
    params, tracker) -> dict`, and its dict is the part's result."""
    if (split is None) != (merge is None):
        raise ValueError(f"job type {name!r}: a split needs a merge, and a merge a split")

    def make(body: JobBody) -> JobType:
        attributes = {
            "name": name,
            "title": title,
            "noun": noun,
            "stages": tuple(stages),
            "time_limit": time_limit,
            "retry_on_lost": retry_on_lost,
            "queue": queue,
            "page": page,
            "__doc__": body.__doc__,
        }
        cls = type(f"JobType[{name}]", (_FunctionJobType,), attributes)
        return register(cls(body, describe, split, merge))

    return make


_registered: dict[str, JobType] = {}
_sources: list[Callable[[], Iterable[JobType]]] = []


def register(job: JobType) -> JobType:
    if not 0 < len(job.name) <= MAX_NAME:
        raise ValueError(f"a job type's name has 1 to {MAX_NAME} characters: {job.name!r}")
    existing = _registered.get(job.name)
    if existing is not None and type(existing).__qualname__ != type(job).__qualname__:
        raise ValueError(f"two job types are named {job.name!r}")
    _registered[job.name] = job
    return job


def add_source(source: Callable[[], Iterable[JobType]]) -> None:
    """Job types another app holds (from its settings): asked on every lookup."""
    if source not in _sources:
        _sources.append(source)


def all_job_types() -> dict[str, JobType]:
    found = dict(_registered)
    for source in _sources:
        for job in source():
            found.setdefault(job.name, job)
    return found


def get_job_type(name: str) -> JobType | None:
    found = _registered.get(name)
    if found is not None:
        return found
    return next((job for source in _sources for job in source() if job.name == name), None)
