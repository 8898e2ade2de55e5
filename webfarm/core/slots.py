"""Farm-wide concurrency limits in memcached: "there can be only one" (or n).

A limit of n for a scope is n slot keys, slot:<scope>:0 .. slot:<scope>:n-1.
Taking a slot is an add (exactly one taker wins) with a lease: the key
expires unless its holder renews it, so a holder that crashed cannot keep a
slot for longer than its lease. The value is the holder's id (a job id, a
request id), so only the holder releases it, and a refusal can say who is in
the way.

Taking never blocks. The scopes of one request are looked at together (one
`get_many` per server), a free slot of each is taken in one pipeline of meta
`ms ... ME c` (add, answering the slot's CAS), and the slots are released
with meta `md ... C<cas>`, which deletes a slot only if it is still the one
taken: one round trip, where reading the holder back and deleting took two.
A slot less than half its lease old cannot have been taken by anyone else
(its lease has not run out), so it is released with a noreply delete that
waits for nothing. A wide limit (every scope BLIND_MIN slots or more: votes) is tried without
looking first: a random slot is almost always free. After a lost race the
other free slots are tried, then a few quick retries, then LimitReached.
Slots held by requests turn over in milliseconds, so a scope found full is
worth a retry after a pause; slots held by jobs turn over in seconds or
minutes, so a full one refuses at once (retry_when_full=False).

A scope's slots all live on the one server its name hashes to, so a dead
server stops only the scopes it holds (with a clear SlotsUnavailable), and a
count is never split.
"""

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pymemcache.exceptions import MemcacheError, MemcacheServerError

from webfarm.core.client import (
    MetaBatch,
    ReconnectingClient,
    get_client,
    kept_together,
    server_client,
    server_of,
)

logger = logging.getLogger(__name__)

# Scopes at least this wide are tried without a look first.
BLIND_MIN = 8


class LimitReached(Exception):
    """Every slot of `scope` is held; `holders` hold them."""

    def __init__(self, scope: str, limit: int, holders: list[str]) -> None:
        super().__init__(f"all {limit} slots of {scope} are taken")
        self.scope, self.limit, self.holders = scope, limit, holders


class SlotsUnavailable(Exception):
    """memcached could not be asked: the caller refuses (503) rather than run
    unlimited."""


class SlotsTaken(Exception):
    """A racer took a slot chosen from a look before the caller's batch ran:
    nothing of that batch stands; look again."""


def slot_keys(scope: str, limit: int) -> list[str]:
    return [f"slot:{scope}:{i}" for i in range(limit)]


# A scope's slot keys live on the server of "slot:<scope>".
SLOT_KEYS = kept_together("slot:")


def _route(key: str) -> str:
    """The route of a slot key: slot:<scope>:<i> lives where slot:<scope> hashes."""
    return key.rsplit(":", 1)[0]


def _client(key: str) -> ReconnectingClient:
    """The server of the key's scope."""
    return server_client(_route(key))


