"""What each hot operation costs in memcached and the database: round trips,
commands and queries, measured on the wire (tests/harness/roundtrips.py) by the
budget test itself (tests/unit/test_budgets.py), which fails when one is over its
budget. Counts, not times: they are the same on every machine, and on a farm
whose memcached is across the network each round trip is what users wait for."""

import subprocess
import sys

from tests.harness.processes import ROOT


def run() -> list[tuple[str, int, int, int, str]]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/unit/test_budgets.py",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
    ]
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    rows = []
    for line in out.stdout.splitlines():
        if line.startswith("budget|"):
            _, name, trips, commands, queries, sequence = line.split("|", 5)
            rows.append((name, int(trips), int(commands), int(queries), sequence))
    if out.returncode != 0 or not rows:
        raise SystemExit(f"the budget test failed:\n{out.stdout[-4000:]}")
    return rows


def report(rows: list[tuple[str, int, int, int, str]]) -> str:
    lines = [
        "Round trips (tests/unit/test_budgets.py, one memcached server, Django's test client, "
        "warm connections)",
        f"{'':38} {'trips':>5} {'cmds':>5} {'queries':>7}  what each round trip carries "
        "(a noreply command rides with the next)",
    ]
    for name, trips, commands, queries, sequence in rows:
        lines.append(f"{name:38} {trips:5d} {commands:5d} {queries:7d}  {sequence}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
