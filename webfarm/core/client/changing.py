"""The ring while the memcached pool changes from one list of servers to
another: a key whose server differs between the two (a moving key) keeps
one home that every process agrees on, whichever of the two rings each
process is on, and whichever phase of the change it has reached.

The old server of a moving key is its arbiter for the whole change. Every
process asks it first: a value there is the key's value; a tombstone there
says the key lives on its new server now; a miss means there is no key
(followers) or that it may have been made on the new server (leaders).

- Followers (the first phase) make new keys on the old server, as a process
  of the old ring does, and follow tombstones. They can run beside
  processes that know nothing of the change, because until a leader exists
  there is no tombstone.
- Leaders (the second phase) make new keys on the new server, after a
  tombstone on the old one claims the key for it: the old server's add
  arbitrates between a follower making the key there and a leader making it
  on the new one. A leader's write over a value on the old server moves it:
  the old value is swapped for a tombstone by CAS, then the new value is
  written to the new server.
- migrate() moves every value left on the old servers the same way (not
  the keys kept together by a group, hashing.kept_together: a queue's
  entries move with their queue). Run
  once every process leads, it leaves the old servers holding tombstones
  only, and processes of the new ring alone can then start: they read the
  new server, where every value is.

A tombstone carries the value it replaced and when: a reader that finds a
tombstone and no value on the new server in the moment between a move's
two writes takes the carried value there (an add, which never overwrites).
After FRESH seconds a carried value is stale and is never used.

Keys nginx reads (read_by_nginx: the public progress documents) take no
part in this: nginx cannot follow a tombstone, and would serve it. A moving
one goes dark for the change: a write deletes it on both servers (an add,
on the server where a process of a plain ring beside this phase publishes
it: the old one beside followers, the new one beside leaders), a read
misses, so nginx asks Django, which reads the job's record through this
ring. Processes at NEW publish on the new server again.

No writer puts a value on the old server over a tombstone: followers write
there by CAS or add only, leaders never. So a tombstone, once written, is
the end of the key's life on its old server until the key is deleted
(a delete deletes it on both servers).
"""

import base64
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import unquote_to_bytes

from pymemcache.exceptions import MemcacheClientError

from webfarm.core.client.hashing import is_kept_together, is_read_by_nginx
from webfarm.core.client.protocol import server_address
from webfarm.core.client.ring import StableHashClient

# A tombstone's value: this, when it was written (ms), ":", the lifetime its
# value was written with (s), ":", that value.
TOMBSTONE = b"\x00webfarm-moved:"
# Seconds a tombstone's carried value may stand in for a new server's miss.
FRESH = 10.0
# memcached reads a lifetime longer than 30 days as a Unix time.
MAX_RELATIVE_EXPIRE = 30 * 24 * 3600
# Tries of a write that lost a race for the old server's value.
TRIES = 8
# Keys a walk names of those it moved.
MOVED_NAMED = 10


class Phase(StrEnum):
    FOLLOW = "follow"
    LEAD = "lead"


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def tombstone(value: bytes | str, expire: int) -> bytes:
    return b"%s%d:%d:%s" % (TOMBSTONE, int(time.time() * 1000), expire, _bytes(value))


def is_tombstone(value: object) -> bool:
    return isinstance(value, bytes) and value.startswith(TOMBSTONE)


def carried(value: bytes, now: float | None = None) -> tuple[bytes, int] | None:
    """The value a fresh tombstone carries and its lifetime, or None once
    it is stale, or when it is not one a writer of ours made: memcached is
    shared, and a planted one from the future would stay fresh for ever, or
    carry a lifetime memcached reads as a date."""
    stamp, _, rest = value[len(TOMBSTONE) :].partition(b":")
    expire, _, carried_value = rest.partition(b":")
    if not (stamp.isdigit() and expire.isdigit() and len(stamp) <= 16 and len(expire) <= 8):
        return None
    age = (time.time() if now is None else now) - int(stamp) / 1000
    if not -FRESH < age < FRESH or int(expire) > MAX_RELATIVE_EXPIRE:
        return None
    return carried_value, int(expire)


OLD, NEW = 0, 1


def _token(cas: bytes, side: int) -> bytes:
    """A CAS token that says which server issued it: still the digits of an
    integer, as callers that put it in a meta command (C<cas>) expect."""
    return b"%d" % (int(cas) * 2 + side)


def split_token(token: bytes | int) -> tuple[bytes, int]:
    cas, side = divmod(int(token), 2)
    return b"%d" % cas, side


