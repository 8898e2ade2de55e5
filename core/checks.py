"""System checks of the base."""

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from core.client import parse_servers
from core.conf import get_config

MAX_NAMESPACE = 64


@checks.register()
def check_memcached_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    config = get_config()
    errors: list[checks.CheckMessage] = []
    try:
        parse_servers(config["SERVERS"])
    except ImproperlyConfigured as exc:
        errors.append(checks.Error(str(exc), id="core.E001"))
    namespace = config["NAMESPACE"]
    if (
        not namespace
        or len(namespace) > MAX_NAMESPACE
        or not namespace.isascii()
        or any(ch.isspace() or not ch.isprintable() for ch in namespace)
    ):
        errors.append(
            checks.Error(
                f"MEMCACHED_NAMESPACE {namespace!r} must be 1-{MAX_NAMESPACE} printable "
                "ASCII characters without whitespace (memcached key rules)",
                id="core.E002",
            )
        )
    return errors


@checks.register()
def check_environment_names(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Variables set under an old name still work; say which, and the new name."""
    old = getattr(settings, "OLD_ENVIRONMENT_NAMES", [])
    if not old:
        return []
    return [
        checks.Warning(
            f"environment variables under old names: {', '.join(old)}",
            hint="each is named for the setting it feeds now (QUEUES_HOLE_WAIT); see docs/configuration.md",
            id="core.W001",
        )
    ]
