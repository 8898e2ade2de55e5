"""Sends bench.stamp tasks through the configured broker and prints figures as JSON.

Run by bench/celery_broker.py in a process of its own, so each broker gets
settings read fresh from the environment.
"""

import json
import os
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")

SEQUENTIAL = int(os.environ.get("BENCH_LATENCY_TASKS", "300"))
BURST = int(os.environ.get("BENCH_BURST_TASKS", "2000"))


def main() -> None:
    import django

    django.setup()
    from bench.celery_tasks import stamp
    from webfarm.core.client import get_client

    client = get_client()

    def done() -> int:
        return int(client.get("bench:done") or 0)

    def wait_done(n: int, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while done() < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done()} of {n} tasks ran")
            time.sleep(0.0005)

    client.set("bench:done", b"0")
    for _ in range(20):  # warm up the worker and the connections
        stamp.delay(time.time())
    wait_done(20)
    client.set("bench:latency", b"")
    for i in range(SEQUENTIAL):
        stamp.delay(time.time())
        wait_done(21 + i)
    latencies = sorted(float(x) * 1000 for x in client.get("bench:latency").decode().split(",") if x)

    start = time.perf_counter()
    for _ in range(BURST):
        stamp.delay(time.time())
    sent = time.perf_counter() - start
    wait_done(20 + SEQUENTIAL + BURST)
    elapsed = time.perf_counter() - start
    print(
        json.dumps(
            {
                "p50_ms": statistics.median(latencies),
                "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
                "tasks_per_s": BURST / elapsed,
                "sends_per_s": BURST / sent,
            }
        )
    )


if __name__ == "__main__":
    main()
