"""A task that notes how long after its send it started (loaded with --include)."""

import time

from celery import shared_task

from webfarm.core.client import get_client


@shared_task(name="bench.stamp", ignore_result=True)
def stamp(sent_at: float) -> None:
    started = time.time()
    client = get_client()
    client.append("bench:latency", f"{started - sent_at:.6f},".encode())
    client.incr("bench:done", 1)
