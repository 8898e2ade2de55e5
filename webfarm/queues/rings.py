"""Every queue of the farm, on whichever ring it lives.

Most queues live on the main ring (MEMCACHED["SERVERS"]). An app that keeps
queues on a ring of its own (the memcached broker keeps Celery's under a
namespace of its own, maybe on other servers) names that ring here once, in
its ready(); a queue lists itself on the ring it lives on (registry.py), so
the dashboard and the counter harvester ask each ring for its own queues.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass

from django.core.signals import setting_changed
from django.dispatch import receiver
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import StableHashClient, client_epoch
from webfarm.queues.queue import Queue
from webfarm.queues.registry import known_queues

RingFactory = Callable[[], StableHashClient | None]

_factories: dict[str, RingFactory] = {}
# label -> (pid, client epoch, ring): one client per process, as get_client() keeps.
_made: dict[str, tuple[int, int, StableHashClient | None]] = {}


@dataclass(frozen=True)
class FarmQueue:
    """A queue and the ring it lives on ("" for the main ring)."""

    name: str
    ring: str = ""

    @property
    def title(self) -> str:
        """How people see it: "celery" on the main ring, "broker:celery" on the broker's."""
        return f"{self.ring}:{self.name}" if self.ring else self.name

    def labels(self) -> dict[str, str]:
        """Its counter labels: the queue, and its ring unless it is the main one."""
        return {"queue": self.name, "ring": self.ring} if self.ring else {"queue": self.name}

    def queue(self) -> Queue:
        """The queue itself. Raises LookupError for a ring no app named, or
        one its app says is not in use here."""
        if not self.ring:
            return Queue(self.name)
        ring = ring_named(self.ring)
        if ring is None:
            raise LookupError(f"no queue ring {self.ring!r} in this farm")
        return Queue(self.name, ring=ring)


def add_ring(label: str, factory: RingFactory) -> None:
    """Name a ring that holds queues; `factory` makes its client, or returns
    None when the app keeps no queues in memcached with these settings."""
    _factories[label] = factory


def ring_named(label: str) -> StableHashClient | None:
    factory = _factories.get(label)
    if factory is None:
        return None
    made = _made.get(label)
    if made is None or made[:2] != (os.getpid(), client_epoch()):
        made = (os.getpid(), client_epoch(), factory())
        _made[label] = made
    return made[2]


@receiver(setting_changed)
def _forget_rings(**kwargs: object) -> None:
    # A ring follows settings other than MEMCACHED (the broker's URL).
    _made.clear()


def farm_queues() -> tuple[list[FarmQueue], list[str]]:
    """Every queue listed on every ring, and what went wrong per ring. Raises
    MemcacheError/OSError when the main ring cannot answer."""
    found = [FarmQueue(name) for name in known_queues()]
    problems = []
    for label in sorted(_factories):
        ring = ring_named(label)
        if ring is None:
            continue
        try:
            found += [FarmQueue(name, label) for name in known_queues(ring)]
        except (MemcacheError, OSError) as exc:
            problems.append(f"the {label} ring's memcached is unreachable: {exc}")
    return found, problems