@dataclass
class Lease:
    """Slots held by one holder. Renewing and releasing never raise: a holder
    that cannot reach memcached keeps working, and its lease runs out."""

    holder: str
    ttl: int
    keys: list[str] = field(default_factory=list)
    # Each slot's CAS as taken here: released with one conditional delete.
    versions: dict[str, int] = field(default_factory=dict)
    # Until when (monotonic) each slot taken here is surely still ours: half
    # its lease. Nobody can have taken a slot whose lease has not run out, so
    # one this young is deleted without waiting for an answer.
    ours_until: dict[str, float] = field(default_factory=dict)

    def took(self, key: str, version: int) -> None:
        self.keys.append(key)
        self.versions[key] = version
        self.ours_until[key] = time.monotonic() + self.ttl / 2

    def renew(self, ttl: int | None = None, *, still_held: Callable[[], bool] | None = None) -> None:
        """Extend the lease; a slot that vanished (memcached restarted) is
        taken again, unless `still_held` says the holder gave it up: slots
        released by whoever ended the holder's job while this renewal was
        under way stay released."""
        ttl = self.ttl if ttl is None else ttl
        held: bool | None = None
        try:
            for key in self.keys:
                client = _client(key)
                if not client.touch(key, ttl):
                    if held is None:
                        held = still_held() if still_held is not None else True
                    if not held:
                        return
                    client.add(key, self.holder.encode(), expire=ttl)
                    self.versions.pop(key, None)
                    self.ours_until.pop(key, None)
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
            now = time.monotonic()
            batch = MetaBatch()
            for key in self.keys:
                if now < self.ours_until.get(key, 0.0):
                    _client(key).delete(key, noreply=True)
                elif key in self.versions:
                    batch.delete(key, cas=self.versions[key], route=_route(key))
            if batch:
                batch.run()
            # Slots taken elsewhere (a job's, from its record): read the holder back.
            for key in self.keys:
                if key not in self.versions:
                    client = _client(key)
                    if client.get(key) == self.holder.encode():
                        client.delete(key)
        except (MemcacheError, OSError) as exc:
            logger.warning("slots of %s not released (they expire): %s", self.holder, exc)
        self.keys, self.versions, self.ours_until = [], {}, {}


def acquire(
    scopes: Sequence[tuple[str, int]],
    holder: str,
    *,
    ttl: int,
    attempts: int = 3,
    pause: float = 0.05,
    retry_when_full: bool = True,
) -> Lease:
    """One slot in every scope (scope, limit), or none: raises LimitReached
    after `attempts` quick tries, SlotsUnavailable if memcached cannot answer."""
    lease = Lease(holder=holder, ttl=ttl)
    refusal: LimitReached | None = None
    try:
        if all(limit >= BLIND_MIN for _, limit in scopes) and _take_blind(scopes, lease):
            return lease
        for attempt in range(attempts):
            # Look first: a full scope refuses before anything is taken.
            held = _held(scopes)
            refusal = full_scope(scopes, held)
            if refusal is None:
                lost = _take(scopes, held, lease)
                if lost is None:
                    return lease
                # Others took the free slots meanwhile.
                refusal = LimitReached(lost, dict(scopes)[lost], list(held[lost].values()))
            elif not retry_when_full:
                raise refusal
            if attempt < attempts - 1:
                time.sleep(pause * (attempt + 1))
    except (MemcacheError, OSError) as exc:
        lease.release()
        raise SlotsUnavailable(_unavailable(exc)) from exc
    if refusal is None:
        raise ValueError(f"attempts={attempts}: acquire needs one or more")
    raise refusal


def _unavailable(exc: Exception) -> str:
    what = "full" if isinstance(exc, MemcacheServerError) else "unreachable"
    return f"memcached {what}: {exc}"


def look(scopes: Sequence[tuple[str, int]]) -> dict[str, dict[str, str]]:
    """Who holds each scope's slots (one get_many per server for all scopes).
    Raises SlotsUnavailable."""
    try:
        return _held(scopes)
    except (MemcacheError, OSError) as exc:
        raise SlotsUnavailable(f"memcached unreachable: {exc}") from exc


def full_scope(scopes: Sequence[tuple[str, int]], held: dict[str, dict[str, str]]) -> LimitReached | None:
    """The refusal for the first scope a look found full, or None."""
    return next((LimitReached(s, n, list(held[s].values())) for s, n in scopes if len(held[s]) >= n), None)


class Taking:
    """A free slot of each scope, as a look saw them, to be taken in a batch
    of the caller's beside its own writes (a job's record): one round trip
    for both. After the batch ran, `taken(replies)` puts the slots taken
    into the lease and says whether all were."""

    def __init__(
        self, scopes: Sequence[tuple[str, int]], held: dict[str, dict[str, str]], lease: Lease
    ) -> None:
        self.lease = lease
        self.keys = [
            random.choice([key for key in slot_keys(scope, limit) if key not in held[scope]])
            for scope, limit in scopes
        ]
        self._indexes: list[int] = []

    def add_to(self, batch: MetaBatch) -> None:
        holder = self.lease.holder.encode()
        self._indexes = [
            batch.set(key, value=holder, ttl=self.lease.ttl, mode="add", return_cas=True, route=_route(key))
            for key in self.keys
        ]

    def taken(self, replies: list) -> bool:
        every = True
        for key, index in zip(self.keys, self._indexes, strict=True):
            if replies[index].done:
                self.lease.took(key, int(replies[index].flags[b"c"]))
            else:
                every = False
        return every

    def unknown(self) -> None:
        """The batch failed on its way (a connection lost): the slots may or
        may not have been taken. They go into the lease without a CAS, so its
        release reads each back and frees those that are this holder's."""
        _unknown(self.keys, self.lease)


