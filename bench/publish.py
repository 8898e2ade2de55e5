"""Publishing overhead: a tight loop with and without reporter.update() per step.

The loop body is a small piece of arithmetic, about what a report does per
row, so the ratio shows what progress costs a task that calls update() for
every single item. The reporter writes to a real memcached.
"""

import os
import time

from bench import stage

STEPS = int(os.environ.get("BENCH_STEPS", "1000000"))


def _loop(update) -> float:
    total = 0
    start = time.perf_counter()
    for i in range(STEPS):
        total += (i * 7) % 13
        update(i)
    elapsed = time.perf_counter() - start
    assert total > 0
    return elapsed


def run() -> dict[str, float]:
    with stage.in_process("bench-publish"):
        from webfarm.progress import store
        from webfarm.progress.ids import new_job_id
        from webfarm.progress.records import JobRecord
        from webfarm.progress.reporter import ProgressReporter

        record = JobRecord(job=new_job_id(), owner=1, kind="bench", state="running")
        store.create(record)
        reporter = ProgressReporter(record)
        reporter.stage("loop", total=STEPS)

        def nothing(i: int) -> None:
            return None

        baseline = min(_loop(nothing) for _ in range(3))
        with_progress = min(_loop(reporter.update) for _ in range(3))
        reporter.flush()
        assert store.read(record.job).current == STEPS - 1
        return {
            "baseline": baseline,
            "with_progress": with_progress,
            "flushes": reporter.flushes,
        }


def report(r: dict[str, float]) -> str:
    per_call = (r["with_progress"] - r["baseline"]) / STEPS * 1e9
    return (
        f"Publishing: {STEPS:,} steps, best of 3\n"
        f"  loop calling a no-op function   {r['baseline']:.3f} s\n"
        f"  loop calling reporter.update()  {r['with_progress']:.3f} s  "
        f"({r['with_progress'] / r['baseline']:.2f}x, +{per_call:.0f} ns per update, "
        f"{r['flushes']} memcached writes in all runs)"
    )
