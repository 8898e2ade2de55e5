"""The clients a process uses: the ring, built once per process from the
settings, and a plain client per thread to one server (a queue's, a batch's)."""

import contextlib
import os
import threading
from collections.abc import Callable, Iterable

from django.core.exceptions import ImproperlyConfigured

from webfarm.core.client.changing import ChangingRing, Phase
from webfarm.core.client.protocol import ReconnectingClient
from webfarm.core.client.ring import StableHashClient, build_client
from webfarm.core.conf import get_config
from webfarm.core.pool import Plan, Stage, current_plan

_lock = threading.Lock()
_clients: dict[tuple[int, Plan], StableHashClient] = {}


def get_client() -> StableHashClient:
    """The process's client, on the pool it uses now (webfarm.core.pool); a
    forked child (Celery prefork) builds its own. While the pool changes,
    a ChangingRing over the old list and the new one."""
    plan = current_plan()
    client = _clients.get((os.getpid(), plan))
    if client is None:
        client, replaced = _kept(_clients, plan, _build)
        if replaced:
            # The pool changed: what each thread keeps per server (a
            # queue's client) is found again on the new ring.
            _next_epoch()
    return client


_leftovers: dict[tuple[int, Plan], StableHashClient] = {}


def leftover_ring() -> StableHashClient | None:
    """While a change is at its NEW stage, the ring of the list it leaves:
    where a group kept on one server that moved (a queue) may still hold
    what its readers must take. None at any other time."""
    plan = current_plan()
    if not plan.leftovers:
        return None
    ring = _leftovers.get((os.getpid(), plan))
    if ring is None:
        ring, _ = _kept(_leftovers, plan, _build_leftovers)
    return ring


def _kept(
    store: dict[tuple[int, Plan], StableHashClient], plan: Plan, make: Callable[[Plan], StableHashClient]
) -> tuple[StableHashClient, bool]:
    """The ring this process keeps in `store` for `plan`, made if missing
    (one per process: a forked child makes its own), and whether it
    replaced one this process made for another plan."""
    slot = (os.getpid(), plan)
    with _lock:
        ring = store.get(slot)
        if ring is not None:
            return ring, False
        replaced = any(pid == slot[0] for pid, _ in store)
        store.clear()
        store[slot] = ring = make(plan)
        return ring, replaced


def _build_leftovers(plan: Plan) -> StableHashClient:
    return build_client(plan.leftovers, get_config()["NAMESPACE"])


def _build(plan: Plan) -> StableHashClient:
    namespace = get_config()["NAMESPACE"]
    new = build_client(plan.servers, namespace)
    if not plan.changing:
        return new
    phase = Phase.FOLLOW if plan.stage is Stage.FOLLOW else Phase.LEAD
    return ChangingRing(build_client(plan.old, namespace), new, phase)  # type: ignore[return-value]


def reset_client() -> None:
    with _lock:
        # Not closed here: another thread (a log shipper, a heartbeat) may be
        # in the middle of a call, and a pool cleared under it loses track of
        # the connection it reopens. Dropped, the client closes its
        # connections when the last user lets go of it (__del__).
        _clients.clear()
        # Each thread closes its own server clients of older epochs (server_client).
        _next_epoch()


get_config.when_changed(reset_client)


def _next_epoch() -> None:
    global _epoch
    _epoch += 1


def client_epoch() -> int:
    """Changes whenever reset_client() replaces the clients (settings changed)."""
    return _epoch


def client_options(ring: StableHashClient | None = None) -> dict:
    """The settings' options for a plain (unpooled) client: namespace, timeouts."""
    ring = ring or get_client()
    return {k: v for k, v in ring.default_kwargs.items() if k not in _POOL_OPTIONS}


_local = threading.local()
_POOL_OPTIONS = {"max_pool_size", "pool_idle_timeout", "lock_generator"}
_epoch = 0


def server_client(route_key: str, ring: StableHashClient | None = None) -> ReconnectingClient:
    """A plain client, for this thread, to the one server `route_key` hashes to
    on `ring` (the settings' servers by default).

    A queue keeps all its keys on one server so its counters and entries never
    split, and so a batch is one pipelined round trip to one socket.
    """
    ring = ring or get_client()
    return client_of(server_of(route_key, ring), ring)


def server_of(route_key: str, ring: StableHashClient | None = None) -> str:
    """The server `route_key` hashes to on `ring`: where a queue, a limit's
    slots or a batch's keys that share it live together."""
    server = (ring or get_client()).hasher.get_node(route_key)
    if server is None:
        raise ImproperlyConfigured('MEMCACHED["SERVERS"] names no server')
    return server


def get_values(keys: Iterable[str], ring: StableHashClient | None = None) -> dict[str, bytes]:
    """The values of `keys` found (on `ring`, the settings' servers by
    default): one get_many per server, through this thread's own clients.

    What the ring's get_many answers, for a request's path: without the
    ring's pool and its second guard around each call, a poll's read costs
    a sixth less CPU (docs/benchmarks.md)."""
    ring = ring or get_client()
    if isinstance(ring, ChangingRing):
        return ring.get_many(keys)
    by_server: dict[str, list[str]] = {}
    for key in keys:
        by_server.setdefault(server_of(key, ring), []).append(key)
    found: dict[str, bytes] = {}
    for server, group in by_server.items():
        found.update(client_of(server, ring).get_many(group))
    return found


def client_of(server: str, ring: StableHashClient) -> ReconnectingClient:
    cache: dict[tuple, ReconnectingClient] = _local.__dict__.setdefault("clients", {})
    # A forked child inherits this thread's sockets: key by pid too. The epoch
    # retires every thread's entries when reset_client() replaces the clients;
    # each thread closes its own retired ones (never another thread's, which
    # may be in the middle of a call).
    pid = os.getpid()
    slot = (pid, _epoch, id(ring), server)
    client = cache.get(slot)
    if client is None:
        for old in [key for key in cache if key[0] == pid and key[1] != _epoch]:
            with contextlib.suppress(Exception):
                cache.pop(old).close()
        client = ReconnectingClient(ring.clients[server].server, **client_options(ring))
        cache[slot] = client
    return client