class RaceLost(MemcacheClientError):
    """A write lost the race for a moving key's old value TRIES times."""


class ChangingRing:
    """The two rings of a change, as one client of pymemcache's API for
    single keys: get, gets, get_many, gets_many, set, add, cas, incr, decr,
    delete, delete_many, touch. A key on the same server in both rings goes
    there as before; a moving key follows the rules above. A moving key's
    CAS token says which of its two servers issued it (_token)."""

    def __init__(self, old: StableHashClient, new: StableHashClient, phase: Phase) -> None:
        self.old, self.new, self.phase = old, new, phase

    def moving(self, key: str) -> bool:
        return self.old.hasher.get_node(key) != self.new.hasher.get_node(key)

    def dark(self, key: str) -> bool:
        """A moving key nginx reads: neither kept nor read during the change."""
        return is_read_by_nginx(key) and self.moving(key)

    def _put_out(self, key: str) -> None:
        self.old.delete(key, noreply=False)
        self.new.delete(key, noreply=False)

    def __getattr__(self, name: str) -> Any:
        if name in ("old", "new", "phase"):
            raise AttributeError(name)  # not set yet: no recursion through self.old
        # What callers route to one server themselves (server_of: queues,
        # limit slots, meta batches) stays on the old ring's server for the
        # change's duration.
        return getattr(self.old, name)

    # -- reading -----------------------------------------------------------------

    def gets(self, key: str) -> tuple[Any, bytes | None]:
        if not self.moving(key):
            return self.new.gets(key)
        if is_read_by_nginx(key):
            return None, None
        value, token = self.old.gets(key)
        if value is not None and not is_tombstone(value):
            return value, _token(token, OLD)
        if value is None and self.phase is Phase.FOLLOW:
            return None, None
        found, token = self.new.gets(key)
        if found is None and is_tombstone(value):
            found, token = self._restored(key, value)
        return (found, _token(token, NEW)) if found is not None else (None, None)

    def get(self, key: str, default: Any = None) -> Any:
        value = self.gets(key)[0] if self.moving(key) else self.new.get(key)
        return default if value is None else value

    def gets_many(self, keys: Iterable[str]) -> dict[str, tuple[Any, bytes]]:
        keys = [k for k in keys if not self.dark(k)]
        moving = [k for k in keys if self.moving(k)]
        found: dict[str, tuple[Any, bytes]] = {}
        if len(moving) < len(keys):
            staying = set(keys).difference(moving)
            found.update(self.new.gets_many([k for k in keys if k in staying]))
        if not moving:
            return found
        follow: dict[str, bytes | None] = {}
        for key, (value, token) in self.old.gets_many(moving).items():
            if is_tombstone(value):
                follow[key] = value
            else:
                found[key] = (value, _token(token, OLD))
        if self.phase is Phase.LEAD:
            follow.update({k: None for k in moving if k not in found and k not in follow})
        if follow:
            on_new = self.new.gets_many(list(follow))
            for key, stone in follow.items():
                value, token = on_new.get(key, (None, None))
                if value is None and stone is not None:
                    value, token = self._restored(key, stone)
                if value is not None:
                    found[key] = (value, _token(token, NEW))
        return found

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        return {key: value for key, (value, _) in self.gets_many(keys).items()}

    def _restored(self, key: str, stone: bytes) -> tuple[Any, bytes | None]:
        """The new server missed a key whose tombstone is fresh: its move is
        between its two writes. The carried value goes there (never over a
        value someone wrote meanwhile), then is read back with its CAS."""
        fresh = carried(stone)
        if fresh is None:
            return None, None
        self.new.add(key, fresh[0], expire=fresh[1], noreply=False)
        return self.new.gets(key)

    # -- writing -----------------------------------------------------------------

    def cas(self, key: str, value: Any, cas: bytes, expire: int = 0, noreply: bool = False) -> bool | None:
        if not self.moving(key):
            return self.new.cas(key, value, cas, expire=expire, noreply=noreply)
        if is_read_by_nginx(key):
            self._put_out(key)
            return True
        token, side = split_token(cas)
        if side == NEW:
            return self.new.cas(key, value, token, expire=expire, noreply=False)
        if self.phase is Phase.FOLLOW:
            return self.old.cas(key, value, token, expire=expire, noreply=False)
        # A leader's write over an old value moves it.
        if not self.old.cas(key, tombstone(value, expire), token, expire=expire, noreply=False):
            return False
        self._second_write(key, value, expire)
        return True

    def set(self, key: str, value: Any, expire: int = 0, noreply: bool | None = None) -> bool:
        if not self.moving(key):
            return self.new.set(key, value, expire=expire, noreply=noreply)
        if is_read_by_nginx(key):
            self._put_out(key)
            return True
        for _ in range(TRIES):
            found, token = self.old.gets(key)
            if is_tombstone(found):
                return self.new.set(key, value, expire=expire, noreply=False)
            if self.phase is Phase.FOLLOW:
                done = (
                    self.old.add(key, value, expire=expire, noreply=False)
                    if found is None
                    else self.old.cas(key, value, token, expire=expire, noreply=False)
                )
                if done:
                    return True
                continue
            claimed = (
                self.old.add(key, tombstone(value, expire), expire=expire, noreply=False)
                if found is None
                else self.old.cas(key, tombstone(value, expire), token, expire=expire, noreply=False)
            )
            if claimed:
                self._second_write(key, value, expire)
                return True
        raise RaceLost(f"set {key!r}: the old server's value changed {TRIES} times under it")

    def _second_write(self, key: str, value: Any, expire: int) -> None:
        """A move's write on the new server, after its tombstone: an add. A
        value already there came from the tombstone (a reader restored it)
        or from a writer after it; either way it is newer than nothing, and
        a set would throw away a writer's update made on the restored value."""
        self.new.add(key, value, expire=expire, noreply=False)

    def add(self, key: str, value: Any, expire: int = 0, noreply: bool | None = None) -> bool:
        if not self.moving(key):
            return self.new.add(key, value, expire=expire, noreply=noreply)
        if is_read_by_nginx(key):
            # Not stored, and put out where a process on a plain ring may
            # have published it: where two stages meet, one not yet following
            # (beside followers) writes the old server, one already at NEW
            # (beside leaders) the new one. Left there, a document older than
            # the record this add follows would be served (by nginx, by a web
            # node at NEW) until it lapsed.
            side = self.old if self.phase is Phase.FOLLOW else self.new
            side.delete(key, noreply=False)
            return False
        for _ in range(TRIES):
            first = value if self.phase is Phase.FOLLOW else tombstone(value, expire)
            if self.old.add(key, first, expire=expire, noreply=False):
                if self.phase is Phase.FOLLOW:
                    return True
                # Won on the old server. A reader may have put the value the
                # tombstone carries (ours) on the new one before us.
                return bool(
                    self.new.add(key, value, expire=expire, noreply=False)
                    or self.new.get(key) == _bytes(value)
                )
            found = self.old.get(key)
            if found is None:
                continue  # deleted (or expired) since: try again
            if not is_tombstone(found):
                return False
            if self.new.get(key) is None:
                self._restored(key, found)
            return self.new.add(key, value, expire=expire, noreply=False)
        raise RaceLost(f"add {key!r}: the old server's key came and went {TRIES} times")

    def incr(self, key: str, value: int, noreply: bool = False) -> int | None:
        return self._arithmetic("incr", key, value)

    def decr(self, key: str, value: int, noreply: bool = False) -> int | None:
        return self._arithmetic("decr", key, value)

    def _arithmetic(self, verb: str, key: str, delta: int) -> int | None:
        if not self.moving(key):
            counted: int | None = getattr(self.new, verb)(key, delta, noreply=False)
            return counted
        try:
            # A number on the old server is the key's value: counted there
            # (migrate() moves it later).
            result: int | None = getattr(self.old, verb)(key, delta, noreply=False)
        except MemcacheClientError:  # not a number: a tombstone, or a caller's mistake
            stone = self.old.get(key)
            if not is_tombstone(stone):
                raise
            if self.new.get(key) is None:
                self._restored(key, stone)
            restored: int | None = getattr(self.new, verb)(key, delta, noreply=False)
            return restored
        if result is not None or self.phase is Phase.FOLLOW:
            return result
        after: int | None = getattr(self.new, verb)(key, delta, noreply=False)
        return after

    def touch(self, key: str, expire: int = 0, noreply: bool | None = None) -> bool:
        if not self.moving(key):
            return self.new.touch(key, expire=expire, noreply=noreply)
        if is_read_by_nginx(key):
            return False
        found = self.old.get(key)
        if found is not None and not is_tombstone(found):
            return self.old.touch(key, expire=expire, noreply=False)
        if found is None and self.phase is Phase.FOLLOW:
            return False
        if self.new.touch(key, expire=expire, noreply=False):
            return True
        # Between a move's two writes: the carried value first, then the touch.
        if found is None or self._restored(key, found)[0] is None:
            return False
        return self.new.touch(key, expire=expire, noreply=False)

    def delete(self, key: str, noreply: bool | None = None) -> bool:
        if not self.moving(key):
            return self.new.delete(key, noreply=noreply)
        # Both servers: the tombstone goes with the value, and the key is new again.
        on_old = self.old.delete(key, noreply=False)
        return bool(self.new.delete(key, noreply=False) or on_old)

    def set_many(self, values: dict[str, Any], expire: int = 0, noreply: bool | None = None) -> list[str]:
        """pymemcache's: the keys that failed (none: a failure raises)."""
        staying = {key: value for key, value in values.items() if not self.moving(key)}
        failed = self.new.set_many(staying, expire=expire, noreply=noreply) if staying else []
        for key, value in values.items():
            if key not in staying:
                self.set(key, value, expire=expire)
        return [key.decode() if isinstance(key, bytes) else key for key in failed]

    def delete_many(self, keys: Iterable[str], noreply: bool | None = None) -> bool:
        for key in keys:
            self.delete(key, noreply=noreply)
        return True


