"""get_or_set for expensive aggregates, without a stampede.

    totals = get_or_set("dashboard:totals", compute_totals, ttl=60)

The value is kept `stale_for` seconds past its `ttl`. memcached itself elects
who computes, with its meta commands' stale/win flags: one `mg` with N (on a
miss, create a placeholder for `lock_for` seconds and answer W to this caller
alone, Z to the others) and R (when less than `stale_for` is left of the
value's life, answer W to one caller while the others keep getting the
value). The winner computes and stores; the others get the stale value at
once if there is one, or else wait up to `wait` seconds for the winner's
value (and compute it themselves only if it does not come). A hit is one
round trip; a miss or a refresh two, where a lock took four. With memcached
unreachable every caller just computes. Values are JSON (never pickle: what
is in memcached must not be able to run code), and sealed (webfarm.core.seal): a
value someone else put there reads as missing, so callers only ever get back
what `compute` returned.
"""

import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import (
    MetaBatch,
    MetaReply,
    get_client,
    get_flags,
    kept_together,
    meta_get,
    server_client,
)
from webfarm.core.seal import seal, unseal
from webfarm.core.tampering import refused

logger = logging.getLogger(__name__)

POLL = 0.02

# What compute returns; a cached value is its JSON read back (a tuple comes back a list).
T = TypeVar("T")


def get_or_set(
    key: str,
    compute: Callable[[], T],
    ttl: int,
    *,
    stale_for: int | None = None,
    wait: float = 5.0,
    lock_for: int = 60,
) -> T:
    stale_for = ttl if stale_for is None else stale_for
    try:
        value_key = memo_key(key)
        client = server_client(value_key)
        asked = meta_get(client.wire_key(value_key), *get_flags(vivify=lock_for, recache=stale_for))
        reply = client.meta([asked])[0]
        return settle(key, reply, compute, ttl, stale_for=stale_for, wait=wait)
    except (MemcacheError, OSError) as exc:
        logger.warning("get_or_set(%s) without memcached: %s", key, exc)
    return compute()


def ask_in(batch: MetaBatch, key: str, ttl: int, lock_for: int = 60) -> int:
    """get_or_set's one `mg`, riding in the caller's batch; pass the answer
    to settle():

        asked = ask_in(batch, key, ttl)
        value = settle(key, batch.run()[asked], compute, ttl, stale_for=ttl)
    """
    return batch.get(memo_key(key), vivify=lock_for, recache=ttl)


# A value lives on the server its key hashes to on the ring the process
# reads (server_client): through a pool change, the old list's, until every
# process is on the new one, where a miss recomputes it. So the change's
# walk leaves it there: moved, it would leave a tombstone where get_or_set
# reads its value (webfarm.core.client.changing).
MEMO_KEYS = kept_together("memo:")


def memo_key(key: str) -> str:
    return f"{MEMO_KEYS}{key}"


def settle(
    key: str, reply: MetaReply, compute: Callable[[], T], ttl: int, *, stale_for: int, wait: float = 5.0
) -> T:
    """get_or_set's value from the answer to its `mg`: computed and stored
    when memcached elected this caller, else the value, else (another
    caller computing it) waited for."""
    value_key = memo_key(key)
    cached = _value(value_key, reply)
    if cached is not None and not reply.won:
        return cast(T, cached[0])  # fresh, or someone is refreshing it: the stale value will do
    client = server_client(value_key)
    # Ours to compute: a miss or a value past its ttl (memcached said W),
    # or a value someone else planted (refused): nobody is told W for it.
    planted = cached is None and reply.hit and bool(reply.value)
    if reply.won or planted:
        value = compute()
        envelope = json.dumps({"v": value, "fresh_until": time.time() + ttl}).encode()
        client.set(value_key, seal(value_key, envelope, ttl=ttl + stale_for), expire=ttl + stale_for)
        return value
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        time.sleep(POLL)
        cached = _read(client, value_key)
        if cached is not None:
            return cast(T, cached[0])
    logger.warning("get_or_set(%s): gave up waiting for another process; computing", key)
    return compute()


def _value(key: str, reply: MetaReply) -> tuple[Any, float] | None:
    """The value of an mg answer; None for a miss or another caller's placeholder (empty)."""
    if not reply.hit or not reply.value:
        return None
    return _envelope(key, reply.value)


def _read(client: Any, key: str) -> tuple[Any, float] | None:
    raw = client.get(key)
    return _envelope(key, raw) if raw else None


def _envelope(key: str, sealed: bytes) -> tuple[Any, float] | None:
    raw = unseal("memo", key, sealed)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        value, fresh_until = data["v"], float(data["fresh_until"])
    except (ValueError, RecursionError, TypeError, KeyError) as exc:
        refused("memo", key, f"not an envelope: {exc}")
        return None
    return value, fresh_until


def forget(key: str, *, warn: bool = True) -> bool:
    """Drop a value (its data changed): the next caller computes it afresh.
    False when memcached could not be reached: the old value then lives out
    its time to live. A caller that says so itself passes warn=False."""
    try:
        get_client().delete(memo_key(key))
    except (MemcacheError, OSError) as exc:
        if warn:
            logger.warning("get_or_set(%s) could not be forgotten: %s", key, exc)
        return False
    return True
