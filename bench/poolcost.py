"""What a change of the memcached pool costs a request, phase by phase of
growing from two servers to three: round trips of polls and starts (counts,
asserted by tests/unit/test_pool_cost.py), and polls and starts per second in one thread
of Django's test client against three real memcached servers, as a ratio to
the same phase's polls in a run just before it where the pool does not
change (times vary between machines; a ratio measured side by side does
not). ROUNDS pairs of runs; the median ratio.

    python -m bench.poolcost
"""

import os
import statistics
import subprocess
import sys

from tests.harness.processes import ROOT

ROUNDS = 3
PHASES = ("before", "follow", "lead", "walked", "new")


def _fields(line: str) -> tuple[str, dict[str, float]]:
    _, phase, *pairs = line.split("|")
    return phase, {name: float(value) for name, value in (pair.split("=") for pair in pairs)}


def _run(control: bool) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    env = {**os.environ, "POOL_COST_TIMED": "1", "POOL_COST_CONTROL": "1" if control else ""}
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/unit/test_pool_cost.py",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
    ]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    if out.returncode != 0:
        said = [line for line in out.stdout.splitlines() if line.startswith(("E ", "FAILED", "ERROR"))]
        raise SystemExit("the pool cost test failed:\n" + "\n".join(said[-40:] or [out.stdout[-4000:]]))
    trips, rates = {}, {}
    for line in out.stdout.splitlines():
        if line.startswith("poolcost|"):
            phase, values = _fields(line)
            trips[phase] = values
        elif line.startswith("pooltime|"):
            phase, values = _fields(line)
            rates[phase] = values
    return trips, rates


def run() -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Mean round trips per phase and operation (the last round's: counts do
    not vary), and the median ratio of each phase's polls per second to the
    same phase's in a run where the pool does not change (a process slows
    as its phases add users and jobs: the baseline slows with it)."""
    ratios: dict[str, dict[str, list[float]]] = {}
    trips: dict[str, dict[str, float]] = {}
    for _ in range(ROUNDS):
        _, baseline = _run(control=True)
        trips, rates = _run(control=False)
        for phase, values in rates.items():
            for op, rate in values.items():
                ratios.setdefault(phase, {}).setdefault(op, []).append(rate / baseline[phase][op])
    medians = {phase: {op: statistics.median(v) for op, v in ops.items()} for phase, ops in ratios.items()}
    return trips, medians


def report(result: tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]) -> str:
    trips, ratios = result
    ops = list(trips["before"])
    lines = [
        "Changing the memcached pool, two servers to three (tests/unit/test_pool_cost.py): "
        "mean round trips per request, and polls per second against the same phase's "
        "in a run without the change "
        f"(median of {ROUNDS} runs)",
        f"{'phase':8} "
        + " ".join(f"{op:>17}" for op in ops)
        + "   token polls/s   session polls/s   starts/s",
    ]
    for phase in PHASES:
        rates = ratios.get(phase, {})
        lines.append(
            f"{phase:8} "
            + " ".join(f"{trips[phase][op]:17.2f}" for op in ops)
            + f"   {rates.get('token poll', 0):13.2f}x   {rates.get('session poll', 0):15.2f}x"
            + f"   {rates.get('start', 0):7.2f}x"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
