"""One holder at a time, farm-wide, for a periodic job (a drainer, a flusher).

The lock is a memcached key with a short lifetime that its holder renews as
it works, so a holder that dies (SIGKILL, OOM, a lost host) frees it within
one lifetime instead of blocking the job for minutes.
"""

import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from webfarm.core.client import get_client


class Busy(Exception):
    """Another process holds the lock."""


@contextmanager
def lock(
    key: str, ttl: int, busy: type[Busy] = Busy, what: str = "another holder"
) -> Iterator[Callable[[], None]]:
    """Hold `key` for the block, or raise `busy`. Yields `renew()`, to call
    at least once per `ttl` while the work goes on."""
    client = get_client()
    holder = f"{socket.gethostname()}:{os.getpid()}".encode()
    if not client.add(key, holder, expire=ttl):
        raise busy(f"{what} is running")

    def renew() -> None:
        client.touch(key, ttl)

    try:
        yield renew
    finally:
        client.delete(key)
