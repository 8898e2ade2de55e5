"""Job types as their authors write them: a JobType subclass, registered
with register(), or a function made one by @job_type, in a `jobs` module of
any installed app, which the progress app imports at start-up. A job type
starts its jobs (`.start()`).
"""

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from webfarm.progress.countdown import PartSpec
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.launching.admission import start_job
from webfarm.progress.models import Job, JobPart
from webfarm.progress.outcome import JobResult
from webfarm.progress.registry import register
from webfarm.progress.services import Tracker


class JobType(JobTypeBase):
    """A kind of long job. Subclasses set the class attributes and run()."""

    def start(self, *, user: AbstractBaseUser | None, params: dict[str, Any]) -> Job:
        """Start a job of this type for `user` (None: for no user; only staff
        see it, and only the per-kind limit holds it): its limit slots taken, its
        record written, its task sent. Raises TryLater: over a limit or with
        memcached away, nothing is recorded; with the broker away, the job is
        recorded as failed, with the reason. webfarm.progress.web.start_response()
        answers each."""
        return start_job(user=user, job_type=self, params=params)


# A whole job's body returns its JobResult; a part's (called with part=), its dict.
JobBody = Callable[..., JobResult | dict[str, Any]]


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
        result = self.body(job=job, params=params, tracker=tracker)
        if not isinstance(result, JobResult):
            raise TypeError(
                f"job type {self.name!r}: its body returned {type(result).__name__}, not a JobResult"
            )
        return result

    def split(self, params: dict[str, Any]) -> Sequence[PartSpec] | None:
        return self._split(params) if self._split else None

    def run_part(
        self, *, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker
    ) -> dict[str, Any]:
        result = self.body(job=job, part=part, params=params, tracker=tracker)
        if not isinstance(result, dict):
            raise TypeError(
                f"job type {self.name!r}: a part's body returned {type(result).__name__}, not a dict"
            )
        return result

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
        job_type: JobType = cls(body, describe, split, merge)
        register(job_type)
        return job_type

    return make
