from collections.abc import Callable
from importlib import import_module
from typing import Any

from celery import Task, shared_task
from django.conf import settings


def renamed_task(body: Callable[..., Any], name: str, *, was: tuple[str, ...], **options: Any) -> Task:
    """`body` as the Celery task `name`, also registered under each name in
    `was`, the names it had before: a message that a process of the older
    version sent during an upgrade still finds its function."""
    for old in was:
        shared_task(name=old, **options)(body)
    return shared_task(name=name, **options)(body)


@shared_task(name="webfarm.core.clear_expired_sessions", ignore_result=True)
def clear_expired_sessions() -> None:
    """What `manage.py clearsessions` does: expired sessions leave the database."""
    import_module(settings.SESSION_ENGINE).SessionStore.clear_expired()
