"""Which of webfarm's apps each app needs installed beside it: those whose
tables it reads. A project that leaves one out hears so from a check, the
app and the fix named, never from a traceback (each model names its app, so
importing it does not fail)."""

from typing import Any

from django.apps import AppConfig, apps
from django.conf import settings
from django.core import checks

# Every app reads core's tables (the memcached pool, revocations); these read more.
NEEDS = {
    "webfarm.progress": ("webfarm.core",),
    "webfarm.stats": ("webfarm.core",),
    "webfarm.djangotasks": ("webfarm.core", "webfarm.progress"),
    "webfarm.dashboard": ("webfarm.core", "webfarm.progress", "webfarm.stats"),
}
EVERY_APP = "INSTALLED_APPS += webfarm.APPS"
# The Tasks backend, as a project's TASKS names it: its app (webfarm.djangotasks)
# must be installed, which the base checks, as the app itself cannot.
TASKS_BACKEND = "webfarm.djangotasks.backend.CeleryBackend"


def tasks_on_our_backend() -> dict[str, dict[str, Any]]:
    """TASKS's entries that use our backend, by alias (read at each call: a
    test may change the setting). A TASKS or an entry that is no dict has none."""
    tasks = getattr(settings, "TASKS", {})
    if not isinstance(tasks, dict):
        return {}
    return {
        alias: config
        for alias, config in tasks.items()
        if isinstance(config, dict) and config.get("BACKEND") == TASKS_BACKEND
    }


def missing(app: str) -> list[str]:
    """The apps `app` needs that the project did not install."""
    return [needed for needed in NEEDS.get(app, ("webfarm.core",)) if not apps.is_installed(needed)]


def require(app_config: AppConfig) -> None:
    """Register the check that names what this app needs and misses (from its ready())."""

    def check_needs(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
        return [
            checks.Error(
                f"{app_config.name} needs {needed} in INSTALLED_APPS",
                hint=f'add "{needed}", or install every app: {EVERY_APP}',
                id=f"{app_config.label}.E010",
            )
            for needed in missing(app_config.name)
        ]

    checks.register(check_needs)
