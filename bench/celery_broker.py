"""Celery on the memcached broker beside Celery on Redis: tasks/s and the time
from delay() to the task starting (p50, p99). Same machine, same run, one
worker with two processes for each."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.harness import processes


def _measure(broker: str, workdir: Path, memcached: str) -> dict[str, float]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "demofarm.settings",
        "MEMCACHED_SERVERS": memcached,
        "CELERY_BROKER_URL": broker,
        "CELERY_TASK_DEFAULT_QUEUE": "bench",
        "MEMCACHED_NAMESPACE": "benchcelery",
        "LOG_LEVEL": "WARNING",
    }
    worker = processes.celery_worker(
        env, workdir, f"worker-{broker.split(':')[0]}", include="bench.celery_tasks"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-m", "bench.celery_sender"],
            env=env,
            cwd=processes.ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    finally:
        worker.stop()


def run() -> dict[str, dict[str, float]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-celery-"))
    with processes.stopped_after(workdir) as started:
        mc, address = processes.memcached(workdir, memory_mb=256, extra=["-M"])
        started.append(mc)
        redis, redis_url = processes.redis(workdir)
        started.append(redis)
        return {
            "memcached": _measure(f"memcached://{address}", workdir, address),
            "redis": _measure(redis_url, workdir, address),
        }


def report(results: dict[str, dict[str, float]]) -> str:
    lines = [
        "Celery: one worker (-c 2), a task that notes when it started",
        f"{'broker':10} {'tasks/s':>9} {'p50 ms':>8} {'p99 ms':>8}   (delay() to task start)",
    ]
    for broker, r in results.items():
        lines.append(f"{broker:10} {r['tasks_per_s']:9.0f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f}")
    ratio = results["memcached"]["tasks_per_s"] / results["redis"]["tasks_per_s"]
    lines.append(f"memcached / redis tasks/s: {ratio:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
