"""Django cache backend on the same stable hash ring as the progress client."""

from typing import Any

from django.core.cache.backends.memcached import PyMemcacheCache

from webfarm.core.client import StableHashClient
from webfarm.core.serde import JsonSerde


class StablePyMemcacheCache(PyMemcacheCache):
    """PyMemcacheCache that never re-hashes keys when a server fails, and
    never unpickles.

    Sessions cached on a server that briefly vanished must not be read from a
    stale copy elsewhere once it returns; with ignore_exc the cache just misses
    and cached_db sessions read the database. Django's default serde is
    pickle, which would run whatever anyone who can reach memcached planted:
    this one reads JSON and plain values only, whatever OPTIONS say.
    """

    _options: dict[str, Any]  # Django's, which its stubs leave out

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = StableHashClient
        self._options = {**self._options, "serde": JsonSerde()}

    def close(self, **kwargs: object) -> None:
        """Keep the connections. Django closes every cache at the end of each
        request (for clients that leak them); this client pools them per
        thread, and closing would make every request that reads its session
        open a new TCP connection first: one more round trip."""
