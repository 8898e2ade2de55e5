"""The polls app's settings: DEFAULTS overlaid by settings.POLLS."""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # The memcached queue votes go through on their way to the database.
    "QUEUE": "poll-votes",
    # Votes per address per window, for anonymous voters (a shared NAT counts once).
    "ANONYMOUS_PER_ADDRESS": 20,
    "ANONYMOUS_WINDOW": 3600,
    # Seconds the "has voted" markers are kept in memcached (at most 30 days).
    "MARKER_TTL": 30 * 24 * 3600,
    # Votes written to the database per flush batch.
    "FLUSH_BATCH": 500,
}


@cache
def get_config() -> dict[str, Any]:
    return {**DEFAULTS, **getattr(settings, "POLLS", {})}


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "POLLS":
        get_config.cache_clear()
