"""Which worker processes live: told apart from the jobs' own heartbeats.

A job's heartbeat comes from a thread of the process that runs it. That
thread can be silent while the process is alive and working: the machine
starved of CPU, or the job in a long C call that holds the GIL (a big sort,
a library's native code). Taking such a job for lost would be a wrong answer
to its user, and would run it a second time beside the first.

So the main process of each Celery worker, which runs no job, says every
half heartbeat which of its processes live: its pool's children (and
itself, for a pool that runs jobs in it) that exist and are not stopped,
each under `alive:<digest of host#pid>` (sealed). The reaper takes a silent
job for lost only when its process is not listed there: dead (killed, out of
memory) or stopped (SIGSTOP, a debugger), which the next beat says at once,
or on a worker whose main process stopped saying anything, once its keys
lapse. A process that lives but says nothing is waited for until its time
limit, which Celery enforces by killing it; then it is no longer listed.

The keys live lost_after() and a second: memcached counts whole seconds, so
an item may lapse up to one early, and a beacon must be let stay silent as
long as a job's heartbeat may be before its processes count as gone.

A solo or threads pool runs its jobs in the main process: a C call that holds
the GIL silences this thread too, and such a job is taken for lost as before.
"""

import hashlib
import logging
import math
import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.core.seal import seal, unseal
from webfarm.progress.conf import get_config, lost_after

logger = logging.getLogger(__name__)

# /proc/<pid>/stat states of a process that will not run until someone acts:
# stopped, traced, a zombie, dead.
NOT_RUNNING = frozenset("TtZXx")


def alive_key(worker: str) -> str:
    """The key that says the process `worker` ("<celery hostname>#<pid>",
    as a job's row names it) lives."""
    return "alive:" + hashlib.blake2b(worker.encode(errors="replace"), digest_size=12).hexdigest()


def alive(workers: Iterable[str]) -> set[str]:
    """The processes among `workers` that their worker's main process says
    live now. Raises MemcacheError/OSError when memcached cannot answer."""
    keys = {alive_key(worker): worker for worker in set(workers) if worker}
    if not keys:
        return set()
    found = get_client().get_many(list(keys))
    return {worker for key, worker in keys.items() if unseal("alive", key, found.get(key)) == b"1"}


def lifetime() -> int:
    """Seconds an `alive:` key lives: lost_after(), and one more, as
    memcached may drop an item up to a second early."""
    return math.ceil(lost_after()) + 1


def process_stats() -> Iterator[tuple[int, list[bytes]]]:
    """Each process there is, as (pid, the fields of its /proc/<pid>/stat
    after the command's name: state, parent, group, ...); none without /proc."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                # The name may hold spaces and brackets: the fields start after its last ")".
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        yield int(name), fields


def running_processes(parent: int) -> list[int]:
    """`parent` and those of its children that run (exist and are not
    stopped), from /proc; `parent` alone where there is no /proc."""
    found = [parent]
    for pid, fields in process_stats():
        if len(fields) > 1 and int(fields[1]) == parent and fields[0].decode() not in NOT_RUNNING:
            found.append(pid)
    return found


class Beacon:
    """In a worker's main process: says, every half heartbeat, which of its
    processes live."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self._listed: set[str] = set()  # the keys the last beat wrote
        self._failing = False  # the last beat could not write: said once, not every beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def beat(self) -> None:
        ttl = lifetime()
        values = {}
        for pid in running_processes(os.getpid()):
            key = alive_key(f"{self.hostname}#{pid}")
            values[key] = seal(key, b"1", ttl=ttl)
        try:
            client = get_client()
            client.set_many(values, expire=ttl)
            # A process that died or stopped since is unlisted at once, not
            # when its key lapses: its job's silence alone then decides.
            gone = self._listed - values.keys()
            if gone:
                client.delete_many(list(gone))
            self._listed = set(values)
        except (MemcacheError, OSError) as exc:
            # Unsaid past the keys' lifetime, the jobs are judged by their heartbeats alone.
            if not self._failing:
                logger.warning("liveness of %s not written (said again each beat): %s", self.hostname, exc)
            self._failing = True
        else:
            if self._failing:
                logger.info("liveness of %s written again", self.hostname)
            self._failing = False

    def _run(self) -> None:
        while not self._stop.wait(get_config()["HEARTBEAT_INTERVAL"] / 2):
            self.beat()


_beacon: Beacon | None = None


@worker_ready.connect
def _start(sender: Any, **kwargs: Any) -> None:
    global _beacon
    _beacon = Beacon(sender.hostname)
    _beacon.start()


@worker_shutdown.connect
def _stop(**kwargs: Any) -> None:
    if _beacon is not None:
        _beacon.stop()
