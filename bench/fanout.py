"""One job on many workers (docs/jobs.md), each figure against a baseline from
the same run:

- the sales report split in parts, on one worker process and on two (this
  machine has two cores): the wall time of the same job, and the ratio;
- a job of 16 parts that wait (sleep 1 s each: I/O, not CPU) on 1, 2 and 4
  worker processes: close to 1x, 2x and 4x shows that the farm's size, not
  the code, bounds it;
- what the combined bar costs in memcached: round trips per part write and
  per poll (tests/unit/test_budgets.py measures them on the wire).

The farm: PostgreSQL, one memcached (store and broker), one Celery worker
whose process count changes. A job's time is its row's, from created to
finished: what its user waits."""

import json
import tempfile
from pathlib import Path

from bench import roundtrips
from tests.harness import processes

RUNS = 3  # of each, the best kept
SLEEPING_PARTS = 16


def _job_seconds(env: dict, start: str) -> dict:
    """Start a job (python code setting `job`) in a shell, wait for its end;
    its state, parts and seconds from created to finished."""
    code = (
        "import time, json\n"
        "from django.contrib.auth import get_user_model\n"
        "from webfarm.progress.models import Job\n"
        "user = get_user_model().objects.get(username='alice')\n"
        f"{start}\n"
        "deadline = time.monotonic() + 600\n"
        "while time.monotonic() < deadline:\n"
        "    job.refresh_from_db()\n"
        "    if job.finished_at: break\n"
        "    time.sleep(0.05)\n"
        "parts = [(p.finished_at - p.started_at).total_seconds() for p in job.parts.all()]\n"
        "print(json.dumps({'state': job.state, 'parts': job.part_count,"
        " 'seconds': (job.finished_at - job.created_at).total_seconds(),"
        " 'part_seconds': sum(parts) / len(parts) if parts else None}))\n"
    )
    result = json.loads(processes.manage(env, "shell", "-c", code).strip().splitlines()[-1])
    if result["state"] != "succeeded":
        raise SystemExit(f"bench job ended {result['state']}: {start}")
    return result


SALES = (
    "from demofarm.reports.registry import get_report\n"
    "job = get_report('sales-by-region').start(user=user,"
    " params={'date_from': '2024-01-01', 'date_to': '2025-12-31', 'regions': []})"
)
SLEEPS = (
    "import tests.harness.split_jobs as s\n"
    f"job = s.split_sleep.start(user=user, params={{'parts': {SLEEPING_PARTS}, 'seconds': 1.0}})"
)


def _on_processes(env: dict, workdir: Path, count: int, start: str, runs: int = RUNS) -> dict:
    """The best of `runs` jobs on a worker of `count` processes."""
    worker = processes.celery_worker(
        env, workdir, f"fanout-c{count}", concurrency=count, include="tests.harness.split_jobs"
    )
    try:
        return min((_job_seconds(env, start) for _ in range(runs)), key=lambda run: run["seconds"])
    finally:
        worker.stop()


def run() -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    with processes.postgres_database("benchfanout") as database, processes.stopped_after(workdir) as started:
        mc, address = processes.memcached(workdir, memory_mb=256)
        started.append(mc)
        env = processes.one_memcached_env(
            workdir,
            address,
            "benchfanout",
            DATABASE_URL=database,
            DEMO_ORDERS=200_000,
            REPORTS_PART_ROWS=50_000,
            LOG_LEVEL="WARNING",
        )
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        processes.manage(env, "seed_demo", "-v", "0")
        # Settled tables, as in a database up for a while: no autovacuum
        # running through the first runs, every page's hint bits set.
        processes.manage(
            env,
            "shell",
            "-c",
            "from django.db import connection; connection.cursor().execute('VACUUM ANALYZE')",
        )
        # The three ways of running the report take turns, so that what the
        # machine does meanwhile falls on each alike; the best run of each.
        ways = {"whole": ({**env, "REPORTS_PART_ROWS": "0"}, 1), 1: (env, 1), 2: (env, 2)}
        runs: dict = {name: [] for name in ways}
        for _ in range(RUNS):
            for name, (way_env, count) in ways.items():
                runs[name].append(_on_processes(way_env, workdir, count, SALES, runs=1))
        best = {name: min(found, key=lambda run: run["seconds"]) for name, found in runs.items()}
        sleeps = {count: _on_processes(env, workdir, count, SLEEPS) for count in (1, 2, 4)}
    costs = [row for row in roundtrips.run() if "part" in row[0]]
    return {"whole": best.pop("whole"), "sales": best, "sleeps": sleeps, "costs": costs}


def report(results: dict) -> str:
    whole, sales, sleeps = results["whole"], results["sales"], results["sleeps"]
    lines = [f"One job on many workers: the sales report in {sales[1]['parts']} parts (best of {RUNS})"]
    lines.append(f"{'':28} {'seconds':>8} {'speed-up':>9} {'a part':>8}")
    lines.append(f"{'whole, 1 process':28} {whole['seconds']:8.2f} {1:8.2f}x")
    for count, run in sales.items():
        lines.append(
            f"{f'in parts, {count} processes':28} {run['seconds']:8.2f}"
            f" {whole['seconds'] / run['seconds']:8.2f}x {run['part_seconds']:8.2f}"
        )
    lines.append(f"2 processes against 1, both in parts: {sales[1]['seconds'] / sales[2]['seconds']:.2f}x")
    lines.append(f"A job of {SLEEPING_PARTS} parts that each wait 1 s")
    lines.append(f"{'worker processes':18} {'seconds':>8} {'speed-up':>9}")
    for count, run in sleeps.items():
        lines.append(f"{count:18d} {run['seconds']:8.2f} {sleeps[1]['seconds'] / run['seconds']:8.2f}x")
    lines.append("The combined bar in memcached (tests/unit/test_budgets.py):")
    for name, trips, _commands, queries, sequence in results["costs"]:
        lines.append(f"  {name:44} {trips} round trips, {queries} queries: {sequence}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
