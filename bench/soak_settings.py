"""The demo's settings for the broker soak: Redis, too, hands a killed
worker's unacknowledged tasks back after CELERY_BROKER_VISIBILITY_TIMEOUT
(the demo keeps two hours there, for long reports), and looks for them
every second, as the memcached broker's recovery scan does (kombu's
default looks every 10 x 10 s)."""

from demofarm.env import env_int
from demofarm.settings import *  # noqa: F403

if not CELERY_BROKER_URL.startswith("memcached://"):  # noqa: F405
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_BROKER_VISIBILITY_TIMEOUT", 60),
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    }
