"""A logging handler that ships records into a memcached queue from any node.

The request thread only turns the record into a small dict and puts it on an
in-process buffer; a shipper thread writes to memcached, at most 20 times a
second, as many records as are waiting in one `put_many` (one or two round
trips for a batch, not per record). A full buffer or an unreachable memcached drops the records and
counts them, never raising into the code that logged.

It is a plain `logging.Handler`, not a `QueueHandler`: since Python 3.12,
`logging.config.dictConfig` builds a QueueHandler subclass itself, handing
it a queue of its own as the first argument, so the same LOGGING would mean
different things on different Pythons.
"""

import json
import logging
import queue
import socket
import threading
import time
from typing import Any

from webfarm.core.counters import count
from webfarm.queues.exceptions import QueueError, QueueFull
from webfarm.queues.queue import thread_queue

QUEUE_NAME = "sitelog"
# The logger each request's line goes to (webfarm.activity.middleware).
LOGGER = "activity"
BUFFER = 10_000
# Records shipped in one put_many at most.
SHIP_BATCH = 200
# Seconds the shipper lets records gather after the first: waking for each one
# would take the interpreter from the request threads hundreds of times a second.
SHIP_PAUSE = 0.05
NODE = socket.gethostname()
# Attributes a LogRecord always has; anything else came in through `extra`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_STOP = object()


def entry(record: logging.LogRecord, message: str | None = None) -> dict[str, Any]:
    """The record as the site log keeps it; `message` is the formatted text, if any."""
    data = {
        "ts": round(record.created, 3),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": record.getMessage() if message is None else message,
        "node": NODE,
    }
    data.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")})
    return data


def ship(queue_name: str, records: list[dict[str, Any]]) -> None:
    """Write entries to the site log queue in one put_many; drops are counted."""
    try:
        bodies = [json.dumps(record, default=str).encode() for record in records]
        thread_queue(queue_name).put_many(bodies)
    except QueueFull as exc:
        count("sitelog_dropped", len(records) - len(getattr(exc, "stored", [])), reason="memcached")
    except QueueError:
        count("sitelog_dropped", len(records), reason="memcached")
    except Exception:
        # Logging's rule: a handler never lets an error out (here it would
        # end the shipper thread and with it all shipping).
        count("sitelog_dropped", len(records), reason="error")


class Shipper(threading.Thread):
    """Takes what waits in the buffer, up to SHIP_BATCH records, and ships it."""

    def __init__(self, buffer: "queue.Queue[Any]", queue_name: str) -> None:
        super().__init__(name="sitelog-shipper", daemon=True)
        self.buffer, self.queue_name = buffer, queue_name

    def run(self) -> None:
        while True:
            batch = [self.buffer.get()]
            if batch[0] is not _STOP:
                time.sleep(SHIP_PAUSE)
            while batch[-1] is not _STOP and len(batch) < SHIP_BATCH:
                try:
                    batch.append(self.buffer.get_nowait())
                except queue.Empty:
                    break
            records = [record for record in batch if record is not _STOP]
            if records:
                ship(self.queue_name, records)
            for _ in batch:
                self.buffer.task_done()
            if batch[-1] is _STOP:
                return


class SiteLogHandler(logging.Handler):
    """Put this in LOGGING: cheap for the caller, memcached written elsewhere."""

    def __init__(self, queue_name: str = QUEUE_NAME, level: int | str = logging.NOTSET) -> None:
        if not isinstance(queue_name, str):
            raise TypeError(f"SiteLogHandler's queue_name is a queue's name, not {type(queue_name).__name__}")
        super().__init__(level)
        self.queue_name = queue_name
        self._start_shipper()

    def _start_shipper(self) -> None:
        self.buffer: queue.Queue[Any] = queue.Queue(BUFFER)
        self.shipper = Shipper(self.buffer, self.queue_name)
        self.shipper.start()

    def emit(self, record: logging.LogRecord) -> None:
        # A shipper that is gone is started again, as a FileHandler opens its
        # file again: logging configured again closes every handler (a second
        # django.setup()), and a forked child (a Celery pool process) has no
        # thread of its parent's. Handler.handle() holds self.lock here.
        if not self.shipper.is_alive():
            self._start_shipper()
        try:
            # Formatted here, in the caller's thread: the arguments may change
            # once it returns, and a traceback is only at hand now.
            data = entry(record, self.format(record))
        except Exception:
            self.handleError(record)
            return
        try:
            self.buffer.put_nowait(data)
        except queue.Full:
            count("sitelog_dropped", reason="buffer")

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until what is buffered has been shipped (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self.buffer.unfinished_tasks and self.shipper.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        if self.shipper.is_alive():
            try:
                self.buffer.put(_STOP, timeout=1)
            except queue.Full:
                pass  # the daemon thread ends with the process
            else:
                self.shipper.join(5)
        super().close()
