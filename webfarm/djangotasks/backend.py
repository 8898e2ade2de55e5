"""CeleryBackend: Django's Tasks API on the farm's Celery workers.

    TASKS = {
        "default": {
            "BACKEND": "webfarm.djangotasks.backend.CeleryBackend",
            "QUEUES": ["default"],                    # Celery's default queue
            "OPTIONS": {"TIME_LIMIT": 1800,           # seconds, then FAILED
                        "LIMITS": {"PER_USER": 20, "PER_KIND": 500}},  # optional
        }
    }

A task is a job: enqueue() starts one (the farm's counters and ownership
apply, and its limits if OPTIONS sets them; its task goes to Celery over the memcached broker or
Redis), any node reads its result from the database and its live progress
from memcached, and cancel() stops it at its next progress write or check.
"""

from typing import Any

from django.apps import apps
from django.core import checks

from webfarm.djangotasks.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResultDoesNotExist,
    normalize_json,
    task_enqueued,
)
from webfarm.djangotasks.jobs import DEFAULT_QUEUE, NAME, PREFIX, Options, job_type_for
from webfarm.djangotasks.owners import current_owner
from webfarm.djangotasks.results import ProgressTaskResult, result_of
from webfarm.progress.api import Job
from webfarm.progress.ids import is_valid_job_id
from webfarm.progress.services import cancel_job


class CeleryBackend(BaseTaskBackend):
    supports_defer = False
    supports_async_task = True
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.job_options = Options.of(self.options)

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> ProgressTaskResult:
        """Start the task as a job, for the request's user (webfarm.djangotasks.owners).
        Raises what a job's start does, webfarm.progress.web.TryLater: over a limit,
        memcached or the broker away (webfarm.progress.web.start_response
        answers each)."""
        self.validate_task(task)
        params = {
            "task": task.module_path,
            "args": normalize_json(list(args)),
            "kwargs": normalize_json(kwargs),
        }
        job = job_type_for(self.alias, task.queue_name, self.job_options).start(
            user=current_owner(), params=params
        )
        # Just recorded as queued: its bar's document is the record's, no trip to read it.
        result = result_of(job, task=task, backend=self.alias, progress={"state": "queued", "metadata": {}})
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> ProgressTaskResult:
        return result_of(self._job(result_id), backend=self.alias)

    def cancel(self, result_id: str) -> ProgressTaskResult:
        """Stop the task: at once if it has not started, else at its next
        progress write or check (its result: FAILED, the error naming
        webfarm.progress.exceptions.JobCancelled). A finished task stays as it is."""
        job = self._job(result_id)
        cancel_job(job=job)
        job.refresh_from_db()
        return result_of(job, backend=self.alias)

    def _job(self, result_id: str) -> Job:
        job = None
        if isinstance(result_id, str) and is_valid_job_id(result_id):
            job = Job.objects.filter(pk=result_id, kind__startswith=f"{PREFIX}{self.alias}.").first()
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        return job

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        if not NAME.fullmatch(task.queue_name):
            raise InvalidTask(f"queue name {task.queue_name!r}: 1 to 24 letters, digits, _ or -")

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        found: list[checks.CheckMessage] = []
        # Without webfarm.djangotasks, webfarm_core.E005 says so.
        if not apps.is_installed("webfarm.progress"):
            found.append(
                checks.Error(
                    f"TASKS[{self.alias!r}] uses {type(self).__name__}, which needs 'webfarm.progress' "
                    "in INSTALLED_APPS",
                    hint="INSTALLED_APPS += webfarm.APPS installs every app",
                    id="webfarm_djangotasks.E001",
                )
            )
        for name in (self.alias, *(self.queues or {DEFAULT_QUEUE})):
            if not NAME.fullmatch(name):
                found.append(
                    checks.Error(
                        f"TASKS[{self.alias!r}]: {name!r} is no name for a backend or queue here "
                        "(1 to 24 letters, digits, _ or -: it names the tasks' jobs)",
                        id="webfarm_djangotasks.E002",
                    )
                )
        return found