# -- moving what is left -----------------------------------------------------------


@dataclass
class Moved:
    """What one walk over the old servers did."""

    moved: int = 0  # values swapped for tombstones and written to their new server
    tombstones: int = 0  # keys already moved (or made on the new server)
    stayed: int = 0  # keys of the namespace whose server does not change
    lost_races: int = 0  # keys whose value kept changing: the next walk moves them
    dark: int = 0  # keys nginx reads, deleted (they are written again after the change)
    keys: list[str] = field(default_factory=list)  # the first few moved, to name them


def migrate(ring: ChangingRing) -> Moved:
    """Move every value of a moving key still on its old server, as a
    leader's write would: the old value swapped for a tombstone by CAS, then
    added on the new server (a value a leader wrote there first stays). Run
    it when every process leads: then nothing puts a value back, and one
    walk leaves the old servers with tombstones only."""
    walked = Moved()
    for node, key, expires in namespace_keys(ring.old):
        if not ring.moving(key) or ring.old.hasher.get_node(key) != node or is_kept_together(key):
            walked.stayed += 1
            continue
        if is_read_by_nginx(key):
            ring.old.delete(key, noreply=False)  # dark for the change: nginx asks Django
            walked.dark += 1
            continue
        for _ in range(TRIES):
            value, token = ring.old.gets(key)
            if value is None or is_tombstone(value):
                walked.tombstones += value is not None
                break
            expire = 0 if expires < 0 else max(1, int(expires - time.time()))
            if ring.old.cas(key, tombstone(value, expire), token, expire=expire, noreply=False):
                ring.new.add(key, value, expire=expire, noreply=False)
                walked.moved += 1
                if len(walked.keys) < MOVED_NAMED:
                    walked.keys.append(key)
                break
        else:
            walked.lost_races += 1
    return walked


