"""The limits app's settings, overlaid by settings.LIMITS."""

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "LIMITS",
    [
        Setting("DOWNLOADS", 16, "downloads streaming at once, farm-wide"),
        Setting("DOWNLOADS_PER_USER", 2, "downloads streaming at once, per user"),
        Setting("VOTES", 64, "vote requests handled at once, farm-wide"),
        # A report start tries again only after losing a race for a free slot,
        # never when every slot is held by a job.
        Setting("ATTEMPTS", 3, "tries for a download's or a vote's slot before a refusal"),
        Setting("PAUSE", 0.001, "seconds of the first pause between those tries (then 2x, 3x…)"),
        # Streaming renews it.
        Setting("REQUEST_LEASE", 60, "seconds a request holds its slot without renewal"),
        Setting("RETRY_AFTER", 5, "`Retry-After` of a refusal when nothing better is known, in seconds"),
        # Counted before any password is hashed (webfarm.limits.logins).
        Setting(
            "LOGIN_FAILURES",
            10,
            "failed logins of one username after which its logins are refused (429)",
        ),
        Setting(
            "LOGIN_FAILURES_PER_ADDRESS",
            50,
            "failed logins from one address after which its logins are refused",
        ),
        Setting("LOGIN_WINDOW", 300, "seconds from the first failure until such a refusal ends"),
        # Each one sends an e-mail (webfarm.limits.resets).
        Setting("RESETS_PER_EMAIL", 3, "password resets asked for one e-mail address, then refused (429)"),
        Setting("RESETS_PER_ADDRESS", 10, "password resets asked for from one address, then refused"),
        Setting("RESET_WINDOW", 3600, "seconds from the first reset asked for until such a refusal ends"),
    ],
)
