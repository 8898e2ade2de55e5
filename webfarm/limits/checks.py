"""System checks of the limits app."""

from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from webfarm.limits.backends import LoginThrottleMixin
from webfarm.limits.conf import get_config

THROTTLED = "webfarm.limits.backends.ThrottledUserBackend"


@checks.register(checks.Tags.security)
def check_login_throttle(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A backend that checks passwords without the throttle lets a guesser
    try as many as the site can hash."""
    found: list[checks.CheckMessage] = []
    for path in settings.AUTHENTICATION_BACKENDS:
        try:
            backend = import_string(path)
        except ImportError:
            continue  # Django's own checks and the first login say so
        if (
            isinstance(backend, type)
            and hasattr(backend, "authenticate")
            and not issubclass(backend, LoginThrottleMixin)
        ):
            found.append(
                checks.Warning(
                    f"AUTHENTICATION_BACKENDS holds {path!r}, which checks passwords without "
                    "the login throttle: a guesser may try as many as the site can hash",
                    hint=f"use {THROTTLED!r} (or add webfarm.limits.backends.LoginThrottleMixin "
                    "to a backend of your own)",
                    id="webfarm_limits.W001",
                )
            )
    return found


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """LIMITS: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_limits")
