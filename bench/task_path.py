"""One django.tasks task's path, caller and worker, taken apart: every
database query, every memcached round trip (the broker's included) and the
CPU each side spends, averaged over many tasks of bench.task_defs.ours_stamp.

    python -m bench.task_path
    BENCH_PATH_PROFILE=run BENCH_PATH_SORT=tottime python -m bench.task_path

The second also prints cProfile's table of one side (`enqueue` or `run`).
The worker's side is run_job, the body of the Celery task a worker runs
(webfarm.progress.tasks), called in this process on the message's job:
Celery's own receiving and acknowledging are not in it (bench.tasks
measures the whole, against bare Celery)."""

import collections
import cProfile
import json
import os
import pstats
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.tasks import figures_of
from tests.harness import processes

TASKS = int(os.environ.get("BENCH_PATH_TASKS", "300"))
OURS = ("webfarm/", "demofarm/", "django_tasks", "celery/", "kombu/")


class Tally:
    """What one side did: queries and round trips by where they came from."""

    def __init__(self) -> None:
        self.queries: collections.Counter[str] = collections.Counter()
        self.trips: collections.Counter[str] = collections.Counter()

    def query(self, execute: Callable, sql: str, params: object, many: bool, context: dict) -> object:
        self.queries[_statement(sql)] += 1
        return execute(sql, params, many, context)


def _statement(sql: str) -> str:
    words = sql.split()
    after = words[words.index("FROM") + 1 :] if words[0] == "SELECT" and "FROM" in words else words[1:]
    after = after[1:] if after[:1] == ["INTO"] else after
    table = next((w.strip('"').split('"')[0] for w in after if w.strip('"')), "")
    return f"{words[0]} {table}"


def _caller() -> str:
    """The innermost frame of the product (not pymemcache's, kombu's or this file's)."""
    frame, fallback = sys._getframe(2), "elsewhere"
    while frame is not None:
        path = frame.f_code.co_filename
        if "/webfarm/" in path and not any(f"/webfarm/core/{m}" in path for m in ("client/", "health.py")):
            return f"{path.split('/webfarm/', 1)[1]}:{frame.f_code.co_name}"
        if fallback == "elsewhere" and ("kombu/" in path or "celery/" in path):
            fallback = f"celery/kombu:{frame.f_code.co_name}"
        frame = frame.f_back
    return fallback


@contextmanager
def tallied(tally: Tally) -> Iterator[None]:
    from django.db import connection

    sendall = socket.socket.sendall

    def counted(sock: socket.socket, data: bytes, *args: object) -> None:
        # Every memcached command batch is one sendall and one answer: a round trip.
        tally.trips[_caller()] += 1
        return sendall(sock, data, *args)

    socket.socket.sendall = counted  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(tally.query):
            yield
    finally:
        socket.socket.sendall = sendall  # type: ignore[method-assign]


def inside() -> dict:
    """In a process of its own, set up as the site: enqueue, then run each
    job; once counting what each does, once timing it (counting costs CPU)."""
    import django

    django.setup()
    from bench import task_defs
    from webfarm.progress.launching import running

    def enqueue() -> str:
        return task_defs.ours_stamp.enqueue().id

    def run_job(job_id: str) -> None:
        running.run_job(job_id=job_id, worker="profile#1")

    for _ in range(20):  # warm: connections, imports, caches
        run_job(enqueue())
    tallies = {"enqueue": Tally(), "run": Tally()}
    with tallied(tallies["enqueue"]):
        ids = [enqueue() for _ in range(TASKS)]
    with tallied(tallies["run"]):
        for job_id in ids:
            run_job(job_id)
    profiled = os.environ.get("BENCH_PATH_PROFILE", "")
    profile = cProfile.Profile()
    cpu, wall = {}, {}
    c, w = time.process_time(), time.perf_counter()
    ids = [profile.runcall(enqueue) if profiled == "enqueue" else enqueue() for _ in range(TASKS)]
    cpu["enqueue"], wall["enqueue"] = time.process_time() - c, time.perf_counter() - w
    c, w = time.process_time(), time.perf_counter()
    for job_id in ids:
        profile.runcall(run_job, job_id) if profiled == "run" else run_job(job_id)
    cpu["run"], wall["run"] = time.process_time() - c, time.perf_counter() - w
    if profiled:
        pstats.Stats(profile, stream=sys.stderr).sort_stats(
            os.environ.get("BENCH_PATH_SORT", "cumulative")
        ).print_stats(50)
    return {
        side: {
            "cpu_us": cpu[side] / TASKS * 1e6,
            "wall_us": wall[side] / TASKS * 1e6,
            "queries": {k: v / TASKS for k, v in tally.queries.most_common()},
            "trips": {k: v / TASKS for k, v in tally.trips.most_common()},
        }
        for side, tally in tallies.items()
    }


def run() -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-task-path-"))
    with processes.stopped_after(workdir) as started, processes.postgres_database("benchpath") as database:
        memcached, address = processes.memcached(workdir, memory_mb=256)
        started.append(memcached)
        env = processes.with_secret_key(
            {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "bench.tasks_settings",
                "DATABASE_URL": database,
                "MEMCACHED_SERVERS": address,
                "MEMCACHED_NAMESPACE": "benchpath",
                "CELERY_BROKER_URL": f"memcached://{address}",
                "CELERY_TASK_DEFAULT_QUEUE": "benchpath",
                "LOG_LEVEL": "WARNING",
            }
        )
        processes.manage(env, "migrate", "--no-input", "-v", "0")
        figures, stderr = figures_of(env, "bench.task_path", "--inside")
        if os.environ.get("BENCH_PATH_PROFILE"):
            print(stderr)
        return figures


def report(figures: dict) -> str:
    lines = [f"one task's path, averaged over {TASKS} tasks (bench.task_defs.ours_stamp)"]
    for side, f in figures.items():
        queries, trips = sum(f["queries"].values()), sum(f["trips"].values())
        lines.append(
            f"{side}: {f['cpu_us']:.0f} µs CPU, {f['wall_us']:.0f} µs wall, "
            f"{queries:.1f} queries, {trips:.1f} memcached round trips"
        )
        lines += [f"  query  {n:4.1f}  {what}" for what, n in f["queries"].items()]
        lines += [f"  trip   {n:4.1f}  {where}" for where, n in f["trips"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:] == ["--inside"]:
        print(json.dumps(inside()))
    else:
        print(report(run()))
