"""The project's settings plus the two django.tasks backends bench.tasks
measures ours against: django-tasks-db (the database and its db_worker)
and django-tasks-fennel (Celery; run on Redis with a Redis result backend)."""

import os

from demofarm.settings import *  # noqa: F403
from demofarm.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db", "django_tasks_fennel"]
TASKS = {
    "default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend"},
    "db": {"BACKEND": "django_tasks_db.DatabaseBackend"},
    "fennel": {"BACKEND": "django_tasks_fennel.CeleryBackend"},
}
# Fennel reads results (and when a task started) from Celery's result backend.
CELERY_RESULT_EXTENDED = True
if os.environ.get("BENCH_RESULT_BACKEND"):
    CELERY_RESULT_BACKEND = os.environ["BENCH_RESULT_BACKEND"]
    # The site ignores Celery's results (its jobs keep their own); fennel's are its results.
    CELERY_TASK_IGNORE_RESULT = False
