"""Two memcached servers, one dies: keys that hashed to it fail clearly and
never move to the survivor, so counters, queue pointers, limit slots and job
records cannot split between servers."""

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from tests.harness import processes
from webfarm.core import counters
from webfarm.core.client import get_client, get_values, server_client
from webfarm.core.slots import SlotsUnavailable, acquire
from webfarm.queues.exceptions import QueueUnavailable
from webfarm.queues.queue import Queue

pytestmark = pytest.mark.django_db


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_what_hashed_to_a_dead_server_fails_clearly_and_stays_there(tmp_path, settings):
    first, first_addr = processes.memcached(tmp_path)
    second, second_addr = processes.memcached(tmp_path)
    try:
        settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [first_addr, second_addr]}
        counters.forget_known()
        ring = get_client()
        dead = ("127.0.0.1", _port(second_addr))

        def on_dead(route: str) -> bool:
            return server_client(route).server == dead

        names = [f"n{i}" for i in range(60)]
        dead_queue = next(n for n in names if on_dead(f"q:{n}"))
        live_queue = next(n for n in names if not on_dead(f"q:{n}"))
        dead_scope = next(n for n in names if on_dead(f"slot:{n}"))
        dead_counter = next(n for n in names if ring._get_client(f"c:c_{n}").server == dead)
        Queue(dead_queue).put(b"before")

        second.stop()
        dropped = counters.dropped_here()
        counters.count(f"c_{dead_counter}")
        assert counters.dropped_here() == dropped + 1  # kept as dropped, not counted elsewhere
        with pytest.raises(QueueUnavailable):
            Queue(dead_queue).put(b"while down")
        with pytest.raises(SlotsUnavailable):
            acquire([(dead_scope, 1)], "me", ttl=60)
        assert Queue(live_queue).put(b"fine") >= 1  # the survivor's keys carry on

        # Nothing moved: the survivor holds none of the dead server's keys.
        survivor = Client(("127.0.0.1", _port(first_addr)))
        prefix = settings.MEMCACHED["NAMESPACE"]
        for key in (f"q:{dead_queue}:gen", f"c:c_{dead_counter}", f"slot:{dead_scope}:0"):
            assert survivor.get(f"{prefix}:{key}") is None, key
        survivor.close()

        restarted, _ = processes.memcached(tmp_path, port=_port(second_addr))
        try:
            # Back where it was (empty: memcached keeps nothing across a restart).
            assert Queue(dead_queue).put(b"after") >= 1
            assert acquire([(dead_scope, 1)], "me", ttl=60).keys == [f"slot:{dead_scope}:0"]
        finally:
            restarted.stop()
    finally:
        first.stop()
        second.stop()


def test_a_requests_reads_find_each_key_on_its_own_server(tmp_path, settings):
    """get_values (a poll's reads) asks each key's own server, as the ring
    does, and a key on a dead server fails the read rather than go missing."""
    first, first_addr = processes.memcached(tmp_path)
    second, second_addr = processes.memcached(tmp_path)
    try:
        settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [first_addr, second_addr]}
        ring = get_client()
        keys = [f"pub:k{i}" for i in range(20)]
        ring.set_many({key: key.encode() for key in keys})
        servers = {ring._get_client(key).server for key in keys}
        assert len(servers) == 2
        assert get_values([*keys, "pub:absent"]) == ring.get_many(keys) == {k: k.encode() for k in keys}
        second.stop()
        with pytest.raises((OSError, MemcacheError)):
            get_values(keys)
    finally:
        first.stop()
        second.stop()
