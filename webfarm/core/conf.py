"""The memcached client's settings, overlaid by settings.MEMCACHED, and the
defaults of the top-level settings of core's session engine and user backend
(a site that sets neither gets these; the demo site reads them from the
environment with the same defaults)."""

from webfarm.core.appsettings import AppSettings, Setting

# SESSION_CACHE_TTL: seconds a session read from the database stays cached.
SESSION_CACHE_TTL = 600
# USER_CACHE_TTL: seconds a user read from the database stays cached.
USER_CACHE_TTL = 300

get_config = AppSettings(
    "MEMCACHED",
    [
        Setting(
            "SERVERS",
            ["127.0.0.1:11211"],
            "comma-separated `host:port` (IPv6 as `[::1]:11211`); the same list, in the same order, on "
            "every node",
        ),
        # So several farms can share servers.
        Setting("NAMESPACE", "webfarm", "prefix of every key; lets several farms share memcached"),
        # A dead server must cost a request little, not hang it.
        Setting("CONNECT_TIMEOUT", 0.5, "seconds to connect to a memcached server"),
        Setting("TIMEOUT", 2.0, "seconds to wait for a memcached server's answer"),
        # webfarm.core.health: one failure on loopback is a refused connection, never a slow one.
        Setting(
            "DOWN_AFTER",
            1,
            "a server whose calls timed out (or whose host was unreachable) this many times in a row is down "
            "for the process: calls to it fail at once "
            "([operations.md](operations.md#a-memcached-host-vanishes))",
        ),
        Setting("RETRY_DOWN", 1.0, "seconds between the prober's tries of a server that is down"),
        Setting(
            "POOL_FOLLOW",
            True,
            "follow the pool the database names (`manage.py memcached_pool`), read every `POOL_REFRESH` "
            "seconds, over `SERVERS`",
        ),
        Setting("POOL_REFRESH", 1.0, "seconds between a process's reads of the pool it should use"),
        Setting(
            "POOL_STALE",
            15.0,
            "seconds a process uses the pool it last read; past them it makes no memcached call until it "
            "reads it again (a process silent twice as long counts as gone)",
        ),
        Setting(
            "OPTIONS",
            {},
            "more keyword arguments for pymemcache's clients (`max_pool_size`, …)",
            environ=False,
        ),
    ],
)
