"""The job type a task runs as: one per backend alias and queue named in
TASKS, found by the progress app on every node (web, worker, reaper).

A job's row holds its task's path, arguments and queue; the worker imports
the task by that path (from the database, never from memcached) and runs it
under the job's tracker: running, heartbeat, cancel, time limit, final state.
"""

import re
from dataclasses import dataclass
from functools import cache
from traceback import format_exception
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from webfarm.core.needs import tasks_on_our_backend
from webfarm.djangotasks.compat import (
    TaskError,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from webfarm.djangotasks.context import ProgressContext
from webfarm.djangotasks.results import result_of, task_of
from webfarm.progress.api import Job, JobResult, JobType, SlotLimits, Tracker, job_ended
from webfarm.progress.registry import add_source

DEFAULT_QUEUE = "default"
# A job type's name is the job's kind, in counters' labels and URLs:
# "task.<alias>.<queue>", each a NAME.
PREFIX = "task."
NAME = re.compile(r"[A-Za-z0-9_-]{1,24}")


def kind_of(alias: str, queue: str) -> str:
    return f"{PREFIX}{alias}.{queue}"


def alias_of(kind: str) -> str:
    """The backend alias in a task job's kind (kind_of's first part)."""
    return kind.removeprefix(PREFIX).split(".", 1)[0]


@dataclass(frozen=True)
class Options:
    """A backend's OPTIONS: TIME_LIMIT (seconds, default 1800) and LIMITS
    ({"PER_USER": n, "PER_KIND": m}: how many of its tasks may be queued or
    running at once, farm-wide; default none)."""

    time_limit: int = 30 * 60
    slot_limits: SlotLimits | None = None

    @classmethod
    def of(cls, options: dict[str, Any]) -> "Options":
        limits = options.get("LIMITS")
        return cls(
            time_limit=int(options.get("TIME_LIMIT", 30 * 60)),
            slot_limits=SlotLimits(
                group="tasks", per_user=int(limits["PER_USER"]), per_kind=int(limits["PER_KIND"])
            )
            if limits
            else None,
        )


class TaskJobType(JobType):
    title = "Task"
    noun = "task"
    # No plan: a task names its stages as it goes (context.progress.stage()),
    # or plans them itself (context.progress.plan()).
    stages = ()

    def __init__(self, alias: str, queue: str, options: Options) -> None:
        self.alias = alias
        self.name = kind_of(alias, queue)
        # Celery's default queue for Django's default one: the farm's workers take it.
        self.queue = None if queue == DEFAULT_QUEUE else queue
        self.time_limit = options.time_limit
        self.slot_limits = options.slot_limits

    def limits(self, user: AbstractBaseUser | AnonymousUser | None) -> SlotLimits | None:
        # A task queue takes bursts: limits only where OPTIONS["LIMITS"] sets them.
        return self.slot_limits

    def describe(self, params: dict[str, Any]) -> str:
        return str(params.get("task", "task")).rsplit(".", 1)[-1].replace("_", " ").capitalize()

    def run(self, *, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
        task = task_of(job)
        sender = type(task.get_backend())
        # The row as the run began (begin_job updated it in place), the bar as the reporter holds it.
        result = result_of(job, task=task, backend=self.alias, progress=tracker.reporter.record.public())
        task_started.send(sender, task_result=result)
        args, kwargs = params.get("args", []), params.get("kwargs", {})
        try:
            if task.takes_context:
                context = ProgressContext(task_result=result, reporter=tracker.reporter)
                value = task.call(context, *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
            value = normalize_json(value)
        except BaseException as exc:
            kind = type(exc)
            path = f"{kind.__module__}.{kind.__qualname__}"
            object.__setattr__(result, "status", TaskResultStatus.FAILED)
            result.errors.append(
                TaskError(exception_class_path=path, traceback="".join(format_exception(exc)))
            )
            raise
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "_return_value", value)
        return JobResult(value=value, summary="done")


def send_task_finished(
    *, job_id: str, kind: str, job: Job | None = None, record: Any = None, **kwargs: Any
) -> None:
    """task_finished for a task's job, however it ended: run to its end (on
    the worker), cancelled before it started (where it was cancelled), lost
    (where the reaper found it). The result is the row's, as get_result()
    reads it afterwards: the ender's row and record when it has them, else
    read."""
    if not kind.startswith(PREFIX):
        return
    job = job if job is not None else Job.objects.one(job_id)
    if job is None:
        return
    progress = record.public() if record is not None else None
    result = result_of(job, backend=alias_of(kind), progress=progress)
    task_finished.send(type(result.task.get_backend()), task_result=result)


job_ended.connect(send_task_finished, dispatch_uid="webfarm.djangotasks.task_finished")


@cache
def job_type_for(alias: str, queue: str, options: Options) -> TaskJobType:
    return TaskJobType(alias, queue, options)


def configured() -> list[TaskJobType]:
    """A job type for each queue of each of our backends in TASKS (read on
    every lookup: a test may change the setting)."""
    found = []
    for alias, config in tasks_on_our_backend().items():
        options = Options.of(config.get("OPTIONS", {}))
        for queue in config.get("QUEUES") or [DEFAULT_QUEUE]:
            found.append(job_type_for(alias, queue, options))
    return found


add_source(configured)
