"""What a reader does with a value in memcached that this farm did not write.

memcached is shared and unauthenticated: anyone who can reach it can write any
key. Every reader checks what it reads; a value that fails the check is
treated as missing (the reader falls back as it would after a restart), logged
once a minute per kind, and counted as `memcached_refused{family}` so
operators see that someone writes where they should not (webfarm.core.counters
listens to `value_refused`: the counters themselves read lists, which refuse).
"""

import logging
import time

from django.dispatch import Signal

# Sent with family= for each refused value.
value_refused = Signal()
logger = logging.getLogger(__name__)

WARN_EVERY = 60.0
_warned: dict[str, float] = {}


def refused(family: str, key: bytes | str, why: str) -> None:
    """Note a refused value of key family `family` ("job", "dj", "q"...).
    `key` is logged: a key holding a secret is passed with it masked."""
    now = time.monotonic()
    if now - _warned.get(family, -WARN_EVERY) >= WARN_EVERY:
        _warned[family] = now
        text = key.decode(errors="replace") if isinstance(key, bytes) else key
        logger.warning("memcached value under %.120r refused (%s): not written by this farm", text, why)
    value_refused.send(refused, family=family)
