"""The dashboard's settings: DEFAULTS overlaid by settings.DASHBOARD."""

from functools import cache
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

DEFAULTS: dict[str, Any] = {
    # Seconds between a Celery worker's heartbeats; a worker is shown as
    # silent after three missed ones.
    "WORKER_HEARTBEAT": 10.0,
    # Seconds the charts' data and pictures are reused before one process
    # recomputes them (the others get the previous ones meanwhile).
    "CHART_TTL": 30,
    # Hours in the hourly charts, minutes in the per-minute one.
    "HOURS": 48,
    "MINUTES": 120,
    # Days of daily summaries shown.
    "DAYS": 14,
    # Newest activity-log entries shown.
    "ACTIVITY_ENTRIES": 30,
    # Running jobs shown with their bars.
    "RUNNING_JOBS": 20,
}


@cache
def get_config() -> dict[str, Any]:
    return {**DEFAULTS, **getattr(settings, "DASHBOARD", {})}


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "DASHBOARD":
        get_config.cache_clear()
