"""A short chaos run on hosts (bench/chaos --hosts): each process of the
farm on a test host of its own (tests/harness/hosts.py), and among the
faults a seed picks, hosts unplugged and paths to memcached cut, and the
memcached pool grown by a second server and shrunk back with the operators'
command (`--pool-change`); every invariant of bench/chaos/checker.py
checked afterwards. The loopback run is
tests/farm/test_chaos.py; the long runs are in CONTRIBUTING.md."""

import os

import pytest

from bench.chaos.nemesis import NETWORK_FAULTS, POOL_CHANGE, schedule
from bench.chaos.run import KEPT, report, run
from tests.harness import hosts

pytestmark = pytest.mark.farm

SEED = 982  # every network fault in 75 s, and the pool change
MINUTES = 75 / 60


# The checker's own deadlines say what was late (bench/chaos/checker.py: jobs
# settle within 240 s, each worker takes a task within 60 s); on a loaded
# machine they sum past the suite's 300 s, which would say nothing.
@pytest.mark.timeout(600)
def test_a_short_chaos_run_on_hosts_keeps_every_invariant():
    faults = schedule(SEED, MINUTES * 60, network=True, pool_change=True)
    assert {*NETWORK_FAULTS, POOL_CHANGE} <= {f.kind for f in faults}
    outcome = run(SEED, MINUTES, keep=KEPT, network=True, pool_change=True)
    print(report(SEED, outcome))
    assert not outcome.violations, report(SEED, outcome)
    assert outcome.figures["results compared with a quiet farm's"] > 0
    assert outcome.figures["job states"].get("succeeded", 0) > 5
    assert outcome.figures["imports (files), succeeded"][1] > 0
    # Every namespace the run made is gone with it.
    assert not [name for name in hosts.namespaces() if name.startswith(f"wf{os.getpid()}-")]
