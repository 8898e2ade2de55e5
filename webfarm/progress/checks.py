"""System checks: a bad memcached or namespace setting fails at start-up, not at
the first poll."""

from typing import Any

from django.conf import settings
from django.core import checks

from webfarm.progress.conf import get_config

LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


@checks.register()
def check_progress_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    config = get_config()
    errors: list[checks.CheckMessage] = []
    for name in ("RECORD_TTL", "FINAL_TTL"):
        if not 0 < config[name] <= 30 * 24 * 3600:
            errors.append(
                checks.Error(
                    f"PROGRESS_{name} must be 1 second to 30 days: memcached reads a "
                    "larger expiry as an absolute Unix time",
                    id="progress.E003",
                )
            )
    if config["FLUSH_INTERVAL"] <= 0 or config["HEARTBEAT_INTERVAL"] <= config["FLUSH_INTERVAL"]:
        errors.append(
            checks.Error(
                "PROGRESS_FLUSH_INTERVAL must be > 0 and below PROGRESS_HEARTBEAT_INTERVAL",
                id="progress.E004",
            )
        )
    exposed = set(settings.ALLOWED_HOSTS) - LOCAL_HOSTS
    if exposed and getattr(settings, "DEV_SECRET_KEY", None) == settings.SECRET_KEY:
        errors.append(
            checks.Warning(
                f"DJANGO_SECRET_KEY is not set but {sorted(exposed)} may reach this site: "
                "sessions are signed with the public dev key",
                hint="Set DJANGO_SECRET_KEY to the same random value on every node.",
                id="webfarm.W001",
            )
        )
    return errors
