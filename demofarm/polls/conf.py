"""The polls app's settings, overlaid by settings.POLLS."""

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "POLLS",
    [
        Setting("QUEUE", "poll-votes", "the memcached queue votes go through on their way to the database"),
        # A shared NAT counts once.
        Setting("ANONYMOUS_PER_ADDRESS", 20, "vote attempts per address per window, for anonymous voters"),
        Setting("ANONYMOUS_WINDOW", 3600, "that window, in seconds"),
        # It settles a voter's votes in flight and spares the request path a
        # query. After it the database's one vote per (poll, voter) holds, and
        # the signed cookie of the polls a browser voted in answers at once.
        Setting("MARKER_TTL", 24 * 3600, "seconds a has-voted marker lives in memcached"),
        # A closed poll's simply go.
        Setting(
            "TOTALS_TTL",
            24 * 3600,
            "seconds the running totals live before a rebuild from the database (one count per open poll) "
            "renews them",
        ),
        Setting("FLUSH_BATCH", 500, "votes written to the database per flush batch"),
    ],
)
