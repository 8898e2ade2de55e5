"""Django cache backend on the same stable hash ring as the progress client."""

from django.core.cache.backends.memcached import PyMemcacheCache

from progress.client import StableHashClient


class StablePyMemcacheCache(PyMemcacheCache):
    """PyMemcacheCache that never re-hashes keys when a server fails.

    Sessions cached on a server that briefly vanished must not be read from a
    stale copy elsewhere once it returns; with ignore_exc the cache just misses
    and cached_db sessions read the database.
    """

    def __init__(self, server: str | list[str], params: dict) -> None:
        super().__init__(server, params)
        self._class = StableHashClient
