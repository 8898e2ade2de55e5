"""Append the site log to a JSON-lines file, in order, exactly once.

Every line carries the queue position it came from ("q": "<generation>.<index>").
On start the drainer reads the file's tail to learn which positions are
already written, so a message delivered again after a crash (written, not yet
acknowledged) is skipped, and an entry that arrives late (its producer was slow,
the queue waited) is still written. The queue itself copes with entries counted
but not yet written, and with counter resets (a new generation).
"""

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from activity import recent
from activity.handler import QUEUE_NAME
from activity.logfile import tail_entries
from progress.client import get_client
from queues.core import Message, Queue

BATCH = 500
TAIL_BYTES = 4 * 1024 * 1024  # how much of the file to read back on start
LOCK_KEY = "sitelog:drainer"
LOCK_TTL = 60


class DrainerBusy(Exception):
    """Another drainer holds the lock: one file, one writer."""


def _written(path: Path) -> set[str]:
    return {entry["q"] for entry in tail_entries(path, TAIL_BYTES) if isinstance(entry.get("q"), str)}


def drain(
    path: Path,
    *,
    follow: bool = False,
    idle_exit: float = 0.0,
    before_ack: Callable[[list[Message]], None] | None = None,
) -> int:
    """Write what the queue holds to `path`; with follow, keep going until
    stopped. Returns the number of lines written."""
    client = get_client()
    if not client.add(LOCK_KEY, str(os.getpid()).encode(), expire=LOCK_TTL):
        raise DrainerBusy("another drainer is running")
    written = 0
    try:
        queue = Queue(QUEUE_NAME)
        seen = _written(path)
        idle_since = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            while True:
                messages = sorted(queue.claim_many(BATCH), key=lambda m: m.index)
                client.touch(LOCK_KEY, LOCK_TTL)
                if not messages:
                    if not follow and time.monotonic() - idle_since >= idle_exit:
                        return written
                    time.sleep(0.2)
                    continue
                idle_since = time.monotonic()
                lines = []
                for message in messages:
                    position = message.receipt.rsplit(".", 1)[0]  # generation.index
                    if position in seen:
                        continue  # written before a crash, delivered again
                    seen.add(position)
                    try:
                        data = json.loads(message.body)
                    except ValueError:
                        data = {"message": message.body.decode(errors="replace")}
                    data["q"] = position
                    lines.append(json.dumps(data, separators=(",", ":")).encode() + b"\n")
                out.write(b"".join(lines))
                out.flush()
                os.fsync(out.fileno())
                recent.remember(client, lines)
                if before_ack:
                    before_ack(messages)
                queue.ack_many([m.receipt for m in messages])
                written += len(lines)
    finally:
        client.delete(LOCK_KEY)
