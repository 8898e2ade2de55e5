"""A job as Django's Tasks API shows it: a TaskResult, with its metadata and
live progress besides."""

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from django.utils.module_loading import import_string

from webfarm.djangotasks.compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus
from webfarm.progress.api import Job
from webfarm.progress.selectors import record_of

STATUS = {
    "queued": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "succeeded": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
    "lost": TaskResultStatus.FAILED,
}
# The API has no state for these: a FAILED result whose error names them.
CANCELLED = "webfarm.progress.exceptions.JobCancelled"
LOST = "webfarm.progress.exceptions.JobLost"
FAILED = "webfarm.progress.exceptions.JobFailed"


# Django's TaskResult is a frozen dataclass too; its stubs do not say so.
@dataclass(frozen=True, slots=True, kw_only=True)
class ProgressTaskResult(TaskResult):  # type: ignore[misc]
    metadata: dict[str, Any] = field(default_factory=dict)
    """What the task saved with context.save_metadata()."""
    progress: dict[str, Any] = field(default_factory=dict)
    """The bar as its poll shows it: percent, stage, message, eta_seconds..."""

    def refresh(self) -> None:
        fresh = self.task.get_backend().get_result(self.id)
        for name in _REFRESHED:
            object.__setattr__(self, name, getattr(fresh, name))

    async def arefresh(self) -> None:
        fresh = await self.task.get_backend().aget_result(self.id)
        for name in _REFRESHED:
            object.__setattr__(self, name, getattr(fresh, name))


_REFRESHED = [
    f.name
    for f in dataclasses.fields(ProgressTaskResult)
    if f.name not in {"task", "id", "args", "kwargs", "backend"}
]


def task_of(job: Job) -> Task:
    """The task a job runs, by the path enqueue() wrote in its row (the
    database's, never memcached's)."""
    path = job.params.get("task") if isinstance(job.params, dict) else None
    try:
        found = import_string(path) if isinstance(path, str) else None
    except ImportError:
        found = None
    if not isinstance(found, Task):
        raise TaskResultDoesNotExist(f"{job.id}: its task {path!r} is not a task any more")
    return found


def result_of(
    job: Job, *, task: Task | None = None, backend: str, progress: dict[str, Any] | None = None
) -> ProgressTaskResult:
    """`progress`: the bar's document if the caller has it (else read, one memcached trip)."""
    task = task or task_of(job)
    progress = record_of(job).public() if progress is None else progress
    params = job.params
    result = ProgressTaskResult(
        task=task,
        id=job.id,
        status=STATUS[job.state],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=job.started_at,
        args=params.get("args", []),
        kwargs=params.get("kwargs", {}),
        backend=backend,
        errors=errors_of(job),
        worker_ids=[job.worker] if job.worker else [],
        metadata=progress.get("metadata") or job.metadata or {},
        progress=progress,
    )
    object.__setattr__(result, "_return_value", job.value)
    return result


def errors_of(job: Job) -> list[TaskError]:
    errors = [
        TaskError(exception_class_path=e["exception_class_path"], traceback=e.get("traceback", ""))
        for e in job.errors
        if isinstance(e, dict) and isinstance(e.get("exception_class_path"), str)
    ]
    if errors or STATUS[job.state] != TaskResultStatus.FAILED:
        return errors
    # Ended without an exception of its own: say how, in the API's terms.
    path = {"cancelled": CANCELLED, "lost": LOST}.get(job.state, FAILED)
    return [TaskError(exception_class_path=path, traceback=job.error)]
