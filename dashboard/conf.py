"""The dashboard's settings: DEFAULTS overlaid by settings.DASHBOARD."""

from typing import Any

from core.appsettings import AppSettings

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


get_config = AppSettings("DASHBOARD", DEFAULTS)
