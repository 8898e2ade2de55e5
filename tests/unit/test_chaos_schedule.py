"""The chaos run's fault schedule (bench/chaos/nemesis.py): pure logic, from
the seed alone, so a failing run is replayed with its seed."""

from itertools import pairwise

import pytest

from bench.chaos.farm import NODES, WORKERS
from bench.chaos.nemesis import FAULTS, MEMCACHED_EVERY, NETWORK_FAULTS, schedule


def test_a_seed_gives_the_same_schedule_and_another_seed_another():
    assert schedule(7, 300) == schedule(7, 300)
    assert schedule(7, 300) != schedule(8, 300)


@pytest.mark.parametrize("network", [False, True])
def test_every_fault_is_healed_before_the_end_and_one_target_has_one_fault_at_once(network):
    for seed in range(40):
        faults = schedule(seed, 240, network=network)
        assert faults and all(f.at + f.lasts <= 240 - 5 for f in faults)
        assert {f.kind for f in faults} <= set(FAULTS | NETWORK_FAULTS if network else FAULTS)
        ends: dict[str, float] = {}
        restarts = []
        for fault in faults:
            assert fault.target in (*WORKERS, *NODES, "memcached")
            assert ends.get(fault.target, 0.0) <= fault.at, (seed, fault)
            ends[fault.target] = fault.at + fault.lasts
            if fault.kind == "restart-memcached":
                restarts.append(fault.at)
        assert all(b - a >= MEMCACHED_EVERY for a, b in pairwise(restarts))


def test_long_runs_use_every_kind_of_fault():
    kinds = {fault.kind for seed in range(5) for fault in schedule(seed, 600)}
    assert kinds == set(FAULTS)
    on_hosts = {fault.kind for seed in range(5) for fault in schedule(seed, 600, network=True)}
    assert on_hosts == set(FAULTS | NETWORK_FAULTS)


def test_network_faults_target_a_host_of_the_farm():
    for seed in range(20):
        for fault in schedule(seed, 300, network=True):
            if fault.kind in NETWORK_FAULTS:
                role = fault.kind.split("-")[1]
                allowed = {"worker": WORKERS, "web": NODES, "memcached": ("memcached",)}[role]
                assert fault.target in allowed, fault
