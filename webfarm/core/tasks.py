from importlib import import_module

from celery import shared_task
from django.conf import settings


@shared_task(name="webfarm.core.clear_expired_sessions", ignore_result=True)
def clear_expired_sessions() -> None:
    """What `manage.py clearsessions` does: expired sessions leave the database."""
    import_module(settings.SESSION_ENGINE).SessionStore.clear_expired()
