"""The dashboard's settings, overlaid by settings.DASHBOARD."""

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "DASHBOARD",
    [
        # A worker is shown as silent after three missed ones.
        Setting(
            "WORKER_HEARTBEAT",
            10.0,
            "seconds between a Celery worker's heartbeats (the dashboard's workers)",
        ),
        # One process recomputes them; the others get the previous ones meanwhile.
        Setting("CHART_TTL", 30, "seconds the dashboard's chart data and pictures are reused"),
        Setting("HOURS", 48, "hours in the hourly charts"),
        Setting("MINUTES", 120, "minutes in the per-minute chart"),
        Setting("DAYS", 14, "days of daily summaries shown"),
        Setting("ACTIVITY_ENTRIES", 30, "newest activity-log entries shown"),
        Setting("RUNNING_JOBS", 20, "running jobs shown with their bars"),
    ],
)
