"""Emptying a queue: every message dropped, none delivered."""

from webfarm.queues.layout import SCAN_BATCH, Layout, memcached_errors
from webfarm.queues.looking import Inspector


def purge(layout: Layout) -> int:
    """Drop every message of the queue `layout` names: move to a new
    generation, then delete the old entries. Returns how many indexes were
    cleared."""
    with memcached_errors():
        gen = layout.generation()
        stats = Inspector(layout).stats()
        layout.counters_lost(gen, reason="purges")
        cleared = 0
        for start in range(stats["floor"], stats["tail"] + 1, SCAN_BATCH):
            batch = range(start, min(start + SCAN_BATCH, stats["tail"] + 1))
            keys = [layout.key(gen, "m", i) for i in batch] + [layout.key(gen, "c", i) for i in batch]
            layout.client.delete_many(keys, noreply=False)
            cleared += len(batch)
        for key in ("tail", "head", "floor", "scan"):
            layout.client.delete(layout.key(gen, key), noreply=False)
        return cleared
