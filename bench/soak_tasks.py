"""The broker soak's task (loaded by its workers with --include): it notes
its number, when it was sent and when it ran, in the store's memcached."""

import time

from celery import shared_task

from webfarm.core.client import get_client

# Tasks per note key: appends stay small (memcached copies the item on each).
SHARD = 500
# A little work, so a killed worker is killed in the middle of some.
WORK_SECONDS = 0.002


@shared_task(name="soak.note", ignore_result=True)
def note(number: int, sent_at: float) -> None:
    time.sleep(WORK_SECONDS)
    key, line = f"soak:ran:{number // SHARD}", f"{number}:{sent_at:.3f}:{time.time():.3f},".encode()
    client = get_client()
    if not client.append(key, line) and not client.add(key, line):
        client.append(key, line)  # another process made the key a moment ago
