"""A day's traffic in a minute: memcached memory comes back to where it was.

20,000 requests of mixed kinds (poll pages and results, 404s, votes from new
anonymous voters, logins, report starts, progress polls) through a real web
node, worker and beat on a memcached run with -M. The farm runs with short
lifetimes (seconds, set below) so that what expires does so within the
test; their production values are settings, listed in demofarm/keyspace.py.

After the drainers catch up and those lifetimes pass, memcached holds no
more than BOUND_ITEMS items and BOUND_BYTES bytes beyond what it held before
the traffic (counters or registry lines the traffic named first), and every
key it holds belongs to a family of demofarm/keyspace.py and lives no longer
than that family may.
"""

import time

import pytest

from tests.harness import keyspace, processes
from tests.harness.soak import (
    NAMESPACE,
    SHORT,
    TOTAL,
    memory,
    prepare,
    run_traffic,
    settle,
    soak_farm,
    wait_drained,
)

pytestmark = pytest.mark.farm


@pytest.mark.timeout(900)  # 20,000 requests, then the drains and lifetimes; settle() has its own deadlines
def test_a_days_traffic_leaves_memcached_as_it_found_it(tmp_path):
    with processes.stopped_after() as started:
        address, env, base_url = soak_farm(tmp_path, started)

        # Every kind of request once, and back to quiet: what a farm holds at rest.
        args = prepare(base_url, env)
        run_traffic(base_url, args, 200, chunk=1)
        wait_drained(address, timeout=60, what="the warm-up to drain")
        time.sleep(SHORT + 2)
        before = memory(address)
        keys_before = {i.key.removeprefix(f"{NAMESPACE}:") for i in keyspace.items(address, f"{NAMESPACE}:")}

        statuses = run_traffic(base_url, args, TOTAL)
        peak = keyspace.stats(address)
        assert sum(statuses.values()) >= TOTAL, statuses
        assert not [code for code in statuses if code >= 500 and code != 503], statuses  # 503: limit refusals
        after = settle(address, before, keys_before, timeout=180)
        print(
            f"\nsoak: {sum(statuses.values())} requests {sorted(statuses.items())}; memcached items/bytes "
            f"before {before}, at the peak {(peak['curr_items'], peak['bytes'])}, after {after}"
        )
        _every_key_has_a_family_and_its_lifetime(address, env)


def _every_key_has_a_family_and_its_lifetime(address: str, env: dict) -> None:
    from django.test import override_settings

    from demofarm.keyspace import family_of, lifetime_bound

    overrides = {
        "SESSION_CACHE_TTL": SHORT,
        "PROGRESS": {"FINAL_TTL": SHORT},
        "POLLS": {"MARKER_TTL": SHORT, "ANONYMOUS_WINDOW": SHORT},
        "QUEUES": {"HOLE_TTL": SHORT, "FINISHED_TTL": 60},
    }
    with keyspace.raw_client(address) as raw, override_settings(**_merged(overrides)):
        for item in keyspace.items(address, f"{NAMESPACE}:"):
            key = item.key.removeprefix(f"{NAMESPACE}:")
            family = family_of(key)
            assert family is not None, f"a key of no known family: {key}"
            value = raw.get(item.key)
            if family.name == "queue entry":  # bounded by what it holds: value and expiry read at once
                value, now = keyspace.value_and_item(address, item.key)
                if now is None:
                    continue  # gone meanwhile (acknowledged and passed by the floor)
                item = now
            bound = lifetime_bound(family, key, value)
            if bound is None:
                continue
            assert item.expires > 0, f"{key} ({family.name}) never expires"
            assert item.ttl() <= bound + keyspace.CLOCK_SLACK, (key, family.name, item.ttl(), bound)


def _merged(overrides: dict) -> dict:
    from django.conf import settings

    return {
        name: {**getattr(settings, name), **value} if isinstance(value, dict) else value
        for name, value in overrides.items()
    }
