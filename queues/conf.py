"""The queues app's settings: DEFAULTS overlaid by settings.QUEUES."""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    "MAX_MESSAGE_BYTES": 64 * 1024,
    # Seconds a claimed message stays hidden before it is delivered again.
    "VISIBILITY_TIMEOUT": 60,
    # Seconds a consumer waits for an index handed out but not yet written
    # before marking it a hole (the producer then retries elsewhere).
    "HOLE_WAIT": 2.0,
    # Seconds between a consumer's scans for expired claims.
    "RECOVER_INTERVAL": 1.0,
    # Messages claim() takes at once when the queue has them.
    "PREFETCH": 8,
    # Two host:port strings: keep every queue on both servers as mirrors.
    "MIRRORS": [],
}


@cache
def get_config() -> dict[str, Any]:
    return {**DEFAULTS, **getattr(settings, "QUEUES", {})}


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "QUEUES":
        from queues.mirror import close_all

        get_config.cache_clear()
        close_all()
