"""Where a run's time goes: each test's phases in wall time and in the
machine's CPU time (every process's, the farms' included), written as TSV.

    pytest -p tests.harness.cputime   # then: python -m tests.harness.cputime var/test-times.tsv

Run the suite on one worker for figures that are each test's own: the CPU
is read from /proc/stat, the whole machine's, so tests running side by side
would share it. docs/testing.md ("Where the time goes") is written from it.
"""

import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

REPORT = Path(os.environ.get("TEST_TIMES", "var/test-times.tsv"))
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds() -> float:
    """The machine's busy CPU time so far (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / _TICK


_rows: list[tuple[str, str, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "teardown")


def _timed(item: pytest.Item, phase: str) -> Iterator[None]:
    wall, cpu = time.monotonic(), _cpu_seconds()
    yield
    _rows.append((item.nodeid, phase, time.monotonic() - wall, _cpu_seconds() - cpu))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _rows or hasattr(session.config, "workerinput"):
        return
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    with REPORT.open("w") as out:
        out.write("test\tphase\twall_s\tcpu_s\n")
        out.writelines(f"{test}\t{phase}\t{wall:.2f}\t{cpu:.2f}\n" for test, phase, wall, cpu in _rows)


def summary(path: Path, top: int = 40) -> str:
    """The slowest tests and files, wall against CPU, set-up against call."""
    tests: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for line in path.read_text().splitlines()[1:]:
        test, phase, wall, cpu = line.split("\t")
        tests[test][phase][0] += float(wall)
        tests[test][phase][1] += float(cpu)
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    lines = ["| test | wall s | CPU s | set-up s | call s |", "| --- | ---: | ---: | ---: | ---: |"]
    totals = []
    for test, phases in tests.items():
        wall = sum(p[0] for p in phases.values())
        cpu = sum(p[1] for p in phases.values())
        totals.append((wall, cpu, phases["setup"][0], phases["call"][0], test))
        entry = files[test.split("::")[0]]
        entry[0] += wall
        entry[1] += cpu
        entry[2] += 1
    for wall, cpu, setup, call, test in sorted(totals, reverse=True)[:top]:
        lines.append(f"| `{test}` | {wall:.0f} | {cpu:.0f} | {setup:.0f} | {call:.0f} |")
    lines += ["", "| file | tests | wall s | CPU s |", "| --- | ---: | ---: | ---: |"]
    for name, (wall, cpu, count) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"| `{name}` | {count} | {wall:.0f} | {cpu:.0f} |")
    wall = sum(t[0] for t in totals)
    cpu = sum(t[1] for t in totals)
    lines += ["", f"{len(totals)} tests: {wall / 60:.1f} min of wall time, {cpu / 60:.1f} min of CPU."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1] if len(sys.argv) > 1 else REPORT)))
