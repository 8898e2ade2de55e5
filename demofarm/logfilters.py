"""What the console leaves out: the periodic housekeeping Celery runs every
second or two (flushing votes, draining the site log, reaping, harvesting),
when it went well. Its problems, the jobs and the requests still show; a
housekeeping task that did something says so itself (at INFO, from its own
logger)."""

import logging

from django.conf import settings

# Celery's per-task lines: "Task <name>[<id>] received", "... succeeded in ...".
TASK_LOGGERS = ("celery.app.trace", "celery.worker.strategy")


def housekeeping_tasks() -> frozenset[str]:
    return frozenset(entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values())


class QuietHousekeeping(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._tasks: frozenset[str] | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or record.name not in TASK_LOGGERS:
            return True
        if self._tasks is None:
            self._tasks = housekeeping_tasks()
        args = record.args if isinstance(record.args, dict) else {}
        return args.get("name") not in self._tasks
