"""Counts over a window, farm-wide: how many times something happened to a
name (a username, an address) since the first time, for `window` seconds.

A count is one memcached key per name, made by the first event with the
window as its lifetime and incremented after: it ends a window after its
first event, never later. The names are hashed (anyone may type any string
as a username or an e-mail address). Someone who can write memcached can
raise a count (refusals until it lapses) or drop it (a few more tries); a
count that is not a number is started again from this event, so planting
one does not switch counting off. memcached unreachable: nothing is
counted, nothing refused.
"""

import hashlib
import logging

from pymemcache.exceptions import MemcacheClientError, MemcacheError

from webfarm.core.client import get_client

logger = logging.getLogger(__name__)


def digest(value: str) -> str:
    return hashlib.blake2b(value.encode(errors="replace"), digest_size=12).hexdigest()


def reached(keys: list[str], limits: list[int]) -> bool:
    """Whether any key's count has reached its limit (a count that is not a
    number, planted, counts as none)."""
    try:
        found = get_client().get_many(keys)
    except (MemcacheError, OSError) as exc:
        logger.debug("counts not read: %s", exc)
        return False
    for key, limit in zip(keys, limits, strict=True):
        raw = found.get(key)
        if raw is not None and raw.isdigit() and int(raw) >= limit:
            return True
    return False


def count(keys: list[str], window: int) -> list[int]:
    """One more event under each key; the counts after it (0 where memcached
    did not answer)."""
    client = get_client()
    counts = []
    for key in keys:
        try:
            try:
                counted = client.incr(key, 1)
            except MemcacheClientError:  # not a number: written by someone else
                client.set(key, b"1", expire=window, noreply=False)
                counted = 1
            if counted is None and not client.add(key, b"1", expire=window, noreply=False):
                counted = client.incr(key, 1)  # another process made it a moment ago
            counts.append(1 if counted is None else int(counted))
        except (MemcacheError, OSError) as exc:
            logger.debug("event not counted under %s: %s", key, exc)
            counts.append(0)
    return counts
