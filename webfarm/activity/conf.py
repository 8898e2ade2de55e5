"""The activity log's settings, overlaid by settings.ACTIVITY."""

from pathlib import Path

from django.conf import settings

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "ACTIVITY",
    [
        # Answered polls (progress bars, poll results, the dashboard's live
        # part, metrics, static files) are most of a farm's requests and say
        # nothing a person looks for: they are counted (requests_polled), not
        # logged one by one. Failed ones (status 400 and up) are always logged.
        Setting("POLL_SAMPLE", 0.0, "fraction (0 to 1) of answered polls logged one by one all the same"),
    ],
)


def log_file() -> Path:
    """ACTIVITY_LOG_FILE, where the drainer appends the site log. A project
    that installs the app need not set it: the drainer's working directory."""
    return Path(getattr(settings, "ACTIVITY_LOG_FILE", "activity.log"))
