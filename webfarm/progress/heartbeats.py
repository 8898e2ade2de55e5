"""One heartbeat thread per process, shared by every job the process runs.

A thread of its own per job cost every task a thread's start and its join,
even a task that ends in a millisecond and never beats: a third of a short
task's time on the worker. Here a job adds its beat to the process's one
thread and takes it off again; the thread starts with the first job and
then waits, idle, for the next.

A forked child (a prefork worker's process) starts with none of its
parent's beats and no thread: the parent's thread does not exist there.
"""

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

from django.db import connection

logger = logging.getLogger(__name__)

# How long stop() waits for a beat under way (a beat stuck on an unreachable
# memcached gives up on its own; the job's end does not wait for it longer).
STOP_WAIT = 5.0


class Heartbeats:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._beats: dict[int, tuple[float, Callable[[], None]]] = {}  # id -> (every, beat)
        self._due: list[tuple[float, int]] = []  # (when, id), a heap
        self._ids = itertools.count(1)
        self._running: int | None = None  # the beat under way
        self._thread: threading.Thread | None = None

    def start(self, every: float, beat: Callable[[], None]) -> int:
        """Call `beat` every `every` seconds, first after one interval, until
        stop() is given the id this returns."""
        with self._lock:
            beat_id = next(self._ids)
            self._beats[beat_id] = (every, beat)
            heapq.heappush(self._due, (time.monotonic() + every, beat_id))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="heartbeats", daemon=True)
                self._thread.start()
            self._lock.notify()
        return beat_id

    def stop(self, beat_id: int) -> None:
        """No more beats for `beat_id`; one under way is waited for (up to
        STOP_WAIT), so the caller's final write comes after it."""
        deadline = time.monotonic() + STOP_WAIT
        with self._lock:
            self._beats.pop(beat_id, None)
            while self._running == beat_id and self._thread is not threading.current_thread():
                left = deadline - time.monotonic()
                if left <= 0:
                    logger.warning("a heartbeat still under way after %.0f s: not waited for", STOP_WAIT)
                    return
                self._lock.wait(left)

    def _run(self) -> None:
        while True:
            with self._lock:
                beat_id, beat = self._next()
                self._running = beat_id
            try:
                beat()
            except Exception:
                logger.exception("a heartbeat failed")
            finally:
                # The beat's own connection, if it opened one (the job's row,
                # or its limit slots): this thread outlives every job.
                connection.close()
                with self._lock:
                    self._running = None
                    entry = self._beats.get(beat_id)
                    if entry is not None:
                        heapq.heappush(self._due, (time.monotonic() + entry[0], beat_id))
                    self._lock.notify_all()

    def _next(self) -> tuple[int, Callable[[], None]]:
        """Wait (holding the lock) for the next beat due, and take it."""
        while True:
            while self._due and self._due[0][1] not in self._beats:
                heapq.heappop(self._due)  # stopped
            if not self._due:
                self._lock.wait()
                continue
            when, beat_id = self._due[0]
            wait = when - time.monotonic()
            if wait > 0:
                self._lock.wait(wait)
                continue
            heapq.heappop(self._due)
            return beat_id, self._beats[beat_id][1]

    def _forked(self) -> None:
        # The child has no thread; any beat copied from the parent is the parent's job.
        self.__init__()  # type: ignore[misc]


_heartbeats = Heartbeats()
os.register_at_fork(after_in_child=_heartbeats._forked)


def start(every: float, beat: Callable[[], None]) -> int:
    """Beat every `every` seconds on the process's heartbeat thread."""
    return _heartbeats.start(every, beat)


def stop(beat_id: int) -> None:
    """Stop a beat start() began, waiting out one under way."""
    _heartbeats.stop(beat_id)
