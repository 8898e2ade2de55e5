"""The job author's API: what another app needs to write a long job with a
live bar. A view that starts or shows jobs uses webfarm.progress.web. Everything
else in `progress` may change.

A job type is one function (or a JobType subclass) in a `jobs` module of
your app:

    from webfarm.progress.api import JobFailed, JobResult, job_type

    @job_type("customer-import", title="Customer import", noun="import",
              stages=[("checking rows", 90), ("saving", 10)], page="imports:job")
    def import_customers(*, job, params, tracker) -> JobResult:
        tracker.reporter.stage("checking rows", total=rows)
        ...                                    # tracker.reporter.update(done)
        return JobResult(url=..., summary="1,204 customers imported")

`import_customers.start(user=..., params={...})` starts one (limits and
counters applied); webfarm.progress.web.start_response() turns that, or why it did
not start, into the answer. The progress app's task runs it on a worker:
running, heartbeat, cancel, time limit, final state, one run again if its
worker dies (retry_on_lost=True). A job may be split in parts that run at
once on many workers, with one combined bar (JobType.split, run_part and
merge, or job_type(..., split=..., merge=...)). In a template:
`{% load webfarm_progress %}{% progress_assets %}` in the head and
`{% progress_bar job record %}` where the bar goes. `job_ended` tells an app
that a job ended, however it ended (webfarm.progress.signals).
"""

from webfarm.progress.countdown import PartSpec
from webfarm.progress.exceptions import JobCancelled, JobFailed
from webfarm.progress.jobtype import JobType, job_type
from webfarm.progress.jobtype_base import SlotLimits
from webfarm.progress.models import Job, JobPart
from webfarm.progress.outcome import JobResult
from webfarm.progress.registry import register
from webfarm.progress.services import Tracker
from webfarm.progress.signals import job_ended

__all__ = [
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobPart",
    "JobResult",
    "JobType",
    "PartSpec",
    "SlotLimits",
    "Tracker",
    "job_ended",
    "job_type",
    "register",
]
