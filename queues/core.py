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

from core.client import client_epoch
from queues.conf import get_config
from queues.consuming import Consuming
from queues.finishing import Finishing
from queues.layout import STATS, DeadLetter, Message
from queues.looking import Looking
from queues.producing import Producing
from queues.recovery import Recovery

__all__ = ["STATS", "DeadLetter", "Message", "Queue", "producer"]


class Queue(Producing, Consuming, Recovery, Finishing, Looking):
    """One named queue. Cheap to make; not to be shared between threads.

    dead=True: the queue's dead letters (`dead_letters()` makes it).
    Its parts: queues/layout.py (keys, settings, generation), producing.py,
    consuming.py, recovery.py, finishing.py, looking.py.
    """


_local = threading.local()


def producer(name: str) -> Queue:
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
