"""What each hot operation costs in memcached and the database: round trips,
commands and queries, measured on the wire (tests/harness/roundtrips.py) by the
budget tests themselves (tests/unit/test_budgets.py, the library's;
tests/demo/test_vote_budget.py, the demo's vote), which fail when one is over its
budget. Counts, not times: they are the same on every machine, and on a farm
whose memcached is across the network each round trip is what users wait for."""

import subprocess
import sys

from tests.harness.processes import ROOT

# One pytest session per suite: each runs on its own project (tests/harness/suites.py).
BUDGET_TESTS = ("tests/unit/test_budgets.py", "tests/demo/test_vote_budget.py")


def run() -> list[tuple[str, int, int, int, str]]:
    rows = []
    for tests in BUDGET_TESTS:
        argv = [sys.executable, "-m", "pytest", tests, "-q", "-s", "-p", "no:cacheprovider"]
        out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
        found = []
        for line in out.stdout.splitlines():
            if line.startswith("budget|"):
                _, name, trips, commands, queries, sequence = line.split("|", 5)
                found.append((name, int(trips), int(commands), int(queries), sequence))
        if out.returncode != 0 or not found:
            raise SystemExit(f"the budget test {tests} failed:\n{out.stdout[-4000:]}")
        rows += found
    return rows


def report(rows: list[tuple[str, int, int, int, str]]) -> str:
    lines = [
        "Round trips (the budget tests, one memcached server, Django's test client, warm connections)",
        f"{'':38} {'trips':>5} {'cmds':>5} {'queries':>7}  what each round trip carries "
        "(a noreply command rides with the next)",
    ]
    for name, trips, commands, queries, sequence in rows:
        lines.append(f"{name:38} {trips:5d} {commands:5d} {queries:7d}  {sequence}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
