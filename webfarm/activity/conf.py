"""The activity log's settings, overlaid by settings.ACTIVITY."""

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
