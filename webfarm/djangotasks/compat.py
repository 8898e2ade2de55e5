"""Django's Tasks API from Django itself (6.0 and later) or, on Django 5.2,
from the django-tasks backport: the same names either way."""

from typing import TYPE_CHECKING

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:  # django-stubs describe Django 6's; the backport's names are the same
    from django.tasks import TaskResultStatus, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    BACKPORT: bool
else:
    try:
        from django.tasks import TaskResultStatus, task, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import Task, TaskContext, TaskError, TaskResult
        from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.utils.json import normalize_json

        # Whether these names come from the backport (webfarm.djangotasks.apps
        # then loads its checks and signal handlers, which Django 6 has built in).
        BACKPORT = False
    except ImportError:  # Django 5.2
        try:
            from django_tasks import TaskResultStatus, task, task_backends
            from django_tasks.backends.base import BaseTaskBackend
            from django_tasks.base import Task, TaskContext, TaskError, TaskResult
            from django_tasks.exceptions import InvalidTaskError as InvalidTask
            from django_tasks.exceptions import TaskResultDoesNotExist
            from django_tasks.signals import task_enqueued, task_finished, task_started
            from django_tasks.utils import normalize_json
        except ImportError as exc:
            raise ImproperlyConfigured(
                "Django's Tasks API needs Django 6, or on Django 5.2 the django-tasks backport: "
                'pip install "webfarm[django52]"'
            ) from exc
        BACKPORT = True

__all__ = [
    "BACKPORT",
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
