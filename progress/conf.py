"""The progress app's settings: one DEFAULTS dict overlaid by settings.PROGRESS."""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # host:port strings; several servers form a hash ring.
    "SERVERS": ["127.0.0.1:11211"],
    # Prefix of every key this app writes, so several farms can share servers.
    "NAMESPACE": "webfarm",
    # A task may call update() millions of times; memcached sees at most one
    # write per interval (seconds).
    "FLUSH_INTERVAL": 0.25,
    # A running job proves it is alive at least this often (seconds), even
    # when its code is stuck in one long step.
    "HEARTBEAT_INTERVAL": 5.0,
    # A running job that has not beaten for this many intervals is lost (its
    # worker died): the reaper ends it, frees its slots and may retry it.
    "LOST_AFTER_BEATS": 3,
    # How long a job's record stays in memcached (seconds, at most 30 days:
    # memcached reads larger values as absolute times).
    "RECORD_TTL": 7 * 24 * 3600,
    "CONNECT_TIMEOUT": 0.5,
    "TIMEOUT": 2.0,
}


@cache
def get_config() -> dict[str, Any]:
    return {**DEFAULTS, **getattr(settings, "PROGRESS", {})}


def lost_after() -> float:
    """Seconds of silence after which a running job counts as lost."""
    config = get_config()
    return config["LOST_AFTER_BEATS"] * config["HEARTBEAT_INTERVAL"]


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "PROGRESS":
        from progress.client import reset_client

        get_config.cache_clear()
        reset_client()
