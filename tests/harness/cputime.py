"""Where a run's time goes, with the workers side by side: each test's
phases on its worker's clock, and every process's CPU, each process counted
to the pytest-xdist worker it descends from (farms, browsers and servers
included) and to its program.

    pytest -n 3 --dist loadgroup -p tests.harness.cputime   # writes var/test-times/
    python -m tests.harness.cputime var/test-times          # prints the tables

The controller reads /proc once a second. A process that a worker started
and that left its parent (a daemon) counts as "none"; what a process used
in its last second before it ended is not seen. CONTRIBUTING.md ("Where
the time goes") is written from it.
"""

import bisect
import os
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

REPORT = Path(os.environ.get("TEST_TIMES", "var/test-times"))
_TICK = os.sysconf("SC_CLK_TCK")
# Taken now: a test that puts a clock of its own in time.time (a frozen or
# moved one) would date the phases it runs in.
_clock = time.time
# A process's program, by the first of these in its command line.
PROGRAMS = ("celery", "gunicorn", "manage.py", "chrom", "postgres", "memcached", "nginx", "redis", "wrk")

_rows: list[str] = []


def _worker(config: pytest.Config) -> str:
    return getattr(config, "workerinput", {}).get("workerid", "controller")


def pytest_configure(config: pytest.Config) -> None:
    REPORT.mkdir(parents=True, exist_ok=True)
    worker = _worker(config)
    if worker == "controller":
        for old in REPORT.glob("*"):
            old.unlink()
    (REPORT / f"pid-{worker}").write_text(str(os.getpid()))
    if worker == "controller":
        threading.Thread(target=_sample, args=(REPORT / "cpu.tsv",), daemon=True).start()


def _program(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    found = next((name for name in PROGRAMS if name in command), None)
    return {"chrom": "chromium"}.get(found or "", found) or ("pytest" if "python" in command else "other")


def _processes() -> dict[int, tuple[int, float, str]]:
    """pid: (parent, CPU seconds so far, start time) of every process."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        found[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, fields[19])
    return found


def _sample(path: Path) -> None:
    seen: dict[tuple[int, str], float] = {}
    programs: dict[tuple[int, str], str] = {}
    first = True
    with path.open("w") as out:
        while True:
            workers = {}
            for pid_file in REPORT.glob("pid-*"):
                try:
                    workers[int(pid_file.read_text())] = pid_file.name[4:]
                except ValueError:
                    continue
            now, procs, used = _clock(), _processes(), Counter[tuple[str, str]]()
            for pid, (_, cpu, started) in procs.items():
                key = (pid, started)
                # The first sample only sets where each process stands.
                spent = cpu - seen.get(key, 0.0 if not first else cpu)
                seen[key] = cpu
                if key not in programs:
                    programs[key] = _program(pid)
                if spent <= 0:
                    continue
                owner, ancestor = "none", pid
                for _ in range(64):
                    if ancestor in workers:
                        owner = workers[ancestor]
                        break
                    if ancestor <= 1 or ancestor not in procs:
                        break
                    ancestor = procs[ancestor][0]
                used[(owner, programs[key])] += spent
            out.writelines(f"{now:.2f}\t{w}\t{p}\t{s:.2f}\n" for (w, p), s in used.items())
            out.flush()
            first = False
            time.sleep(1.0)


def _timed(item: pytest.Item, phase: str) -> Iterator[None]:
    began = _clock()
    yield
    _rows.append(f"{item.nodeid}\t{phase}\t{began:.2f}\t{_clock():.2f}\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _timed(item, "teardown")


def pytest_sessionfinish(session: pytest.Session) -> None:
    (REPORT / f"timeline-{_worker(session.config)}.tsv").write_text("".join(_rows))


def group(nodeid: str) -> str:
    """A test's group as xdist ran it (after its id's "@"), or its module."""
    if "@" in nodeid:
        return nodeid.rsplit("@", 1)[1]
    module = nodeid.split("::")[0]
    return "unit tests" if module.startswith("tests/unit/") else module


def summary(directory: Path) -> str:
    """Wall and CPU seconds per group, its programs' shares, and each
    worker's span."""
    timelines: dict[str, list[tuple[float, float, str]]] = {}
    for path in directory.glob("timeline-*.tsv"):
        rows = [line.split("\t") for line in path.read_text().splitlines()]
        worker = path.stem.removeprefix("timeline-")
        timelines[worker] = sorted((float(a), float(b), n) for n, _, a, b in rows)
    wall: Counter[str] = Counter()
    for rows in timelines.values():
        for began, ended, nodeid in rows:
            wall[group(nodeid)] += ended - began
    cpu: dict[str, Counter[str]] = defaultdict(Counter)
    starts = {worker: [row[0] for row in rows] for worker, rows in timelines.items()}
    for line in (directory / "cpu.tsv").read_text().splitlines():
        at, worker, program, spent = line.split("\t")
        rows = timelines.get(worker)
        name = f"outside the workers ({worker})"
        if rows:
            # The second the sample covers, counted to the test running in its middle.
            i = bisect.bisect_right(starts[worker], float(at) - 0.5) - 1
            name = group(rows[i][2]) if i >= 0 and rows[i][1] >= float(at) - 1.5 else "between tests"
        cpu[name][program] += float(spent)
    total = sum(sum(c.values()) for c in cpu.values())
    lines = [
        "| group | wall s | CPU s | CPU by program |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, used in sorted(cpu.items(), key=lambda kv: -sum(kv[1].values())):
        top = ", ".join(f"{p} {s:.0f}" for p, s in used.most_common(3))
        lines.append(f"| {name} | {wall.get(name, 0):.0f} | {sum(used.values()):.0f} | {top} |")
    began = min(rows[0][0] for rows in timelines.values() if rows)
    spans = ", ".join(
        f"{worker} {rows[-1][1] - began:.0f} s" for worker, rows in sorted(timelines.items()) if rows
    )
    lines.append(f"\nCPU in all: {total:.0f} s. Each worker's last test ended at: {spans}.")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1] if len(sys.argv) > 1 else REPORT)))
