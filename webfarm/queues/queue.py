"""A message queue in plain memcached that loses nothing and keeps nothing it no longer needs.

Keys of queue <n>, under the namespace, all on the one server "q:<n>" hashes to:

    q:<n>:gen            generation id; every other key carries it, so counters
                         that vanish (restart, flush) restart in a new key space
                         and new messages never meet old keys
    q:<n>:<g>:tail       last index handed to a producer (incr)
    q:<n>:<g>:head       last index taken by a consumer (incr)
    q:<n>:<g>:floor      every index below it is finished
    q:<n>:<g>:scan       the head as a consumer saw it a moment ago (horizon)
    q:<n>:<g>:m:<i>      entry i: a message, or a marker (acked, hole)
    q:<n>:<g>:c:<i>      claim on entry i; expires after the visibility timeout
    q:<n>:stat:<what>    counters: in, out, acked, holes, redelivered, full, resets, dead
    dq:<n>:...           the same for the queue's dead letters

What lives how long (docs/memcached.md): a message until it is
acknowledged; its claim until the ack deletes it or the visibility timeout
ends; the "acked" marker until the floor passes it (then it is deleted), at
most FINISHED_TTL; a hole marker HOLE_TTL, far longer than any producer holds
an index it took; a dead letter DEAD_LETTER_TTL.

Races are settled by memcached's `add`, which stores only if the key is absent:

* A producer takes index i with `incr tail`, then `add`s entry i. A consumer
  that finds i still empty after HOLE_WAIT `add`s a hole marker there. Exactly
  one of the two adds wins: either the message is there to deliver, or the
  producer's add fails and it retries at a new index. Nothing is lost, nothing
  is delivered twice.
* Only an index at or below the tail can become a hole. A consumer on a busy
  queue takes a batch of indexes without looking and may run past the tail;
  those have no producer yet, so the floor stops at the tail and what a
  producer later writes there is delivered (to whoever took it, or by the
  recovery scan). A hole past the tail would let the floor pass it and, once
  the hole expired, strand a new message below the floor.
* Every delivery first `add`s the claim key, so two consumers (or a consumer
  and the recovery scan) never both deliver the same claim.
* A producer's adds carry, in the same round trip, an empty `append` to the
  tail, which stores only if the tail exists: if memcached lost the
  generation between taking the indexes and writing (restart, flush), the
  producer learns it and writes again into a new generation.
* Processes keep the generation they read. A put reads the `gen` key in the
  same round trip as its adds, and the recovery scan reads it too: the key
  evicted or overwritten alone is put back; moved on by a process that
  found it so, everyone follows, and consumers finish the old generation.
* An acknowledged entry is overwritten by a small "acked" marker rather than
  deleted, so "missing" only ever means "not written yet" above the floor.
  Below the floor nobody looks: the markers there are deleted.

A claim that expires (its consumer died) leaves the entry present and
unclaimed; the recovery scan, which walks from the floor to the head, claims it
again and delivers it marked as redelivered. A message that cannot be
delivered (not this farm's, or delivered MAX_DELIVERIES times without an ack)
goes to the queue's dead letters instead, so one bad message never holds up
the ones behind it.
"""

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from webfarm.core.client import MetaBatch, MetaReply, StableHashClient, client_epoch, leftover_ring, server_of
from webfarm.queues import purging
from webfarm.queues.conf import get_config
from webfarm.queues.consuming import Consumer
from webfarm.queues.entries import parse_receipt
from webfarm.queues.exceptions import QueueGone
from webfarm.queues.finishing import Admit
from webfarm.queues.layout import STATS, DeadLetter, Layout, Message, QueueClient
from webfarm.queues.looking import Inspector
from webfarm.queues.producing import Producer

__all__ = ["STATS", "DeadLetter", "Message", "Queue", "thread_queue"]

T = TypeVar("T")
# Seconds between looks for a queue's copy on the server it moved from.
LEFTOVER_LOOK_AGAIN = 5.0


