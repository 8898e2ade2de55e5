"""Sends SOAK_TASKS numbered soak.note tasks at SOAK_RATE a second through
the configured broker; a send the broker refuses (paused, restarting) is
sent again until it is taken. Prints its figures as JSON. Run by
bench/broker_soak.py in a process of its own, which it may pause."""

import json
import os
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.soak_settings")


def main() -> None:
    import django

    django.setup()
    from bench.soak_tasks import note

    total, rate = int(os.environ["SOAK_TASKS"]), float(os.environ["SOAK_RATE"])
    refused = 0
    start, started_at = time.monotonic(), time.time()
    for number in range(total):
        ahead = start + number / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        asked_at = time.time()  # when delay() was called: a refused send waits from here
        while True:
            try:
                note.apply_async(args=[number, asked_at])
                break
            except Exception:  # the broker's errors are many; each is a send to make again
                refused += 1
                time.sleep(0.1)
    figures = {"sent": total, "refused_sends": refused, "seconds": time.monotonic() - start}
    print(json.dumps({**figures, "started_at": started_at, "ended_at": time.time()}))


if __name__ == "__main__":
    main()
