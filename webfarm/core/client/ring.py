"""The ring: one client over every server, whose key-to-server map never
changes, each call guarded by the servers' health (webfarm.core.health)."""

import contextlib
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pymemcache.client.hash import HashClient

from webfarm.core import health
from webfarm.core.client.hashing import FarmHash
from webfarm.core.client.protocol import past_stale_connections, server_address
from webfarm.core.conf import get_config


class StableHashClient(HashClient):
    """A HashClient whose key-to-server map never changes.

    pymemcache's HashClient takes a failing server out of the ring, so its keys
    move to the survivors, and inside its retry window it answers with the
    default instead of raising. For counters, queue pointers and job records
    that silently splits state between servers (docs/operations.md). Here a
    server that fails stays in the ring: operations on its keys raise until it
    is back, and the caller decides what to do.
    """

    hasher: FarmHash

    def __init__(self, servers: list, **kwargs: Any) -> None:
        prefix = kwargs.get("key_prefix", b"")
        super().__init__(servers, hasher=lambda: FarmHash(prefix), **kwargs)

    def dark(self, key: str) -> bool:
        """Whether `key` is a document nginx reads that a pool change keeps
        dark: never on one list of servers (ChangingRing says otherwise)."""
        return False

    def _mark_failed_server(self, server: object) -> None:
        return None

    def _safely_run_func(self, client: Any, func: Any, default_val: Any, *args: Any, **kwargs: Any) -> Any:
        return super()._safely_run_func(client, _guarded(client, func), default_val, *args, **kwargs)

    def _set_many(self, client: Any, values: Any, *args: Any, **kwargs: Any) -> Any:
        # pymemcache's, with the call guarded: (stored keys, failed keys, error to raise).
        failed: list = []
        try:
            failed = _guarded(client, client.set_many)(values, *args, **kwargs)
        except Exception as exc:
            if not self.ignore_exc:
                return [], [], exc
        return [key for key in values if key not in failed], failed, None

    def ping(self) -> None:
        """Every server answers, or its error is raised: at once, with no
        try, for a server that is down (webfarm.core.health)."""
        for client in self.clients.values():
            _guarded(client, client.version)()

    def close(self) -> None:
        # Closing needs no server: a down one must not refuse it.
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()

    def __del__(self) -> None:
        # reset_client() drops clients without closing them (another thread may
        # be using one): the last one to let go closes the connections.
        with contextlib.suppress(Exception):
            self.close()


def _guarded(client: Any, func: Callable[..., Any]) -> Callable[..., Any]:
    """func, a call through one of the ring's clients, past stale connections
    and refused at once while its server is down (webfarm.core.health)."""
    # The pool drops the dead connection (destroy_on_fail): the retry gets a new one.
    idle = len(getattr(getattr(client, "client_pool", None), "free", ()))
    address = server_address(client.server)

    def run(*args: Any, **kwargs: Any) -> Any:
        return health.call(address, past_stale_connections, func, *args, tries=idle + 2, **kwargs)

    return run


def parse_servers(servers: list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """host:port strings -> (host, port) pairs; IPv6 as [::1]:11211."""
    parsed = []
    for spec in servers:
        host, sep, port = spec.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f'memcached server {spec!r} is not host:port (MEMCACHED["SERVERS"])')
        parsed.append((host, int(port)))
    if not parsed:
        raise ImproperlyConfigured('MEMCACHED["SERVERS"] names no server')
    return parsed


def build_client(servers: list[str] | tuple[str, ...], namespace: str, **options: object) -> StableHashClient:
    config = get_config()
    kwargs: dict = {
        "key_prefix": f"{namespace}:".encode(),
        # With noreply, add() never reports "exists" and -M's out-of-memory
        # refusals are lost.
        "default_noreply": False,
        "connect_timeout": config["CONNECT_TIMEOUT"],
        "timeout": config["TIMEOUT"],
        "no_delay": True,
        # Gunicorn threads and the reporter's heartbeat share the client.
        "use_pooling": True,
        "ignore_exc": False,
        # MEMCACHED["OPTIONS"]: more of pymemcache's options (a pool size, or
        # the counting socket module the round-trip tests pass).
        **config["OPTIONS"],
        **options,
    }
    return StableHashClient(parse_servers(servers), **kwargs)
