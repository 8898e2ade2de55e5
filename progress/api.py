"""The progress app's public API: what another app needs to run a long job
with a live bar. Everything else in `progress` may change.

    from progress.api import JobResult, track_job

    with track_job(job_id) as tracker:           # running, heartbeat, cancel, final state
        tracker.reporter.plan([("read", 90), ("write", 10)])
        tracker.reporter.stage("read", total=rows)
        ...
        tracker.result = JobResult(url=..., summary="1,204 rows")

In a template: `{% load progress %}{% progress_assets %}` in the head and
`{% progress_bar job record %}` where the bar goes.
"""

from progress.exceptions import JobCancelled, JobEnded, JobFailed, JobNotRunnable, ProgressUnavailable
from progress.outcome import JobResult
from progress.reporter import ProgressReporter
from progress.selectors import job_record, job_rows
from progress.services import Tracker, cancel_job, create_job, track_job
from progress.states import State

__all__ = [
    "JobCancelled",
    "JobEnded",
    "JobFailed",
    "JobNotRunnable",
    "JobResult",
    "ProgressReporter",
    "ProgressUnavailable",
    "State",
    "Tracker",
    "cancel_job",
    "create_job",
    "job_record",
    "job_rows",
    "track_job",
]
