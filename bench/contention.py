"""Writers of one record at once: the parts of a split job all flushing.

Each part's write is a gets/cas of the job's one record (webfarm.progress.store.update);
a part that loses the race reads again and tries again. Eight threads flush
100 times each, flat out, against a real memcached: the worst case, with
every part in step. Measured twice in the same run: with no pause between
tries (the baseline) and with webfarm.core.backoff's. The figures: tries per
update (mean, 99th percentile, most) and updates a second; the run is kept
only if every part's last figure is in the record.
"""

import threading
import time
from collections import Counter

from bench import stage

PARTS = 8
FLUSHES = 100
RUNS = 5  # of each, alternating: the sums are compared


def _storm(reporters: list) -> float:
    barrier = threading.Barrier(len(reporters))

    def part(reporter) -> None:
        barrier.wait(10)
        for done in range(1, FLUSHES + 1):
            reporter.update(done)

    threads = [threading.Thread(target=part, args=(r,)) for r in reporters]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return time.perf_counter() - start


def run() -> dict[str, dict[str, float]]:
    with stage.in_process("bench-contention"):
        from webfarm.core import backoff
        from webfarm.progress import store
        from webfarm.progress.ids import new_job_id
        from webfarm.progress.parts.reporter import PartReporter
        from webfarm.progress.records import JobRecord, PartProgress

        tries: Counter = Counter()
        local = threading.local()
        update, cas = store.update, store._cas_with_document

        def counted_update(*args, **kwargs):
            local.tries = 0
            try:
                return update(*args, **kwargs)
            finally:
                tries[local.tries] += 1

        def counted_cas(*args, **kwargs):
            local.tries += 1
            return cas(*args, **kwargs)

        store.update, store._cas_with_document = counted_update, counted_cas
        first = backoff.FIRST
        figures: dict[str, dict[str, float]] = {}
        try:
            for _ in range(RUNS):
                for name, pause in (("no pause", 0.0), ("backoff", first)):
                    backoff.FIRST = pause
                    record = JobRecord(
                        job=new_job_id(),
                        owner=1,
                        kind="bench",
                        state="running",
                        read_token=new_job_id(),
                        parts=[PartProgress(state="queued") for _ in range(PARTS)],
                    )
                    store.create(record)
                    reporters = []
                    for index in range(PARTS):
                        reporter = PartReporter(
                            record, index=index, attempt=1, worker=f"w{index}", share=1.0, flush_interval=0
                        )
                        reporter.stage("working", total=FLUSHES)
                        reporters.append(reporter)
                    tries.clear()
                    seconds = _storm(reporters)
                    kept = [part.done for part in store.read(record.job).parts]
                    figure = figures.setdefault(name, Counter())
                    figure["seconds"] += seconds
                    figure["updates"] += sum(tries.values())
                    figure["tries"] += sum(k * v for k, v in tries.items())
                    figure["kept"] += kept == [1.0] * PARTS
                    figure["most"] = max(figure["most"], max(tries))
                    for k, v in tries.items():
                        figure[f"at{k}"] += v
        finally:
            backoff.FIRST = first
            store.update, store._cas_with_document = update, cas
        for figure in figures.values():
            counts = sorted((int(k[2:]), v) for k, v in figure.items() if k.startswith("at"))
            seen, p99 = 0, 0
            for k, v in counts:
                seen += v
                if seen >= 0.99 * figure["updates"]:
                    p99 = k
                    break
            figure["p99"] = p99
        return figures


def report(figures: dict[str, dict[str, float]]) -> str:
    lines = [f"{PARTS} parts flushing {FLUSHES} times each, at once, on one record ({RUNS} runs of each):"]
    mean = {name: f["tries"] / f["updates"] for name, f in figures.items()}
    rate = {name: f["updates"] / f["seconds"] for name, f in figures.items()}
    for name, f in figures.items():
        lines.append(
            f"  {name:9} tries per update: mean {mean[name]:.2f}, p99 {f['p99']}, most {f['most']};"
            f" {rate[name]:,.0f} updates/s; every last figure kept in {f['kept']} of {RUNS}"
        )
    lines.append(
        f"  backoff / no pause: tries {mean['backoff'] / mean['no pause']:.2f}x,"
        f" updates/s {rate['backoff'] / rate['no pause']:.2f}x"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
