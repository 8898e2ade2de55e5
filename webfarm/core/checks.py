"""System checks of the base."""

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import parse_servers
from webfarm.core.conf import get_config
from webfarm.core.needs import EVERY_APP, TASKS_BACKEND, tasks_on_our_backend

MAX_NAMESPACE = 64


@checks.register()
def check_memcached_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not get_config.well_typed():
        return []  # check_settings_dict says which value is of the wrong kind
    config = get_config()
    errors: list[checks.CheckMessage] = []
    try:
        parse_servers(config["SERVERS"])
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="webfarm_core.E001"))
    namespace = config["NAMESPACE"]
    if (
        not namespace
        or len(namespace) > MAX_NAMESPACE
        or not namespace.isascii()
        or any(ch.isspace() or not ch.isprintable() for ch in namespace)
    ):
        errors.append(
            checks.Error(
                f'MEMCACHED["NAMESPACE"] {namespace!r} must be 1-{MAX_NAMESPACE} printable '
                "ASCII characters without whitespace (memcached key rules)",
                id="webfarm_core.E002",
            )
        )
    return errors


# The meta commands (webfarm.core.client.MetaBatch) as this code speaks them: stable,
# with `ms <key> <length>`, since memcached 1.6.10.
MIN_MEMCACHED = (1, 6, 10)


def version_problem(version: str) -> str | None:
    """Why a memcached of this version cannot serve the farm, or None."""
    parts = version.split(".")
    try:
        numbers = tuple(int(part) for part in parts[:3])
    except ValueError:
        return f"its version {version!r} is not one this code knows"
    if len(numbers) < 3 or numbers < MIN_MEMCACHED:
        wanted = ".".join(map(str, MIN_MEMCACHED))
        return f"it is memcached {version}; the farm's meta commands need {wanted} or later"
    return None


@checks.register()
def check_memcached_version(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Each server answers, and is recent enough. One that does not answer
    is a warning, not an error: a process may start before memcached does."""
    errors: list[checks.CheckMessage] = []
    if not get_config.well_typed():
        return errors  # check_settings_dict says which value is of the wrong kind
    try:
        servers = parse_servers(get_config()["SERVERS"])
    except ImproperlyConfigured:
        return errors  # webfarm_core.E001 says why
    for host, port in servers:
        client = Client((host, port), connect_timeout=0.5, timeout=0.5)
        try:
            version = client.version().decode(errors="replace")
        except (MemcacheError, OSError) as exc:
            errors.append(
                checks.Warning(
                    f"memcached at {host}:{port} does not answer ({exc or type(exc).__name__}): "
                    "no job can start, and no bar moves, until it does",
                    hint='start it there, or set MEMCACHED["SERVERS"] to the servers the farm runs',
                    id="webfarm_core.W001",
                )
            )
            continue
        finally:
            client.close()
        problem = version_problem(version)
        if problem:
            errors.append(checks.Error(f"memcached at {host}:{port}: {problem}", id="webfarm_core.E003"))
    return errors


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """MEMCACHED: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_core")


# The features a setting turns on, and the app each needs: the app's own
# checks cannot say it is missing, so the base, always installed, does.
@checks.register()
def check_apps_the_settings_need(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    found: list[checks.CheckMessage] = []
    broker = getattr(settings, "CELERY_BROKER_URL", "")
    if (
        isinstance(broker, str)
        and broker.startswith("memcached://")
        and not apps.is_installed("webfarm.broker")
    ):
        found.append(
            checks.Error(
                f"CELERY_BROKER_URL is {broker!r}, and the memcached transport is webfarm.broker's, "
                "which is not in INSTALLED_APPS: Celery would find no such transport",
                hint=f'add "webfarm.broker" to INSTALLED_APPS ({EVERY_APP} installs every app)',
                id="webfarm_core.E004",
            )
        )
    ours = list(tasks_on_our_backend())
    if ours and not apps.is_installed("webfarm.djangotasks"):
        found.append(
            checks.Error(
                f"TASKS[{ours[0]!r}] uses {TASKS_BACKEND}, whose app, webfarm.djangotasks, is not in "
                "INSTALLED_APPS: its tasks would have no job type and no page",
                hint=f'add "webfarm.djangotasks" to INSTALLED_APPS ({EVERY_APP} installs every app)',
                id="webfarm_core.E005",
            )
        )
    return found
