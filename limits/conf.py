"""The limits app's settings: DEFAULTS overlaid by settings.LIMITS."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # Report jobs queued or running at once, farm-wide: per user, per report type.
    "REPORTS_PER_USER": 2,
    "REPORTS_PER_KIND": 4,
    # Downloads streaming at once: farm-wide, per user.
    "DOWNLOADS": 16,
    "DOWNLOADS_PER_USER": 2,
    # Vote requests being handled at once, farm-wide.
    "VOTES": 64,
    # Quick tries before a refusal, and the pause after the first (grows linearly).
    "ATTEMPTS": 3,
    "PAUSE": 0.001,
    # Seconds a request holds its slot without renewal (streaming renews it).
    "REQUEST_LEASE": 60,
    # Retry-After when nothing better is known (seconds).
    "RETRY_AFTER": 5,
    # Failed logins of one username, and from one address, before its logins
    # are refused until LOGIN_WINDOW seconds after the first (limits.logins).
    "LOGIN_FAILURES": 10,
    "LOGIN_FAILURES_PER_ADDRESS": 50,
    "LOGIN_WINDOW": 300,
}


get_config = AppSettings("LIMITS", DEFAULTS)
