"""System checks: a bad memcached or namespace setting fails at start-up, not at
the first poll."""

from typing import Any

from django.core import checks

from webfarm.progress.conf import get_config


@checks.register()
def check_progress_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if not get_config.well_typed():
        return []  # check_settings_dict says which value is of the wrong kind
    config = get_config()
    errors: list[checks.CheckMessage] = []
    for name in ("RECORD_TTL", "FINAL_TTL"):
        if not 0 < config[name] <= 30 * 24 * 3600:
            errors.append(
                checks.Error(
                    f'PROGRESS["{name}"] must be 1 second to 30 days: memcached reads a '
                    "larger expiry as an absolute Unix time",
                    id="webfarm_progress.E003",
                )
            )
    if config["FLUSH_INTERVAL"] <= 0 or config["HEARTBEAT_INTERVAL"] <= config["FLUSH_INTERVAL"]:
        errors.append(
            checks.Error(
                'PROGRESS["FLUSH_INTERVAL"] must be > 0 and below PROGRESS["HEARTBEAT_INTERVAL"]',
                id="webfarm_progress.E004",
            )
        )
    return errors


@checks.register()
def check_settings_dict(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """PROGRESS: unknown keys, wrong types."""
    return get_config.check_messages("webfarm_progress")
