"""The recovery scan: from the floor to the head, redeliver what lost its
claim, mark holes, move the floor and delete the acked entries it passes."""

import logging
import math
import time
from collections.abc import Callable

from webfarm.core.tampering import refused
from webfarm.queues import entries
from webfarm.queues.entries import ACKED
from webfarm.queues.layout import (
    SCAN_BATCH,
    SCAN_TTL,
    Layout,
    Message,
    number,
)

logger = logging.getLogger(__name__)

# Seconds a sighting may lie ahead of this clock: the farm's clocks differ a little.
CLOCK_SLACK = 5


# What the scan calls its consumer back with: deliver(gen, indexes, recovering=)
# and mark_holes(gen, indexes).
Deliver = Callable[..., list[Message]]
MarkHoles = Callable[[str, list[int]], None]


class RecoveryScan:
    """A consumer's recovery scan, and the generations the queue moved on
    from that it still finishes."""

    def __init__(self, layout: Layout, deliver: Deliver, mark_holes: MarkHoles) -> None:
        self.layout = layout
        self._deliver = deliver
        self._mark_holes = mark_holes
        self._last_recover = 0.0
        # Generations the queue moved on from that may still hold messages:
        # gen -> (its tail when this consumer moved on, when).
        self._superseded: dict[str, tuple[int, float]] = {}

    def due(self) -> bool:
        return time.monotonic() - self._last_recover >= self.layout.recover_interval

    def recover(self, limit: int) -> list[Message]:
        """Walk from the floor to the head: redeliver entries whose claim
        expired, mark long-empty indexes as holes, move the floor past the
        finished prefix and delete the acked entries it passed. Then finish
        the generations the queue moved on from."""
        self._last_recover = time.monotonic()
        gen = self.layout.generation()
        keys = [self.layout.key(gen, k) for k in ("floor", "head", "scan", "tail")]
        floor_key, head_key, scan_key, tail_key = keys
        # With the generation key: whether the queue moved on (see _follow).
        found = self.layout.client.get_many([self.layout.gen_key(), *keys])
        if head_key not in found:
            return self._drain(limit)
        floor, head = number(found.get(floor_key), 1), number(found[head_key], 0)
        # An index past the tail has no producer yet: never a hole (see _deliver).
        tail = number(found.get(tail_key), 0)
        if floor is None or head is None or tail is None:
            self.layout.counters_lost(gen)
            return []
        moved = self.layout.moved_on(gen, found.get(self.layout.gen_key()))
        if moved is not None:
            self._follow(gen, moved)
            return self._drain(limit)
        horizon = self._horizon(scan_key, found.get(scan_key), head)
        messages, _ = self._scan(gen, floor, head, horizon, tail, limit)
        if len(messages) < limit and self._superseded:
            messages += self._drain(limit - len(messages))
        return messages

    def _scan(
        self, gen: str, floor: int, head: int, horizon: int, tail: int, limit: int
    ) -> tuple[list[Message], int]:
        """From the floor to `head`: redeliver what lost its claim and mark
        empty indexes holes, both only up to `horizon`; move the floor past
        the finished prefix. Returns the messages and the new floor."""
        floor_key = self.layout.key(gen, "floor")
        messages: list[Message] = []
        done_until = floor  # first index not known to be finished
        passed: list[int] = []  # acked entries the floor moves past
        prefix_open = True
        start = floor
        while start <= head and len(messages) < limit:
            batch = range(start, min(start + SCAN_BATCH, head + 1))
            keys = [self.layout.key(gen, "m", i) for i in batch] + [
                self.layout.key(gen, "c", i) for i in batch
            ]
            values = self.layout.client.get_many(keys)
            abandoned, empty = [], []
            for i in batch:
                entry = values.get(self.layout.key(gen, "m", i))
                if prefix_open and entries.is_finished(entry):
                    done_until = i + 1
                    if entry[:1] == ACKED:
                        passed.append(i)
                else:
                    prefix_open = False
                if i > horizon:
                    continue
                if entry is None:
                    empty.append(i)
                elif not entries.is_finished(entry) and self.layout.key(gen, "c", i) not in values:
                    abandoned.append(i)
            # Every empty index, not only `limit` of them: holes marked one a
            # scan can expire as fast as they are marked, and the floor never
            # passes a long run of them.
            self._mark_holes(gen, [i for i in empty if i <= tail])
            if abandoned:
                messages += self._deliver(gen, abandoned[: limit - len(messages)], recovering=True)
            start = batch.stop
        if done_until > floor:
            self.layout.client.set(floor_key, str(done_until).encode(), noreply=False)
            # Nobody reads below the floor. Holes stay until they expire: a
            # producer that took such an index long ago must still lose its add.
            self.layout.client.delete_many([self.layout.key(gen, "m", i) for i in passed], noreply=True)
        return messages, done_until

    def _follow(self, old: str, new: str) -> None:
        """Another process moved the queue on to `new`: take from there, and
        finish what `old` holds. A producer that writes into `old` after the
        move sees it in the same round trip and takes back what no consumer
        claimed (Producer._take_back), so `old` only has to be walked up to
        its tail as it is now."""
        tail = number(self.layout.client.get(self.layout.key(old, "tail")), 0) or 0
        self._superseded[old] = (tail, time.monotonic())
        logger.warning(
            "queue %s moved on from generation %s to %s: finishing %d indexes there",
            self.layout.name,
            old,
            new,
            tail,
        )
        self.layout.gen = None  # read again; the consumer forgets what it knew of `old`
        self.layout.stat("resets")

    def _drain(self, limit: int) -> list[Message]:
        """Deliver what the generations the queue moved on from still hold,
        once the producers that took an index there before the move had the
        time to write it; forget each once its floor passes its tail. A
        message delivered from there counts as redelivered."""
        messages: list[Message] = []
        for gen, (until, since) in list(self._superseded.items()):
            if len(messages) >= limit:
                break
            if time.monotonic() - since < self.layout.hole_wait:
                continue
            floor_key, tail_key = self.layout.key(gen, "floor"), self.layout.key(gen, "tail")
            found = self.layout.client.get_many([floor_key, tail_key])
            floor = number(found.get(floor_key), 1)
            if tail_key not in found or floor is None:
                del self._superseded[gen]  # lost with memcached, or not ours to walk
                continue
            if floor <= until:
                got, floor = self._scan(gen, floor, until, until, until, limit - len(messages))
                messages += got
            if floor > until:
                self._forget(gen)
        return messages

    def _forget(self, gen: str) -> None:
        """A generation the queue moved on from is finished: its counters go
        too (its hole and acked markers expire on their own). A producer that
        still writes there finds its tail gone and puts again where the
        queue is now."""
        del self._superseded[gen]
        keys = [self.layout.key(gen, k) for k in ("tail", "head", "floor", "scan")]
        self.layout.client.delete_many(keys, noreply=False)

    def _horizon(self, scan_key: str, stored: bytes | None, head: int) -> int:
        """The head as some consumer saw it at least HOLE_WAIT ago (0 if none).

        An index above it may have been taken a moment ago by a consumer about
        to write its claim, or handed to a producer about to write its entry;
        at or below it, an unclaimed entry was abandoned and an empty index can
        be marked a hole. Kept in memcached so a consumer that lives for one
        call (a periodic drain) judges as well as one that lives for days.

        Two sightings are kept, the last and the one before it: the pass that
        replaces an aged sighting still has the one before as a horizon, and
        so has every pass after it. (With one, only the pass that found it
        aged could redeliver: one message per HOLE_WAIT for the whole farm
        on the broker, whose consumers claim one at a time.)
        """
        now = time.time()
        wait = max(self.layout.recover_interval, self.layout.hole_wait)
        sightings = _sightings(scan_key, stored)
        if not sightings or now - sightings[0][1] >= wait:
            kept = [(head, now), *sightings[:1]]
            value = ";".join(f"{seen}:{at:.3f}" for seen, at in kept)
            self.layout.client.set(scan_key, value.encode(), expire=SCAN_TTL, noreply=False)
        aged = [seen for seen, at in sightings if now - at >= wait]
        return min(aged[0], head) if aged else 0


def _sightings(scan_key: str, stored: bytes | None) -> list[tuple[int, float]]:
    """The heads a scan key holds, each with when it was seen, the newest first."""
    if not stored:
        return []
    try:
        sightings = []
        for part in stored.decode().split(";")[:2]:
            seen, _, at = part.partition(":")
            when = float(at)
            if not math.isfinite(when) or when > time.time() + CLOCK_SLACK:
                raise ValueError(at)  # a time to come would never age: no horizon, ever
            sightings.append((int(seen), when))
    except ValueError:
        refused("queue", scan_key, "not a horizon")
        return []
    return sorted(sightings, key=lambda sighting: sighting[1], reverse=True)
