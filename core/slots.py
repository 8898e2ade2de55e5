"""Farm-wide concurrency limits in memcached: "there can be only one" (or n).

A limit of n for a scope is n slot keys, slot:<scope>:0 .. slot:<scope>:n-1.
Taking a slot is an `add` (exactly one taker wins) with a lease: the key
expires unless its holder renews it, so a holder that crashed cannot keep a
slot for longer than its lease. The value is the holder's id (a job id, a
request id), so only the holder releases it, and a refusal can say who is in
the way.

Taking never blocks: one `get_many` to see the free slots, an `add` for one of
them, a few quick retries, then LimitReached. A scope's slots all live on the
one server its name hashes to, so a dead server stops only the scopes it
holds (with a clear SlotsUnavailable), and a count is never split.
"""

import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pymemcache.exceptions import MemcacheError

from core.client import server_client

logger = logging.getLogger(__name__)


class LimitReached(Exception):
    """Every slot of `scope` is held; `holders` hold them."""

    def __init__(self, scope: str, limit: int, holders: list[str]) -> None:
        super().__init__(f"all {limit} slots of {scope} are taken")
        self.scope, self.limit, self.holders = scope, limit, holders


class SlotsUnavailable(Exception):
    """memcached could not be asked: the caller refuses (503) rather than run
    unlimited."""


def slot_keys(scope: str, limit: int) -> list[str]:
    return [f"slot:{scope}:{i}" for i in range(limit)]


def _client(key: str) -> object:
    """The server of the key's scope (slot:<scope>:<i> routes by slot:<scope>)."""
    return server_client(key.rsplit(":", 1)[0])


@dataclass
class Lease:
    """Slots held by one holder. Renewing and releasing never raise: a holder
    that cannot reach memcached keeps working, and its lease runs out."""

    holder: str
    ttl: int
    keys: list[str] = field(default_factory=list)

    def renew(self, ttl: int | None = None) -> None:
        """Extend the lease; a slot that vanished (memcached restarted) is taken again."""
        ttl = self.ttl if ttl is None else ttl
        try:
            for key in self.keys:
                client = _client(key)
                if not client.touch(key, ttl):
                    client.add(key, self.holder.encode(), expire=ttl)
        except (MemcacheError, OSError) as exc:
            logger.debug("lease of %s not renewed: %s", self.holder, exc)

    def transfer(self, holder: str, ttl: int) -> "Lease":
        """Hand the slots to another holder (a job run again in place of a
        lost one), so nobody can take them in between."""
        try:
            for key in self.keys:
                client = _client(key)
                current = client.get(key)
                if current is None or current == self.holder.encode():
                    client.set(key, holder.encode(), expire=ttl)
        except (MemcacheError, OSError) as exc:
            logger.warning("slots of %s not handed to %s (they expire): %s", self.holder, holder, exc)
        return Lease(holder=holder, ttl=ttl, keys=list(self.keys))

    def release(self) -> None:
        if not self.keys:
            return
        try:
            for key in self.keys:
                client = _client(key)
                if client.get(key) == self.holder.encode():
                    client.delete(key)
        except (MemcacheError, OSError) as exc:
            logger.warning("slots of %s not released (they expire): %s", self.holder, exc)
        self.keys = []


def acquire(
    scopes: Sequence[tuple[str, int]], holder: str, *, ttl: int, attempts: int = 3, pause: float = 0.05
) -> Lease:
    """One slot in every scope (scope, limit), or none: raises LimitReached
    after `attempts` quick tries, SlotsUnavailable if memcached cannot answer."""
    lease = Lease(holder=holder, ttl=ttl)
    try:
        for attempt in range(attempts):
            # Look at every scope first (one get_many each): a full one refuses
            # before anything is taken, so a refusal writes nothing.
            held = {scope: _held(scope, limit) for scope, limit in scopes}
            refusal = next(
                (LimitReached(s, n, list(held[s].values())) for s, n in scopes if len(held[s]) >= n), None
            )
            if refusal is None:
                for scope, limit in scopes:
                    key = _take(scope, limit, holder, ttl, held[scope])
                    if key is None:  # others took the free slots meanwhile
                        refusal = LimitReached(scope, limit, list(_held(scope, limit).values()))
                        break
                    lease.keys.append(key)
                if refusal is None:
                    return lease
                lease.release()
            if attempt < attempts - 1:
                time.sleep(pause * (attempt + 1))
    except (MemcacheError, OSError) as exc:
        lease.release()
        raise SlotsUnavailable(f"memcached unreachable: {exc}") from exc
    raise refusal


def _held(scope: str, limit: int) -> dict[str, str]:
    found = server_client(f"slot:{scope}").get_many(slot_keys(scope, limit))
    return {key: value.decode(errors="replace") for key, value in found.items()}


def _take(scope: str, limit: int, holder: str, ttl: int, held: dict[str, str]) -> str | None:
    free = [key for key in slot_keys(scope, limit) if key not in held]
    random.shuffle(free)  # takers racing for the same first key would mostly lose
    client = server_client(f"slot:{scope}")
    for key in free:
        if client.add(key, holder.encode(), expire=ttl):
            return key
    return None


def holders(scope: str, limit: int) -> list[str]:
    """Who holds the scope's slots now (dashboard, tests)."""
    try:
        return list(_held(scope, limit).values())
    except (MemcacheError, OSError) as exc:
        raise SlotsUnavailable(f"memcached unreachable: {exc}") from exc
