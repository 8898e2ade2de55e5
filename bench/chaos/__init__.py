"""A chaos run: a farm under a workload of users, a
nemesis that injects faults at moments a seed picks, and a checker that
reads the whole history afterwards, as Jepsen does.

    python -m bench.chaos --seed 7 --minutes 5 [--hosts]

- farm: PostgreSQL, one memcached run with -M (store and broker), two
  web nodes, three workers of one process each, beat and a worker for its
  tasks (`farm.py`); on the
  loopback, or with --hosts each on a test host of its own
  (tests/harness/hosts.py), the run's own threads on a client host;
- workload: users starting split and whole reports and customer imports
  through alternating nodes, polling them to the end, cancelling some, an
  anonymous crowd voting (`workload.py`);
- nemesis: SIGKILL of a worker or a web node (started again), SIGSTOP and
  SIGCONT stalls, memcached restarted on its port, memcached filled until
  it refuses every size (tests/harness/full.py) and emptied, each healed
  after a few seconds; with --hosts also a worker, web or memcached host
  unplugged, and a worker or web host's way to memcached cut; the
  schedule comes from the seed alone and is printed, so a failing run is
  replayed with the same seed (`nemesis.py`);
- checker: the invariants (checker.py) on the history and the farm's state
  once every fault is healed (`checker.py`).

Every process, namespace and the scratch directory go when the run ends.
"""
