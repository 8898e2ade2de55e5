"""Append the site log to a JSON-lines file, in order, exactly once.

Every line carries the queue position it came from ("q": "<generation>.<index>").
On start the drainer reads the file's tail to learn which positions are
already written, so a message delivered again after a crash (written, not yet
acknowledged) is skipped, and an entry that arrives late (its producer was slow,
the queue waited) is still written. The queue itself copes with entries counted
but not yet written, and with counter resets (a new generation).

An entry that is not a site-log entry (webfarm.activity.entries) goes to the queue's
dead letters, and the drainer carries on with the ones behind it.
"""

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from webfarm.activity import recent
from webfarm.activity.entries import check
from webfarm.activity.handler import QUEUE_NAME
from webfarm.activity.logfile import tail_entries
from webfarm.core.client import get_client
from webfarm.core.locks import Busy, lock
from webfarm.queues.queue import Message, Queue

BATCH = 500
TAIL_BYTES = 4 * 1024 * 1024  # how much of the file to read back on start
LOCK_KEY = "sitelog:drainer"
LOCK_TTL = 30  # renewed at every batch: a drainer that died frees it within this


class DrainerBusy(Busy):
    """Another drainer holds the lock: one file, one writer."""


def _written(path: Path) -> set[str]:
    return {entry["q"] for entry in tail_entries(path, TAIL_BYTES) if isinstance(entry.get("q"), str)}


def drain(
    path: Path,
    *,
    follow: bool = False,
    idle_exit: float = 0.0,
    before_ack: Callable[[list[Message]], None] | None = None,
    on_written: Callable[[int, int], None] | None = None,
) -> int:
    """Write what the queue holds to `path`; with follow, keep going until
    stopped. Returns the number of lines written; `on_written(batch, total)`
    hears of each batch."""
    client = get_client()
    written = 0
    with lock(LOCK_KEY, LOCK_TTL, DrainerBusy, "another drainer") as renew:
        queue = Queue(QUEUE_NAME)
        seen = _written(path)
        idle_since = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            while True:
                messages = sorted(queue.claim_many(BATCH), key=lambda m: m.index)
                renew()
                if not messages:
                    if not follow and time.monotonic() - idle_since >= idle_exit:
                        return written
                    time.sleep(0.2)
                    continue
                idle_since = time.monotonic()
                entries, done, bad = [], [], []
                for message in messages:
                    position = message.position
                    if position in seen:
                        done.append(message)  # written before a crash, delivered again
                        continue
                    try:
                        data = check(json.loads(message.body))
                    except (ValueError, RecursionError) as exc:
                        bad.append((message, f"not a site-log entry: {exc}"))
                        continue
                    seen.add(position)
                    data["q"] = position
                    entries.append(data)
                    done.append(message)
                out.write(b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries))
                out.flush()
                os.fsync(out.fileno())
                recent.remember(client, entries)
                if before_ack:
                    before_ack(messages)
                queue.bury_many(bad)
                queue.ack_many([m.receipt for m in done])
                written += len(entries)
                if on_written and entries:
                    on_written(len(entries), written)
