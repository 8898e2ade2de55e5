"""The queues app's settings: DEFAULTS overlaid by settings.QUEUES."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    "MAX_MESSAGE_BYTES": 64 * 1024,
    # Seconds a claimed message stays hidden before it is delivered again.
    "VISIBILITY_TIMEOUT": 60,
    # Seconds a consumer waits for an index handed out but not yet written
    # before marking it a hole (the producer then retries elsewhere).
    "HOLE_WAIT": 2.0,
    # Seconds between a consumer's scans for expired claims.
    "RECOVER_INTERVAL": 1.0,
    # Messages claim() takes at once when the queue has them.
    "PREFETCH": 8,
    # Two host:port strings: keep every queue on both servers as mirrors.
    "MIRRORS": [],
    # Deliveries without an acknowledgement (expired claims, rejects) after
    # which a message goes to its queue's dead letters instead.
    "MAX_DELIVERIES": 5,
    # Seconds an "acked" marker may wait for the floor to pass it (then it is
    # deleted): covers a message ahead of it held in work this long. Past it
    # the index reads as a hole, which is finished too.
    "FINISHED_TTL": 3600,
    # Seconds a hole marker lives: far longer than a producer may hold an index
    # it took (it drops reserved ones after HOLE_WAIT / 2), so a late writer
    # always loses the race instead of writing where nobody reads.
    "HOLE_TTL": 600,
    # Seconds a dead letter is kept for an operator (dashboard, /stats/metrics,
    # manage.py dead_letters) before memcached drops it.
    "DEAD_LETTER_TTL": 7 * 24 * 3600,
    # Queues the HTTP front keeps at most; one unused this many seconds that
    # holds nothing is forgotten (queues.front).
    "HTTP_MAX_QUEUES": 100,
    "HTTP_IDLE_AFTER": 24 * 3600,
    # What one HTTP queue may hold (messages waiting, in work or dead): a
    # put past either is refused (507), so one token holder cannot fill the
    # memcached the farm's own queues and Celery's broker live in...
    "HTTP_MAX_MESSAGES": 10_000,
    "HTTP_MAX_BYTES": 1024 * 1024,
    # ...and all of its queues together, bytes: keep it well below the
    # memory of a memcached the farm shares with the front.
    "HTTP_MAX_TOTAL_BYTES": 8 * 1024 * 1024,
}


def _close_mirrors() -> None:
    from queues.mirror import close_all

    close_all()


get_config = AppSettings("QUEUES", DEFAULTS, on_change=_close_mirrors)