def _take_blind(scopes: Sequence[tuple[str, int]], lease: Lease) -> bool:
    """A random slot of each scope, without looking: True if every one was free."""
    keys = [f"slot:{scope}:{random.randrange(limit)}" for scope, limit in scopes]
    if _add(keys, lease):
        return True
    lease.release()
    return False


def _take(scopes: Sequence[tuple[str, int]], held: dict[str, dict[str, str]], lease: Lease) -> str | None:
    """A free slot of each scope (as the look saw them), in one pipeline;
    where a racer took it first, the scope's other free slots one by one.
    None when every scope has its slot, else the scope that had none left."""
    free = {}
    for scope, limit in scopes:
        keys = [key for key in slot_keys(scope, limit) if key not in held[scope]]
        random.shuffle(keys)  # takers racing for the same first key would mostly lose
        free[scope] = keys
    if _add([keys[0] for keys in free.values()], lease):
        return None
    for scope, keys in free.items():
        if any(_route(key) == f"slot:{scope}" for key in lease.keys):
            continue
        if not any(_add([key], lease) for key in keys[1:]):
            lease.release()
            return scope
    return None


def _add(keys: list[str], lease: Lease) -> bool:
    """Take each slot (meta add, answering its CAS) in one pipeline per server;
    the ones taken go into the lease. True if all were."""
    batch = MetaBatch()
    for key in keys:
        batch.set(
            key, value=lease.holder.encode(), ttl=lease.ttl, mode="add", return_cas=True, route=_route(key)
        )
    try:
        # errors=True: a full memcached (-M) refusing one slot still answers
        # the others, so the ones it stored are known and given back.
        replies = batch.run(errors=True)
    except BaseException:
        _unknown(keys, lease)
        raise
    taken, refused = True, None
    for key, reply in zip(keys, replies, strict=True):
        if reply.done:
            lease.took(key, int(reply.flags[b"c"]))
        else:
            taken = False
            if reply.refused:
                refused = reply
    if refused is not None:
        said = (refused.value or b"").decode(errors="replace")
        raise MemcacheServerError(f"memcached refused a slot: {said}")
    return taken


def _unknown(keys: list[str], lease: Lease) -> None:
    for key in keys:
        if key not in lease.keys:
            lease.keys.append(key)


def _held(scopes: Sequence[tuple[str, int]]) -> dict[str, dict[str, str]]:
    """Who holds each scope's slots: one get_many per server for all the scopes."""
    ring = get_client()
    by_server: dict[str | None, list[tuple[str, int]]] = {}
    for scope, limit in scopes:
        by_server.setdefault(server_of(f"slot:{scope}", ring), []).append((scope, limit))
    held: dict[str, dict[str, str]] = {}
    for together in by_server.values():
        keys = [key for scope, limit in together for key in slot_keys(scope, limit)]
        found = server_client(f"slot:{together[0][0]}").get_many(keys)
        for scope, limit in together:
            held[scope] = {
                key: found[key].decode(errors="replace") for key in slot_keys(scope, limit) if key in found
            }
    return held


def holders(scope: str, limit: int) -> list[str]:
    """Who holds the scope's slots now (dashboard, tests)."""
    try:
        return list(_held([(scope, limit)])[scope].values())
    except (MemcacheError, OSError) as exc:
        raise SlotsUnavailable(f"memcached unreachable: {exc}") from exc
