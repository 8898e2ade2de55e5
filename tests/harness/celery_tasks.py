"""Tasks for the broker tests, loaded by their workers with --include. Each
notes what happened in memcached, where the test reads it."""

import time

from celery import shared_task

from webfarm.core.client import get_client


def note(key: str, value: str) -> None:
    client = get_client()
    if not client.append(f"brokertest:{key}", f"{value},".encode()):
        client.add(f"brokertest:{key}", f"{value},".encode())


@shared_task(name="brokertest.stamp", ignore_result=True)
def stamp(key: str) -> None:
    note(key, f"{time.time():.3f}")


@shared_task(name="brokertest.flaky", bind=True, ignore_result=True, max_retries=3)
def flaky(self, key: str) -> None:
    note(key, f"try{self.request.retries}")
    if self.request.retries < 2:
        raise self.retry(countdown=0.2)


@shared_task(name="brokertest.hold", bind=True, ignore_result=True, acks_late=True)
def hold(self, key: str) -> None:
    """Runs until the test lets it go, noting whether it was redelivered."""
    note(key, "redelivered" if self.request.delivery_info.get("redelivered") else "first")
    client = get_client()
    while not client.get(f"brokertest:{key}:go"):
        time.sleep(0.05)
    note(key, "done")
