"""get_or_set: one computation farm-wide, stale values while refreshing."""

import json
import time

from core.client import get_client
from core.memo import get_or_set
from core.seal import seal
from tests.processes import free_port
from tests.together import run_together


def test_many_processes_at_once_compute_once(memcached_server, progress_on_real_memcached):
    client = get_client()
    client.set("test:computations", b"0")
    answers = run_together(
        "tests.memo_worker",
        "stampede",
        count=16,
        servers=memcached_server,
        namespace=progress_on_real_memcached,
    )
    assert answers == ["42"] * 16
    assert int(client.get("test:computations")) == 1


def test_a_stale_value_is_served_while_one_caller_refreshes():
    calls = []
    assert get_or_set("k", lambda: calls.append(1) or "first", ttl=60) == "first"
    client = get_client()
    stale = json.dumps({"v": "first", "fresh_until": time.time() - 1}).encode()
    client.set("memo:k", seal("memo:k", stale))  # gone stale
    client.add("memo:k:lock", b"1", expire=60)  # someone else is refreshing
    assert get_or_set("k", lambda: calls.append(1) or "second", ttl=1, stale_for=60) == "first"
    client.delete("memo:k:lock")
    assert get_or_set("k", lambda: calls.append(1) or "second", ttl=1, stale_for=60) == "second"
    assert len(calls) == 2


def test_without_memcached_it_just_computes(settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    assert get_or_set("k", lambda: 7, ttl=60) == 7
