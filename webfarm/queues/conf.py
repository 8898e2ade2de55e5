"""The queues app's settings, overlaid by settings.QUEUES."""

from django.conf import settings

from webfarm.core.appsettings import AppSettings, Setting

get_config = AppSettings(
    "QUEUES",
    [
        Setting("MAX_MESSAGE_BYTES", 64 * 1024, "largest queue message, in bytes"),
        Setting(
            "VISIBILITY_TIMEOUT",
            60,
            "seconds a claimed message stays hidden before it is delivered again",
        ),
        # The producer then retries elsewhere.
        Setting(
            "HOLE_WAIT",
            2.0,
            "seconds a consumer waits for an index handed out but not yet written before marking it a hole",
        ),
        Setting("RECOVER_INTERVAL", 1.0, "seconds between a consumer's scans for expired claims"),
        Setting("PREFETCH", 8, "messages `claim()` takes at once when the queue has them"),
        Setting("MIRRORS", [], "two `host:port`: keep every queue on both servers as mirrors"),
        Setting(
            "MAX_DELIVERIES",
            5,
            "deliveries without an ack (lapsed claims, rejects) before a message goes to the dead letters",
        ),
        # Covers a message ahead of it held in work this long. Past it the
        # index reads as a hole, which is finished too.
        Setting(
            "FINISHED_TTL",
            3600,
            "seconds at most an acked marker waits for the floor to pass it (it is deleted then)",
        ),
        # Far longer than a producer may hold an index it took (it drops
        # reserved ones after HOLE_WAIT / 2), so a late writer always loses
        # the race instead of writing where nobody reads.
        Setting("HOLE_TTL", 600, "seconds a hole marker lives"),
        Setting(
            "DEAD_LETTER_TTL",
            7 * 24 * 3600,
            "seconds a dead letter is kept for an operator (dashboard, /stats/metrics, `manage.py "
            "dead_letters`)",
        ),
        Setting("HTTP_MAX_QUEUES", 100, "queues the HTTP front keeps at most"),
        Setting(
            "HTTP_IDLE_AFTER",
            24 * 3600,
            "seconds after which an unused HTTP queue that holds nothing is forgotten",
        ),
        # So one token holder cannot fill the memcached the farm's own queues
        # and Celery's broker live in.
        Setting(
            "HTTP_MAX_MESSAGES",
            10_000,
            "messages one HTTP queue may hold (waiting, in work or dead); past it a put is a 507",
        ),
        Setting(
            "HTTP_MAX_BYTES",
            1024 * 1024,
            "bytes of memcached one HTTP queue may take (waiting, in work or dead; keys and item "
            "headers counted); past it a put is a 507",
        ),
        Setting(
            "HTTP_MAX_TOTAL_BYTES",
            8 * 1024 * 1024,
            "bytes all the HTTP queues together may hold; keep it well below the memory of the memcached "
            "they share with the farm",
        ),
    ],
)


def default_queue() -> str:
    """Celery's default queue: CELERY_TASK_DEFAULT_QUEUE, or Celery's own
    default where the project does not set it."""
    return str(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))
