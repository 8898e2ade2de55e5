"""The activity log's settings: DEFAULTS overlaid by settings.ACTIVITY."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # Answered polls (progress bars, poll results, the dashboard's live part,
    # metrics, static files) are counted, not logged one by one: they are most
    # of a farm's requests and say nothing a person looks for. This fraction
    # of them is logged all the same (0.01: one in a hundred). Failed ones
    # (status 400 and up) are always logged.
    "POLL_SAMPLE": 0.0,
}

get_config = AppSettings("ACTIVITY", DEFAULTS)
