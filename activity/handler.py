"""A logging handler that ships records into a memcached queue from any node.

The request thread only puts the record on an in-process buffer (the stdlib's
QueueHandler); a listener thread writes to memcached. A full buffer or an
unreachable memcached drops the record and counts it, never raising into
the code that logged.
"""

import json
import logging
import logging.handlers
import queue
import socket
import time
from typing import Any

from core.counters import count
from queues.core import producer
from queues.exceptions import QueueError

QUEUE_NAME = "sitelog"
BUFFER = 10_000
NODE = socket.gethostname()
# Attributes a LogRecord always has; anything else came in through `extra`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def entry(record: logging.LogRecord) -> dict[str, Any]:
    data = {
        "ts": round(record.created, 3),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": record.getMessage(),
        "node": NODE,
    }
    data.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")})
    return data


class MemcachedShipper(logging.Handler):
    """Writes records to the site log queue; used behind the listener thread."""

    def __init__(self, queue_name: str = QUEUE_NAME) -> None:
        super().__init__()
        self.queue_name = queue_name

    def emit(self, record: logging.LogRecord) -> None:
        try:
            producer(self.queue_name).put(json.dumps(entry(record), default=str).encode())
        except QueueError:
            count("sitelog_dropped", reason="memcached")
        except Exception:
            # Logging's rule: a handler never lets an error out (here it would
            # end the listener thread and with it all shipping).
            self.handleError(record)

    def handleError(self, record: logging.LogRecord) -> None:
        count("sitelog_dropped", reason="error")


class SiteLogHandler(logging.handlers.QueueHandler):
    """Put this in LOGGING: cheap for the caller, memcached written elsewhere."""

    def __init__(self, queue_name: str = QUEUE_NAME) -> None:
        super().__init__(queue.Queue(BUFFER))
        self.listener = logging.handlers.QueueListener(self.queue, MemcachedShipper(queue_name))
        self.listener.start()

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            count("sitelog_dropped", reason="buffer")

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until the buffer is written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while not self.queue.empty() and time.monotonic() < deadline:
            time.sleep(0.01)
