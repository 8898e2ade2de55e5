"""Django's Tasks API on three backends, same machine, same run, two
worker processes each: ours (webfarm.djangotasks over the memcached
broker, then over Redis as the broker), django-tasks-db (PostgreSQL and
its db_worker) and django-tasks-fennel (Celery on Redis, results in
Redis); and, as the floors ours stands on, a plain Celery task on the
memcached broker with its result in Redis, and the same task with a job row
written at enqueue, start and end (what keeps a task that memcached lost,
and what any node reads). For each: what an
enqueue() costs the caller, enqueue to start (p50, p99, one at a time),
and tasks/s for a burst, every result read back with get_result(). Then,
on ours, what progress costs a task: the same loop with each step reported
to the bar and saved as metadata, against none."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.harness import processes

NAMES = {
    "bare": "bare Celery (memc.)",
    "bare-job": "bare + our row",
    "bare-db": "bare + tasks-db row",
    "default": "ours (memcached)",
    "ours-redis": "ours (Redis broker)",
    "db": "django-tasks-db",
    "fennel": "fennel (Redis)",
}


def figures_of(env: dict, module: str, *args: str) -> tuple[dict, str]:
    """Run `python -m module args` in the site's environment: the JSON its
    last line prints, and what it wrote to stderr."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        cwd=processes.ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _client(env: dict, alias: str) -> dict[str, float]:
    return figures_of(env, "bench.tasks_client", alias)[0]


def run() -> dict[str, dict[str, float]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-tasks-"))
    with processes.stopped_after(workdir) as started, processes.postgres_database("benchtasks") as database:
        memcached, address = processes.memcached(workdir, memory_mb=256)
        started.append(memcached)
        redis, redis_url = processes.redis(workdir)
        started.append(redis)
        # with_secret_key: the workers' key, or their queue entries' MACs fail.
        base = processes.with_secret_key(
            {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "bench.tasks_settings",
                "DATABASE_URL": database,
                "MEMCACHED_SERVERS": address,
                "MEMCACHED_NAMESPACE": "benchtasks",
                "LOG_LEVEL": "WARNING",
            }
        )
        processes.manage(base, "migrate", "--no-input", "-v", "0")
        results = {}

        ours = {
            **base,
            "CELERY_BROKER_URL": f"memcached://{address}",
            "CELERY_TASK_DEFAULT_QUEUE": "benchtasks",
        }
        # The floor: a plain Celery task on the same broker, its result in Redis.
        bare = {**ours, "BENCH_RESULT_BACKEND": redis_url, "CELERY_TASK_DEFAULT_QUEUE": "benchbare"}
        worker = processes.celery_worker(bare, workdir, "worker-bare", include="bench.task_defs")
        started.append(worker)
        results["bare"] = _client(bare, "bare")
        # The floor of a durable task: the same, with a row's three writes (ours; django-tasks-db's).
        results["bare-job"] = _client(bare, "bare-job")
        results["bare-db"] = _client(bare, "bare-db")
        worker.stop()

        # Each worker is in `started` too: a client that fails stops nothing itself.
        worker = processes.celery_worker(ours, workdir, "worker-ours", include="bench.task_defs")
        started.append(worker)
        results["default"] = _client(ours, "default")
        worker.stop()

        # Ours again with Redis as the broker: what is the broker's, what the bookkeeping's.
        ours_redis = {**ours, "CELERY_BROKER_URL": redis_url, "BENCH_SKIP_LOOP": "1"}
        worker = processes.celery_worker(ours_redis, workdir, "worker-ours-redis", include="bench.task_defs")
        started.append(worker)
        results["ours-redis"] = _client(ours_redis, "default")
        worker.stop()

        fennel = {
            **base,
            "CELERY_BROKER_URL": redis_url,
            "BENCH_RESULT_BACKEND": redis_url,
            "CELERY_TASK_DEFAULT_QUEUE": "default",
        }
        worker = processes.celery_worker(fennel, workdir, "worker-fennel", include="bench.task_defs")
        started.append(worker)
        results["fennel"] = _client(fennel, "fennel")
        worker.stop()

        db = {**base, "CELERY_BROKER_URL": redis_url}
        workers = [
            processes.Process(
                f"db-worker-{n}",
                [
                    sys.executable,
                    "manage.py",
                    "db_worker",
                    "--backend",
                    "db",
                    "--interval",
                    "0.01",
                    "--no-startup-delay",
                ],
                log_dir=workdir,
                env=db,
            ).start()
            for n in range(2)
        ]
        started.extend(workers)
        results["db"] = _client(db, "db")
        return results


def report(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "django.tasks: a task that notes when it started, two worker processes per backend",
        f"{'backend':20} {'enqueue ms':>10} {'p50 ms':>8} {'p99 ms':>8} {'tasks/s':>8}"
        "   (enqueue() to start)",
    ]
    for alias, r in results.items():
        lines.append(
            f"{NAMES[alias]:20} {r['enqueue_ms']:10.2f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f}"
            f" {r['tasks_per_s']:8.0f}"
        )
    ours = results["default"]
    for alias in ("bare", "bare-job", "bare-db", "ours-redis", "db", "fennel"):
        lines.append(
            f"ours / {NAMES[alias]}: tasks/s {ours['tasks_per_s'] / results[alias]['tasks_per_s']:.2f}, "
            f"p50 {ours['p50_ms'] / results[alias]['p50_ms']:.2f}, "
            f"enqueue {ours['enqueue_ms'] / results[alias]['enqueue_ms']:.2f}"
        )
    floor, db, bare = results["bare-db"], results["db"], results["bare"]
    lines.append(
        "the floor (bare + tasks-db row) against the targets: "
        f"tasks/s {floor['tasks_per_s'] / db['tasks_per_s']:.2f}"
        f" of django-tasks-db's, enqueue {floor['enqueue_ms'] / db['enqueue_ms']:.2f} of its,"
        f" p50 {floor['p50_ms'] / bare['p50_ms']:.2f} of bare Celery's"
    )
    lines.append(
        f"progress, on ours: a loop of steps took {ours['plain_s']:.3f} s bare, "
        f"{ours['reported_s']:.3f} s with "
        f"every step reported and saved as metadata ({ours['reported_s'] / ours['plain_s']:.1f}x, "
        f"{ours['per_step_us']:.2f} µs a step)"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
