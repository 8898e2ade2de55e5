"""Run by bench/tasks.py in a process of its own for one backend: enqueues
stamp tasks one at a time (latency), then a burst (tasks/s), reads every
result back through get_result(), and prints figures as JSON."""

import json
import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.tasks_settings")

SEQUENTIAL = int(os.environ.get("BENCH_TASK_LATENCY", "100"))
BURST = int(os.environ.get("BENCH_TASK_BURST", "300"))
LOOP = int(os.environ.get("BENCH_TASK_LOOP", "200000"))


def _finished(result, timeout: float = 180.0):
    from webfarm.djangotasks.compat import TaskResultDoesNotExist

    deadline = time.monotonic() + timeout
    while not result.is_finished:
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {result.id} still {result.status}")
        time.sleep(0.002)
        try:
            result.refresh()
        except TaskResultDoesNotExist:
            # fennel: until its worker stores a result, get_result() finds none
            # here (its enqueue-time record did not reach the result backend).
            continue
    if str(result.status) != "SUCCESSFUL":
        raise RuntimeError(f"task {result.id}: {result.status} {[e.traceback for e in result.errors]}")
    return result.return_value


def stamps(alias: str) -> dict[str, float]:
    from bench import task_defs

    stamp = getattr(task_defs, f"{alias}_stamp")
    for _ in range(10):  # warm up the worker and the connections
        _finished(stamp.enqueue())
    latencies = []
    for _ in range(SEQUENTIAL):
        sent = time.time()
        latencies.append((_finished(stamp.enqueue()) - sent) * 1000)
    latencies.sort()
    first = time.time()
    began = time.perf_counter()
    burst = [stamp.enqueue() for _ in range(BURST)]
    enqueued = time.perf_counter() - began
    starts = [_finished(result) for result in burst]
    return {
        "enqueue_ms": enqueued / BURST * 1000,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
        "tasks_per_s": BURST / (max(starts) - first),
    }


def bare_stamps(table: str = "") -> dict[str, float]:
    """The same figures for a plain Celery task (delay(), AsyncResult.get()):
    the floor a django.tasks backend on Celery stands on. `table`: the task
    also has a row there ("job" or "db", bench.task_defs.new_row), written
    at enqueue, start and end."""
    from bench import task_defs

    def delay():
        if not table:
            return task_defs.bare_stamp.delay()
        return task_defs.bare_row_stamp.delay(task_defs.new_row(table), table)

    for _ in range(10):
        delay().get(timeout=60)
    latencies = []
    for _ in range(SEQUENTIAL):
        sent = time.time()
        latencies.append((delay().get(timeout=60) - sent) * 1000)
    latencies.sort()
    first = time.time()
    began = time.perf_counter()
    burst = [delay() for _ in range(BURST)]
    enqueued = time.perf_counter() - began
    starts = [result.get(timeout=180) for result in burst]
    return {
        "enqueue_ms": enqueued / BURST * 1000,
        "p50_ms": statistics.median(latencies),
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
        "tasks_per_s": BURST / (max(starts) - first),
    }


def progress_cost() -> dict[str, float]:
    from bench import task_defs

    plain = _finished(task_defs.plain_loop.enqueue(LOOP))
    reported = _finished(task_defs.reported_loop.enqueue(LOOP))
    return {"plain_s": plain, "reported_s": reported, "per_step_us": (reported - plain) / LOOP * 1e6}


def main() -> None:
    import django

    django.setup()
    alias = sys.argv[1]
    if alias.startswith("bare"):
        figures = bare_stamps(alias.removeprefix("bare").removeprefix("-"))
    else:
        figures = stamps("ours" if alias == "default" else alias)
    if alias == "default" and not os.environ.get("BENCH_SKIP_LOOP"):
        figures.update(progress_cost())
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
