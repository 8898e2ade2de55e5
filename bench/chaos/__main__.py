"""python -m bench.chaos --seed N --minutes M [--hosts]: one chaos run;
exits 1 when the checker finds a violation (bench/chaos/__init__.py says
what runs)."""

import argparse
import signal
import sys
import time

from bench.chaos.run import KEPT, report, run


def main() -> None:
    # A run stopped with SIGTERM (timeout, CI) still stops every process it
    # started: SystemExit runs the run's finally blocks, a bare SIGTERM does not.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument(
        "--hosts", action="store_true", help="each process on a test host of its own, and network faults"
    )
    parser.add_argument(
        "--pool-change",
        action="store_true",
        help="with --hosts: memcached's pool grown by a server and shrunk back (memcached_pool)",
    )
    args = parser.parse_args()
    outcome = run(args.seed, args.minutes, keep=KEPT, network=args.hosts, pool_change=args.pool_change)
    print(report(args.seed, outcome), flush=True)
    sys.exit(1 if outcome.violations else 0)


if __name__ == "__main__":
    main()