def clear_tombstones(old: StableHashClient) -> int:
    """Delete the tombstones a change left on `old`'s servers, once no
    process reads them (every process is on the new ring): how many."""
    cleared = 0
    for _, key, _ in namespace_keys(old):
        value = old.get(key)
        if is_tombstone(value) and old.delete(key, noreply=False):
            cleared += 1
    return cleared


@dataclass
class Emptied:
    deleted: int = 0
    late: list[str] = field(default_factory=list)  # found again after the first pass: written meanwhile
    clean: bool = False  # no key came for the quiet time asked


def empty(ring: StableHashClient, *, quiet: float = 3.0, limit: float = 30.0, pause: float = 0.5) -> Emptied:
    """Delete every key of the ring's namespace on its servers (servers a
    change removed, once no process uses them), listing them again until
    no key has come for `quiet` seconds (at most `limit` seconds in all). A
    key found again was written after the listing before: a process still
    uses the server, or the network delivered a write late (a host cut off
    meanwhile, its path healed)."""
    emptied = Emptied()
    namespace = ring.default_kwargs.get("key_prefix", b"")
    began = last_found = time.monotonic()
    first = True
    while True:
        by_node: dict[str, list[str]] = {}
        unaddressable: dict[str, list[bytes]] = {}
        for node, full, _ in namespace_items(ring):
            key = addressable(full[len(namespace) :])
            if key is None:
                unaddressable.setdefault(node, []).append(full)
            else:
                by_node.setdefault(node, []).append(key)
        now = time.monotonic()
        if by_node or unaddressable:
            last_found = now
            if not first:
                emptied.late += sorted(key for keys in by_node.values() for key in keys)
                emptied.late += sorted(repr(full) for keys in unaddressable.values() for full in keys)
            for node, keys in by_node.items():
                for start in range(0, len(keys), 500):
                    ring.clients[node].delete_many(keys[start : start + 500], noreply=False)
            for node, fulls in unaddressable.items():
                delete_by_bytes(server_address(ring.clients[node].server), fulls)
            emptied.deleted += sum(map(len, by_node.values())) + sum(map(len, unaddressable.values()))
        elif now - last_found >= quiet:
            emptied.clean = True
            return emptied
        if now - began >= limit:
            return emptied
        first = False
        time.sleep(pause)


