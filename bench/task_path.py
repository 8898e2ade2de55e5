"""One django.tasks task's path and one report job's, caller and worker,
taken apart: every database query, every memcached round trip (the
broker's included) and the CPU each side spends, averaged over many of
bench.task_defs.ours_stamp and bench.task_defs.bench_report (a report with
nothing to read: its start, its stages and its end).

    python -m bench.task_path
    BENCH_PATH_PROFILE=run BENCH_PATH_SORT=tottime python -m bench.task_path

The second also prints cProfile's table of one side (`enqueue`, `run`,
`report start` or `report run`).
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


class Side:
    """One side of a path (a start, or a run): its tally and its clocks."""

    def __init__(self) -> None:
        self.tally, self.cpu, self.wall = Tally(), 0.0, 0.0

    def timed(self, call: Callable[..., object], *args: object) -> object:
        c, w = time.process_time(), time.perf_counter()
        out = call(*args)
        self.cpu += time.process_time() - c
        self.wall += time.perf_counter() - w
        return out

    def figures(self) -> dict:
        return {
            "cpu_us": self.cpu / TASKS * 1e6,
            "wall_us": self.wall / TASKS * 1e6,
            "queries": {k: v / TASKS for k, v in self.tally.queries.most_common()},
            "trips": {k: v / TASKS for k, v in self.tally.trips.most_common()},
        }


def inside() -> dict:
    """In a process of its own, set up as the site: a task's path (enqueue
    all, then run each job) and a report job's (start one, run it: a kind
    holds JOBS_PER_KIND at once); once counting what each side does, once
    timing it (counting costs CPU)."""
    import django

    django.setup()
    from bench import task_defs
    from webfarm.progress.launching import running

    def enqueue() -> str:
        return task_defs.ours_stamp.enqueue().id

    def start() -> str:
        return task_defs.bench_report.start(user=None, params={}).id

    def run_job(job_id: str) -> None:
        running.run_job(job_id=job_id, worker="profile#1")

    for _ in range(20):  # warm: connections, imports, caches
        run_job(enqueue())
        run_job(start())
    sides = {name: Side() for name in ("enqueue", "run", "report start", "report run")}
    with tallied(sides["enqueue"].tally):
        ids = [enqueue() for _ in range(TASKS)]
    with tallied(sides["run"].tally):
        for job_id in ids:
            run_job(job_id)
    for _ in range(TASKS):
        with tallied(sides["report start"].tally):
            job_id = start()
        with tallied(sides["report run"].tally):
            run_job(job_id)
    profiled = os.environ.get("BENCH_PATH_PROFILE", "")
    profile = cProfile.Profile()

    def call(side: str, fn: Callable[..., object], *args: object) -> object:
        if profiled == side:
            return sides[side].timed(profile.runcall, fn, *args)
        return sides[side].timed(fn, *args)

    ids = [call("enqueue", enqueue) for _ in range(TASKS)]
    for job_id in ids:
        call("run", run_job, job_id)
    for _ in range(TASKS):
        call("report run", run_job, call("report start", start))
    if profiled:
        pstats.Stats(profile, stream=sys.stderr).sort_stats(
            os.environ.get("BENCH_PATH_SORT", "cumulative")
        ).print_stats(50)
    return {name: side.figures() for name, side in sides.items()}


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
    lines = [
        f"one task's path and one report's, averaged over {TASKS} of each "
        "(bench.task_defs.ours_stamp, bench.task_defs.bench_report)"
    ]
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
