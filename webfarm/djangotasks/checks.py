"""System checks of the Tasks API's app."""

from typing import Any

from django.conf import settings
from django.core import checks

from webfarm.core.needs import tasks_on_our_backend

OWNERS = "webfarm.djangotasks.owners.TaskOwnerMiddleware"
AUTHENTICATION = "django.contrib.auth.middleware.AuthenticationMiddleware"


@checks.register()
def check_owner_middleware(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Without the middleware a task a view enqueues belongs to nobody, and
    its user gets 404 on her own task's page."""
    if not tasks_on_our_backend():
        return []
    middleware = list(settings.MIDDLEWARE)
    if OWNERS not in middleware:
        return [
            checks.Error(
                f"MIDDLEWARE lacks {OWNERS}: a task a view enqueues would belong to nobody, and its "
                "user would get 404 on its page",
                hint=f'add "{OWNERS}" to MIDDLEWARE, after {AUTHENTICATION}',
                id="webfarm_djangotasks.E003",
            )
        ]
    if AUTHENTICATION in middleware and middleware.index(OWNERS) < middleware.index(AUTHENTICATION):
        return [
            checks.Error(
                f"MIDDLEWARE has {OWNERS} before {AUTHENTICATION}: it would see no user",
                hint=f"move it after {AUTHENTICATION}",
                id="webfarm_djangotasks.E004",
            )
        ]
    return []
