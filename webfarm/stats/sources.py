"""Where counter values are read: the counters themselves, and each queue's
own in/out counts (kept by the queue on its server, read here as the counter
`queue_messages|direction=in|queue=<name>`).

A raw value comes with the generation it was counted in; the harvester
(webfarm.stats.harvest) treats a new generation, or a value below its watermark, as
memcached having lost the count and started again.
"""

from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.core.counters import GENERATION, REGISTRY, counter_key, is_counter_key, parse_counter_key
from webfarm.core.lists import members
from webfarm.core.tampering import refused
from webfarm.queues.exceptions import QueueError
from webfarm.queues.rings import FarmQueue, farm_queues

# Queue counts have no generation key of their own: a lost count shows as a
# value below the watermark.
QUEUE_GENERATION = "queue"
# "dead": messages moved to the queue's dead letters.
_DIRECTIONS = ("in", "out", "dead")


def listed(client: Any) -> list[str]:
    """Every counter key there is a value for, queues' counts included."""
    # Queue counts are read from the queues themselves, never from the registry.
    keys = [k for k in members(client, REGISTRY, is_counter_key) if not k.startswith("queue_messages|")]
    found, _ = farm_queues()
    for farm_queue in found:
        keys += [counter_key("queue_messages", direction=d, **farm_queue.labels()) for d in _DIRECTIONS]
    return keys


def read(client: Any, keys: list[str]) -> dict[str, tuple[str, int]]:
    """key -> (generation, raw value) for the keys that have a value. Raises
    MemcacheError/OSError (or QueueError) when memcached cannot answer."""
    plain = [k for k in keys if not k.startswith("queue_messages|")]
    found = client.get_many([GENERATION, *(f"c:{k}" for k in plain)]) if plain else {}
    generation = found.get(GENERATION, b"").decode(errors="replace")
    values = {}
    for key in plain:
        raw = found.get(f"c:{key}")
        if raw is None:
            continue
        if not raw.isdigit():  # an incr'd counter is always digits
            refused("counter", f"c:{key}", "not a number")
            continue
        values[key] = (generation, int(raw))
    queues = {found for k in keys if k.startswith("queue_messages|") and (found := _queue_of(k))}
    for farm_queue in sorted(queues, key=lambda q: (q.ring, q.name)):
        try:
            stats = farm_queue.queue().stats()
        except LookupError:  # its ring is gone from the settings
            continue
        except (MemcacheError, OSError, QueueError):
            if not farm_queue.ring:
                raise
            continue  # another ring away stops none of the main ring's counts
        for direction in _DIRECTIONS:
            values[counter_key("queue_messages", direction=direction, **farm_queue.labels())] = (
                QUEUE_GENERATION,
                stats[direction],
            )
    return {k: v for k, v in values.items() if k in keys}


def _queue_of(key: str) -> FarmQueue | None:
    labels = parse_counter_key(key)[1]
    return FarmQueue(labels["queue"], labels.get("ring", "")) if "queue" in labels else None
