"""Which queues exist, for the dashboard and the counter harvester.

A queue lists itself the first time a process uses each of its generations, so
a list lost with memcached fills again as queues start their new generation.
Listing is best effort: a queue that cannot list itself still works.
"""

import os

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import StableHashClient, client_epoch, get_client
from webfarm.core.lists import add_member, members, remove_members
from webfarm.queues.exceptions import InvalidQueueName
from webfarm.queues.names import validate_name

REGISTRY = "q:registry"
_listed: set[tuple[int, int, int, str, str]] = set()


def register(name: str, generation: str, ring: StableHashClient | None = None) -> None:
    """List `name` on the ring it lives on (the main one unless given)."""
    slot = (os.getpid(), client_epoch(), id(ring), name, generation)
    if slot in _listed:
        return
    try:
        client = get_client() if ring is None else ring
        if name not in members(client, REGISTRY, is_queue_name):
            add_member(client, REGISTRY, name)  # two at once list it twice; readers dedupe
        _listed.add(slot)
    except (MemcacheError, OSError):
        pass


def known_queues(ring: StableHashClient | None = None) -> list[str]:
    """Every queue used on the ring (the main one unless given) since
    memcached last lost the list. Raises MemcacheError/OSError when memcached
    is unreachable."""
    return members(get_client() if ring is None else ring, REGISTRY, is_queue_name)


def unregister(names: set[str]) -> None:
    """Take queues off the list (the HTTP front forgetting idle ones)."""
    remove_members(get_client(), REGISTRY, names)
    for slot in [slot for slot in _listed if slot[3] in names]:
        _listed.discard(slot)


def is_queue_name(name: str) -> bool:
    try:
        validate_name(name)
    except InvalidQueueName:
        return False
    return True
