"""What a change of the memcached pool must take off the old servers before
it is done (webfarm.core.poolchange): queues whose server moved. Consumers
drain those at the NEW stage (Queue's claims); their dead letters, which no
consumer takes, are moved here to the queue's new server, and a drained
queue is retired from its old server: its counts added to the new one's,
its keys deleted."""

from webfarm.core.client import StableHashClient, server_of
from webfarm.core.client.changing import namespace_keys
from webfarm.queues.layout import STATS
from webfarm.queues.queue import Queue
from webfarm.queues.registry import known_queues

MOVE_AT_ONCE = 100


def leftovers(old: StableHashClient, final: bool = False) -> list[str]:
    """One line per moved queue still holding messages on its old server;
    those drained are retired. (Drained: no unfinished message from its
    floor on, here or in its dead letters; a floor moves on only at a
    consumer's recovery scan, so the counts alone would say otherwise.)
    final: the change is done, and no process looks there: whatever is
    left of a moved queue is deleted."""
    left = []
    for name in known_queues():
        route = f"q:{name}"
        if server_of(route, old) == server_of(route) or not Queue(name).layout.on_main_ring:
            continue  # not moved: on the same server, or on the queues' mirrors (QUEUES_MIRRORS)
        there = Queue(name, ring=old)
        if final:
            _delete_all(there, old)
            continue
        if not there.exists():
            continue
        dead = there.dead_letters()
        _move_dead_letters(dead, Queue(name).dead_letters())
        waiting = there.peek(1)
        if not waiting and not (dead.exists() and dead.peek(1)):
            _retire(there, Queue(name), old)
        else:
            stats = there.stats()
            left.append(
                f"queue {name}: {stats['ready']} ready, {stats['unfinished']} unfinished on its old server"
            )
    return left


def _move_dead_letters(old: Queue, new: Queue) -> None:
    if not old.exists():
        return  # looking must not start a queue there
    while batch := old.claim_many(MOVE_AT_ONCE):
        new.put_many([message.body for message in batch])
        old.ack_many([message.receipt for message in batch])


def _retire(old: Queue, new: Queue, ring: StableHashClient) -> None:
    """The counts of a drained queue's life on its old server go on on the
    new one, and every key of it there goes (no process uses them now)."""
    counted = old.client.get_many([old.layout.stat_key(what) for what in STATS])
    for what in STATS:
        raw = counted.get(old.layout.stat_key(what))
        if raw is not None and raw.isdigit() and int(raw):
            new.layout.stat(what, int(raw))
    _delete_all(old, ring)


def _delete_all(old: Queue, ring: StableHashClient) -> None:
    server = server_of(f"q:{old.name}", ring)
    keys = [key for _, key, _ in namespace_keys(ring, (f"q:{old.name}:", f"dq:{old.name}:"), on=server)]
    if keys:
        old.client.delete_many(keys, noreply=False)
