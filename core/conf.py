"""The memcached client's settings: DEFAULTS overlaid by settings.MEMCACHED."""

from typing import Any

from core.appsettings import AppSettings

DEFAULTS: dict[str, Any] = {
    # host:port strings; several servers form a hash ring.
    "SERVERS": ["127.0.0.1:11211"],
    # Prefix of every key the farm writes, so several farms can share servers.
    "NAMESPACE": "webfarm",
    # Seconds: a dead server must cost a request little, not hang it.
    "CONNECT_TIMEOUT": 0.5,
    "TIMEOUT": 2.0,
    # A server whose connection failed this many times in a row is down for
    # the process: calls to it fail at once, and one call tries it again every
    # RETRY_DOWN seconds (core.health).
    "DOWN_AFTER": 1,
    "RETRY_DOWN": 1.0,
    # More keyword arguments for pymemcache's clients (max_pool_size, ...).
    "OPTIONS": {},
}


def _reset_client() -> None:
    from core.client import reset_client
    from core.health import forget

    reset_client()
    forget()


get_config = AppSettings("MEMCACHED", DEFAULTS, on_change=_reset_client)
