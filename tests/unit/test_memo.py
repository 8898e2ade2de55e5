"""get_or_set: one computation farm-wide, stale values while refreshing."""

import json
import time

import pytest

from tests.harness.processes import free_port
from tests.harness.together import run_together
from webfarm.core.client import get_client, meta_command, server_client
from webfarm.core.memo import get_or_set
from webfarm.core.seal import seal


def test_many_processes_at_once_compute_once(memcached_server, progress_on_real_memcached):
    client = get_client()
    client.set("test:computations", b"0")
    answers = run_together(
        "tests.harness.memo_worker",
        "stampede",
        count=16,
        servers=memcached_server,
        namespace=progress_on_real_memcached,
    )
    assert answers == ["42"] * 16
    assert int(client.get("test:computations")) == 1


def _stale(value: str) -> None:
    """The value as it stands once past its ttl: less than stale_for left to live."""
    envelope = json.dumps({"v": value, "fresh_until": time.time() - 1}).encode()
    get_client().set("memo:k", seal("memo:k", envelope, ttl=30), expire=30)


def test_a_stale_value_is_served_while_one_caller_refreshes():
    calls = []
    assert get_or_set("k", lambda: calls.append(1) or "first", ttl=60, stale_for=60) == "first"
    assert get_or_set("k", lambda: calls.append(1) or "again", ttl=60, stale_for=60) == "first"  # fresh
    _stale("first")
    # Another process asks first and wins the refresh (memcached answers W to it alone)...
    other = server_client("memo:k")
    won = other.meta([meta_command(b"mg", other.wire_key("memo:k"), "v", "N60", "R60")])[0]
    assert b"W" in won.flags
    # ...so this caller gets the stale value at once, without computing.
    assert get_or_set("k", lambda: calls.append(1) or "second", ttl=60, stale_for=60) == "first"
    assert len(calls) == 1
    # Nobody refreshing a stale value: this caller does.
    _stale("first")
    assert get_or_set("k", lambda: calls.append(1) or "second", ttl=60, stale_for=60) == "second"
    assert get_or_set("k", lambda: calls.append(1) or "third", ttl=60, stale_for=60) == "second"
    assert len(calls) == 2


@pytest.mark.django_db  # measure() counts queries too
def test_a_miss_and_a_hit_cost_two_round_trips_and_one(settings):
    from tests.harness.roundtrips import counting, measure

    with counting(settings):
        miss = measure(lambda: get_or_set("rt", lambda: 1, ttl=60))
        hit = measure(lambda: get_or_set("rt", lambda: 2, ttl=60))
    assert (miss.result, hit.result) == (1, 1)
    assert miss.round_trips - miss.connects == 2 and hit.round_trips - hit.connects == 1


def test_without_memcached_it_just_computes(settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    assert get_or_set("k", lambda: 7, ttl=60) == 7


def test_a_planted_value_is_replaced_at_once_not_waited_on():
    get_client().set("memo:k", b"\x80\x04planted")  # a pickle, or anything not sealed by this farm
    started = time.monotonic()
    assert get_or_set("k", lambda: "computed", ttl=60) == "computed"
    assert time.monotonic() - started < 1  # no wait for a refresher nobody elected
    assert get_or_set("k", lambda: "again", ttl=60) == "computed"  # and it healed