def namespace_keys(
    ring: StableHashClient, start: str | tuple[str, ...] = "", *, on: str | None = None
) -> Iterator[tuple[str, str, int]]:
    """(server, key without the namespace, expiry as Unix time or -1) of
    every item of the ring's namespace on each of its servers (on `on`
    alone, if given), whose key starts with `start` (or one of them). Keys
    no client can name (control bytes, not UTF-8: planted through a binary
    command) are not the farm's and are left out: empty() deletes them."""
    cut = len(ring.default_kwargs.get("key_prefix", b""))
    for node, full, expires in namespace_items(ring, start, on=on):
        key = addressable(full[cut:])
        if key is not None:
            yield node, key, expires


def namespace_items(
    ring: StableHashClient, start: str | tuple[str, ...] = "", *, on: str | None = None
) -> Iterator[tuple[str, bytes, int]]:
    """(server, whole key as bytes, expiry) of every item of the ring's
    namespace, as the server lists it, whatever bytes its key holds."""
    namespace = ring.default_kwargs.get("key_prefix", b"")
    starts = (start,) if isinstance(start, str) else start
    prefix = tuple(namespace + s.encode() for s in starts)
    for node, client in ring.clients.items():
        if on is not None and node != on:
            continue
        for full, expires in _listing(server_address(client.server)):
            if full.startswith(prefix):
                yield node, full, expires


def addressable(key: bytes) -> str | None:
    """The key as the farm's clients name it, or None for one they cannot
    (anything but printable ASCII: the farm writes no other key)."""
    return key.decode() if key and all(0x21 <= byte <= 0x7E for byte in key) else None


def delete_by_bytes(address: str, keys: list[bytes]) -> None:
    """Delete keys whatever bytes they hold: the meta delete with the key in
    base64 (`md <key> b q`), then a no-op to read the errors up to. Raises
    MemcacheClientError on a refusal."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=30) as sock:
        commands = b"".join(b"md %s b q\r\n" % base64.b64encode(key) for key in keys)
        sock.sendall(commands + b"mn\r\n")
        replies = b""
        while not replies.endswith(b"MN\r\n"):
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise MemcacheClientError(f"{address}: closed before deleting {len(keys)} keys")
            replies += chunk
        refused = [line for line in replies.split(b"\r\n") if line and line not in (b"MN", b"NF")]
        if refused:
            raise MemcacheClientError(f"{address}: refused a delete: {refused[0].decode(errors='replace')}")


def _listing(address: str) -> Iterator[tuple[bytes, int]]:
    """Every live item of one server, from `lru_crawler metadump hash`: a
    walk of the hash table. The walk of the LRUs (`metadump all`) can miss
    an item that memcached moves from one LRU to another meanwhile: a pool
    change that walked a shrink twice that way left a record on the old
    server both times. A memcached older than 1.6.9 has no hash walk, and is
    walked by its LRUs."""
    try:
        yield from _metadump(address, b"hash")
    except _NoHashWalk:
        yield from _metadump(address, b"all")


class _NoHashWalk(Exception):
    pass


def _metadump(address: str, which: bytes) -> Iterator[tuple[bytes, int]]:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=30) as sock:
        sock.sendall(b"lru_crawler metadump %s\r\n" % which)
        buffered = b""
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                line = line.rstrip(b"\r")
                if line == b"END":
                    return
                if line.startswith(b"BADCLASS") and which == b"hash":
                    raise _NoHashWalk
                if line.startswith((b"BUSY", b"ERROR", b"BADCLASS")):
                    raise MemcacheClientError(f"{address}: metadump refused: {line.decode(errors='replace')}")
                fields = dict(part.split(b"=", 1) for part in line.split(b" ") if b"=" in part)
                if b"key" in fields:
                    yield unquote_to_bytes(fields[b"key"]), int(fields.get(b"exp", b"-1"))
