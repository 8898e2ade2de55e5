"""The memcached client: namespace, replies, servers, and no re-hashing on failure."""

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from tests.harness import processes
from webfarm.core.client import build_client, get_client, get_values, parse_servers, server_client


def _raw(address: str) -> Client:
    host, port = address.rsplit(":", 1)
    return Client((host, int(port)), connect_timeout=1, timeout=1)


def test_every_key_goes_under_the_namespace(memcached_server, progress_on_real_memcached):
    get_client().set("job:abc", b"1")
    raw = _raw(memcached_server)
    try:
        assert raw.get(f"{progress_on_real_memcached}:job:abc") == b"1"
        assert raw.get("job:abc") is None
    finally:
        raw.close()


def test_add_reports_an_existing_key_because_replies_are_read():
    client = get_client()
    assert client.add("k", b"1") is True
    assert client.add("k", b"2") is False
    assert client.get("k") == b"1"


@pytest.mark.parametrize("spec", ["", "localhost", "host:", ":11211", "host:port", "host:0", "host:70000"])
def test_bad_server_specs_are_refused(spec):
    with pytest.raises(ImproperlyConfigured):
        parse_servers([spec])


def test_server_specs_parse_ipv4_names_and_ipv6():
    assert parse_servers(["10.0.0.1:11211", "cache:1", "[::1]:11212"]) == [
        ("10.0.0.1", 11211),
        ("cache", 1),
        ("::1", 11212),
    ]


def test_a_dead_server_keeps_its_keys_and_raises_instead_of_moving_them(tmp_path):
    """With two servers, killing one must not send its keys to the other."""
    first, first_addr = processes.memcached(tmp_path)
    second, second_addr = processes.memcached(tmp_path)
    client = build_client([first_addr, second_addr], "ring")
    try:
        keys = [f"key{i}" for i in range(200)]
        for key in keys:
            assert client.set(key, key.encode())
        owners = {key: client._get_client(key).server for key in keys}
        on_second = [k for k in keys if owners[k] == ("127.0.0.1", int(second_addr.split(":")[1]))]
        assert 0 < len(on_second) < len(keys)

        second.stop()
        for _ in range(5):  # well past pymemcache's retry_attempts
            for key in on_second[:5]:
                with pytest.raises((OSError, MemcacheError)):
                    client.get(key)
        # The survivor still answers for its own keys, and no key changed server.
        survivor_keys = [k for k in keys if k not in on_second]
        assert all(client.get(k) == k.encode() for k in survivor_keys)
        assert {key: client._get_client(key).server for key in keys} == owners
    finally:
        client.close()
        first.stop()
        second.stop()


def test_the_first_call_after_a_memcached_restart_succeeds(tmp_path, settings):
    """Connections memcached closed when it restarted fail once; the clients
    try once more on a fresh connection instead of failing their caller."""
    process, address = processes.memcached(tmp_path)
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [address]}
    ring, plain = get_client(), server_client("slot:x")
    try:
        assert ring.set("a", b"1") and plain.set("b", b"2") and get_values(["a"]) == {"a": b"1"}
        # Several threads at once leave several pooled connections behind.
        barrier = threading.Barrier(4)

        def hold_a_connection() -> None:
            barrier.wait()
            ring.get_many(["a", "b"])
            barrier.wait()

        threads = [threading.Thread(target=hold_a_connection) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        process.stop()
        process, _ = processes.memcached(tmp_path, port=int(address.rsplit(":", 1)[1]))
        assert ring.get("a") is None and ring.set("a", b"3")  # empty, but answering at once
        assert plain.add("b", b"4") and plain.get("b") == b"4"
        assert ring.get_many(["a"]) == {"a": b"3"} and get_values(["a", "b"]) == {"a": b"3", "b": b"4"}
    finally:
        process.stop()


def test_a_remembered_placement_is_the_one_the_hash_gives():
    from pymemcache.client.rendezvous import RendezvousHash

    from webfarm.core.client import FarmHash, nginx_server_index, read_by_nginx

    read_by_nginx("pub:")  # as webfarm.progress.store does: its public documents
    nodes = ["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"]
    farm, plain = FarmHash(b"ns:"), RendezvousHash()
    for node in nodes:
        farm.add_node(node)
        plain.add_node(node)
    # "pubx" names no family nginx reads: rendezvous, as any other key.
    keys = [f"job:{i:022d}" for i in range(500)] + [f"pubx:{i:022d}.token" for i in range(500)]
    keys += [f"pub:{i:022d}.token" for i in range(500)]
    for _ in range(2):  # computed, then remembered
        for key in keys:
            expected = (
                nodes[nginx_server_index(b"ns:" + key.encode(), 3)]
                if key.startswith("pub:")
                else plain.get_node(key)
            )
            assert farm.get_node(key) == expected, key
    assert len({farm.get_node(key) for key in keys}) == 3  # spread over every server
    single = FarmHash()
    single.add_node(nodes[0])
    assert {single.get_node(key) for key in keys} == {nodes[0]}


def test_a_memcached_too_old_for_meta_commands_stops_the_processes_at_start(settings, memcached_server):
    from django.core import checks

    from webfarm.core.checks import version_problem

    assert version_problem("1.6.18") is None and version_problem("1.7.0") is None
    assert "1.6.10 or later" in version_problem("1.6.9") and "1.6.10 or later" in version_problem("1.5.22")
    assert version_problem("1.6.x-custom")  # not a version this code can vouch for
    # The servers that answer are asked; one that does not answer yet is no error.
    dead = f"127.0.0.1:{processes.free_port()}"
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [memcached_server, dead]}
    assert not [m for m in checks.run_checks(databases=[]) if m.id == "webfarm_core.E003"]
