"""The polls app's settings: DEFAULTS overlaid by settings.POLLS."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # The memcached queue votes go through on their way to the database.
    "QUEUE": "poll-votes",
    # Votes per address per window, for anonymous voters (a shared NAT counts once).
    "ANONYMOUS_PER_ADDRESS": 20,
    "ANONYMOUS_WINDOW": 3600,
    # Seconds a "has voted" marker is kept in memcached: it settles a voter's
    # votes in flight and spares the request path a query. After it the
    # database's one vote per (poll, voter) holds, and the signed cookie of
    # the polls a browser voted in answers at once.
    "MARKER_TTL": 24 * 3600,
    # Seconds the running totals live before a rebuild from the database (one
    # count per open poll) renews them; a closed poll's simply go.
    "TOTALS_TTL": 24 * 3600,
    # Votes written to the database per flush batch.
    "FLUSH_BATCH": 500,
}


get_config = AppSettings("POLLS", DEFAULTS)
