"""The progress app's public API: what another app needs to run a long job
with a live bar. Everything else in `progress` may change.

A job type is one function (or a JobType subclass) in a `jobs` module of
your app:

    from progress.api import JobFailed, JobResult, job_type

    @job_type("customer-import", title="Customer import", noun="import",
              stages=[("checking rows", 90), ("saving", 10)], page="imports:job")
    def import_customers(*, job, params, tracker) -> JobResult:
        tracker.reporter.stage("checking rows", total=rows)
        ...                                    # tracker.reporter.update(done)
        return JobResult(url=..., summary="1,204 customers imported")

A view starts one for the signed-in user (limits and counters applied):

    job = import_customers.start(user=request.user, params={...})

and may catch StartRefused (limits.refusals renders it), ProgressUnavailable
and BrokerUnavailable. A view that reads a form first may refuse before it,
cheaper than anything else it does (look_at_limits(), then
start_job(..., looked=...), which does not look again). The progress app's task runs it on a worker: running,
heartbeat, cancel, time limit, final state, one run again if its worker dies
(retry_on_lost=True). A job may be split in parts that run at once on
many workers, with one combined bar (JobType.split, run_part and merge, or
job_type(..., split=..., merge=...)). In a template: `{% load progress %}{% progress_assets %}`
in the head and `{% progress_bar job record %}` where the bar goes.
"""

from progress.exceptions import JobCancelled, JobEnded, JobFailed, JobNotRunnable, ProgressUnavailable
from progress.ids import is_valid_job_id
from progress.jobtypes import (
    JobType,
    SlotLimits,
    add_source,
    all_job_types,
    get_job_type,
    job_type,
    register,
)
from progress.launch import (
    BrokerUnavailable,
    Looked,
    StartRefused,
    look_at_limits,
    reap_lost_jobs,
    refused_in_flood,
    run_job,
    start_job,
)
from progress.models import Job, JobPart
from progress.outcome import JobResult
from progress.parts import PartSpec
from progress.records import MAX_PARTS
from progress.reporter import ProgressReporter
from progress.selectors import job_record, job_rows
from progress.services import Tracker, cancel_job, record_from_job
from progress.states import FINAL_STATES, State

__all__ = [
    "FINAL_STATES",
    "MAX_PARTS",
    "BrokerUnavailable",
    "Job",
    "JobCancelled",
    "JobEnded",
    "JobFailed",
    "JobNotRunnable",
    "JobPart",
    "JobResult",
    "JobType",
    "Looked",
    "PartSpec",
    "ProgressReporter",
    "ProgressUnavailable",
    "SlotLimits",
    "StartRefused",
    "State",
    "Tracker",
    "add_source",
    "all_job_types",
    "cancel_job",
    "get_job_type",
    "is_valid_job_id",
    "job_record",
    "job_rows",
    "job_type",
    "look_at_limits",
    "reap_lost_jobs",
    "record_from_job",
    "refused_in_flood",
    "register",
    "run_job",
    "start_job",
]
