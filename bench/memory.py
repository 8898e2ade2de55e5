"""What a request leaves in memcached: the soak's mix of traffic (poll pages
and results, 404s, votes of new voters, logins, report starts, progress
polls) through a web node, a worker and beat, on a -M memcached.

memcached's bytes are read before the traffic, at its end, once the drainers
have caught up, and once the lifetimes have passed. The farm runs with
lifetimes of a few seconds (tests/farm/test_soak.py), so the last figure comes
within the run; the one before it is what a request holds until its
lifetimes (defaults in docs/memcached.md) pass. The baseline is the peak:
what the same traffic holds at its end."""

import shutil
import tempfile
import time
from pathlib import Path

from tests.harness import keyspace, processes
from tests.harness.soak import SHORT, memory, prepare, run_traffic, soak_farm, wait_drained

REQUESTS = 20_000


def run() -> dict:
    if not shutil.which("wrk"):
        raise SystemExit("wrk is missing: `make bench` installs it")
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    with processes.stopped_after(workdir) as started:
        address, env, base_url = soak_farm(workdir, started)
        args = prepare(base_url, env)
        run_traffic(base_url, args, 200, chunk=1)  # every kind once: counters and registries exist
        wait_drained(address, timeout=60, what="the warm-up to drain")
        time.sleep(SHORT + 2)
        before = memory(address)
        started_at = time.monotonic()
        statuses = run_traffic(base_url, args, REQUESTS)
        seconds = time.monotonic() - started_at
        stats = keyspace.stats(address)
        peak = (stats["curr_items"], stats["bytes"])
        wait_drained(address, timeout=120, what="the drainers")
        drained_at = memory(address)
        time.sleep(SHORT + 2)
        settled = memory(address)
        return {
            "requests": sum(statuses.values()),
            "seconds": seconds,
            "statuses": statuses,
            "before": before,
            "peak": peak,
            "drained": drained_at,
            "settled": settled,
        }


def report(r: dict) -> str:
    n = r["requests"]
    base_items, base_bytes = r["before"]
    peak_bytes = r["peak"][1] - base_bytes
    lines = [
        f"Memory: {n} requests of mixed kinds in {r['seconds']:.0f} s ({n / r['seconds']:.0f}/s; "
        f"statuses {dict(sorted(r['statuses'].items()))}), -M memcached, lifetimes of {SHORT} s",
        f"{'':38} {'items':>7} {'bytes':>10} {'bytes/request':>14} {'vs peak':>8}",
    ]
    for name, (items, size) in (
        ("before the traffic", r["before"]),
        ("at its end (the peak)", r["peak"]),
        ("drainers caught up", r["drained"]),
        ("lifetimes passed", r["settled"]),
    ):
        extra = size - base_bytes
        ratio = f"{extra / peak_bytes:8.3f}" if peak_bytes else f"{'-':>8}"
        lines.append(f"{name:38} {items - base_items:+7d} {extra:+10d} {extra / n:14.2f} {ratio}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