class Queue:
    """One named queue. Cheap to make; not to be shared between threads.

    It composes a key layout (webfarm/queues/layout.py: keys, settings, generation,
    counters) with a producer (producing.py), a consumer (consuming.py, with
    its finisher, finishing.py, and recovery scan, recovery.py) and an
    inspector (looking.py).

    dead=True: the queue's dead letters (`dead_letters()` makes it).
    """

    def __init__(
        self,
        name: str,
        *,
        client: QueueClient | None = None,
        ring: StableHashClient | None = None,
        dead: bool = False,
    ) -> None:
        self.layout = Layout(name, client=client, ring=ring, dead=dead)
        self.producer = Producer(self.layout)
        self.consumer = Consumer(self.layout, self.producer)
        self.inspector = Inspector(self.layout)
        # (the old ring, this queue there or None, when to look there again)
        self._left: tuple[StableHashClient, Queue | None, float] | None = None

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def dead(self) -> bool:
        return self.layout.dead

    @property
    def client(self) -> QueueClient:
        return self.layout.client

    # The settings a caller may change for this queue alone (the Celery transport does).
    @property
    def prefetch(self) -> int:
        return self.layout.prefetch

    @prefetch.setter
    def prefetch(self, value: int) -> None:
        self.layout.prefetch = value

    @property
    def visibility_timeout(self) -> int:
        return self.layout.visibility_timeout

    @visibility_timeout.setter
    def visibility_timeout(self, value: int) -> None:
        self.layout.visibility_timeout = value

    def dead_letters(self) -> "Queue":
        """This queue's dead letters, a queue of DeadLetter JSON documents."""
        dead = Queue(self.name, client=self.client, dead=True)
        dead.visibility_timeout = self.visibility_timeout
        return dead

    # -- the producer -------------------------------------------------------------

    def put(self, body: bytes) -> int:
        return self.producer.put(body)

    def put_many(self, bodies: Sequence[bytes], *, redeliveries: int = 0) -> list[int]:
        return self.producer.put_many(bodies, redeliveries=redeliveries)

    def reserve_in(self, batch: MetaBatch) -> Callable[[list[MetaReply]], None] | None:
        return self.producer.reserve_in(batch)

    # -- the consumer -------------------------------------------------------------
    #
    # While a change of the memcached pool is at its NEW stage (webfarm.core.pool),
    # producers put into the queue on its new server, and a queue whose server
    # changed may still hold messages on its old one: consumers take those
    # first, and each receipt goes back to the queue that issued it (by its
    # generation).

    def claim(self) -> Message | None:
        taken = self._from_leftover(1)
        return taken[0] if taken else self.consumer.claim()

    def claim_many(self, limit: int) -> list[Message]:
        taken = self._from_leftover(limit)
        if len(taken) < limit:
            taken += self.consumer.claim_many(limit - len(taken))
        return taken

    def _from_leftover(self, limit: int) -> list[Message]:
        leftover = self._leftover()
        if leftover is None:
            return []
        try:
            return leftover.claim_many(limit)
        except QueueGone:  # drained and retired there (webfarm/queues/leftovers.py)
            assert self._left is not None
            self._left = (self._left[0], None, time.monotonic() + LEFTOVER_LOOK_AGAIN)
            return []

    def release(self, messages: Sequence[Message] | None = None) -> None:
        leftover = self._leftover()
        if leftover is not None:
            if messages is None:
                leftover.release()
            else:
                theirs, messages = leftover._split(messages, lambda m: m.receipt)
                leftover.release(theirs)
        self.consumer.release(messages)

    def ack(self, receipt: str) -> None:
        self._issuer(receipt).consumer.finisher.ack(receipt)

    def ack_many(self, receipts: Sequence[str]) -> list[str]:
        leftover = self._leftover()
        if leftover is None:
            return self.consumer.finisher.ack_many(receipts)
        theirs, ours = leftover._split(receipts, str)
        lost = leftover.consumer.finisher.ack_many(theirs) if theirs else []
        return lost + self.consumer.finisher.ack_many(ours)

    def reject(self, receipt: str, *, admit: Admit | None = None) -> int | None:
        return self._issuer(receipt).consumer.finisher.reject(receipt, admit=admit)

    def extend(self, receipts: Sequence[str], seconds: int | None = None) -> None:
        leftover = self._leftover()
        if leftover is not None:
            theirs, receipts = leftover._split(receipts, str)
            leftover.consumer.finisher.extend(theirs, seconds)
        self.consumer.finisher.extend(receipts, seconds)

    def bury(self, message: Message, reason: str) -> None:
        self._issuer(message.receipt).consumer.finisher.bury(message, reason)

    def bury_many(self, messages: Sequence[tuple[Message, str]]) -> None:
        leftover = self._leftover()
        if leftover is not None:
            theirs, messages = leftover._split(messages, lambda pair: pair[0].receipt)
            leftover.consumer.finisher.bury_many(theirs)
        self.consumer.finisher.bury_many(messages)

    def _leftover(self) -> "Queue | None":
        if not self.layout.on_main_ring or self.layout.dead:
            return None
        old = leftover_ring()
        if old is None:
            self._left = None
            return None
        now = time.monotonic()
        if self._left is None or self._left[0] is not old or (self._left[1] is None and now >= self._left[2]):
            route = f"q:{self.name}"
            there = Queue(self.name, ring=old) if server_of(route, old) != server_of(route) else None
            if there is not None:
                there.layout.existing_only = True
            # Only a queue that exists there: looking must not start one. A
            # producer a step behind may still make it: looked for again.
            if there is not None and not there.exists():
                there = None
            self._left = (old, there, now + LEFTOVER_LOOK_AGAIN)
        return self._left[1]

    def _split(self, items: Sequence[T], receipt_of: Callable[[T], str]) -> tuple[list[T], list[T]]:
        """(what this queue issued, the rest)."""
        mine: list[T] = []
        rest: list[T] = []
        for item in items:
            (mine if self._issued(receipt_of(item)) else rest).append(item)
        return mine, rest

    def _issued(self, receipt: str) -> bool:
        """Whether this queue issued the receipt: it names its generation."""
        parsed = parse_receipt(receipt)
        if parsed is None:
            return False
        if self.layout.gen is None:
            # Read, never started: looking must not make a queue on the old server.
            raw = self.layout.client.get(self.layout.gen_key())
            return raw is not None and parsed[0] == raw.decode(errors="replace")
        return parsed[0] == self.layout.gen

    def _issuer(self, receipt: str) -> "Queue":
        leftover = self._leftover()
        return leftover if leftover is not None and leftover._issued(receipt) else self

    # -- the inspector ------------------------------------------------------------

    def exists(self) -> bool:
        return self.inspector.exists()

    def stats(self) -> dict[str, int]:
        return self.inspector.stats()

    def holds_nothing(self) -> bool:
        return self.inspector.holds_nothing()

    def peek(self, limit: int, *, unreadable: list[int] | None = None) -> list[Message]:
        return self.inspector.peek(limit, unreadable=unreadable)

    def held_bytes(self) -> int:
        return self.inspector.held_bytes()

    def purge(self) -> int:
        return purging.purge(self.layout)


_local = threading.local()


def thread_queue(name: str) -> Queue:
    """This thread's Queue for putting into `name`, kept between calls: it
    remembers the generation, the stats keys and its reserved indexes, so a
    put in a busy request thread is one round trip, not four. Made afresh
    when the settings change (another memcached, namespace or queue options)."""
    pid, epoch, config = os.getpid(), client_epoch(), get_config()
    queues: dict[str, tuple[int, int, dict, Queue]] = _local.__dict__.setdefault("producers", {})
    kept = queues.get(name)
    if kept is None or kept[:2] != (pid, epoch) or kept[2] is not config:
        kept = queues[name] = (pid, epoch, config, Queue(name))
    return kept[3]
