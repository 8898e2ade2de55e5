"""Two memcached servers kept as mirrors for the queues (docs/queue.md, "Mirrors").

`MirroredClient` stands in for the plain client a Queue uses. Reads and the
counters' `incr` go to the first server in sync (the sequencer); the counter's
new value is then copied to the other. Every write goes to both. The
sequencer's answer to an `add` is the one that counts, so the add-arbitrated
races of the queue keep working; if the sequencer dies, the other server takes
over, and a counter that lags there only costs producers a retry (`add` never
overwrites an entry).

Which server is in sync is kept in memcached itself, so every process agrees:

    mirror:member      on each server: b"in-sync", or b"catching-up" while a
                       repair copies data to it (written to, not read from); a
                       restarted server has neither, so it is out; b"stale" on
                       one that came back with old data (never restarted)
    mirror:down:<i>    on a survivor: server i failed a write here; it stays out
                       (even if it answers again with stale data) until repaired

A process reads these at most every CHECK_EVERY seconds. `repair()` (the
`repair_mirrors` command, also a periodic task) brings a returned server back.
"""

import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import ReconnectingClient as Client
from webfarm.core.client import client_options, parse_servers
from webfarm.queues.conf import get_config
from webfarm.queues.exceptions import is_full

logger = logging.getLogger(__name__)

MEMBER = "mirror:member"
IN_SYNC = b"in-sync"
CATCHING_UP = b"catching-up"
STALE = b"stale"
REGISTRY = "mirror:queues"
CHECK_EVERY = 1.0
COPY_BATCH = 200


def down_key(index: int) -> str:
    return f"mirror:down:{index}"


class NoMirrorInSync(MemcacheError):
    """Neither server can be read from: the queues are unavailable."""


class MirroredClient:
    """The subset of pymemcache's Client that Queue uses, over two servers."""

    def __init__(self, servers: list[tuple[str, int]], **options: Any) -> None:
        self.clients = [Client(server, **options) for server in servers]
        self._readable = [False] * len(self.clients)
        self._writable = [False] * len(self.clients)
        self._checked = -CHECK_EVERY

    # -- membership ------------------------------------------------------------

    def membership(self) -> list[bytes | None]:
        """Each server's marker, None when it has none, b"" when unreachable."""
        markers: list[bytes | None] = []
        downs: set[int] = set()
        for client in self.clients:
            try:
                found = client.get_many([MEMBER, *(down_key(i) for i in range(len(self.clients)))])
            except (MemcacheError, OSError):
                markers.append(b"")
                continue
            markers.append(found.get(MEMBER))
            downs.update(i for i in range(len(self.clients)) if down_key(i) in found)
        if all(m is None for m in markers):
            # A new pair (or both restarted: nothing to lose): start in sync.
            for client in self.clients:
                client.set(MEMBER, IN_SYNC, noreply=False)
            markers = [IN_SYNC] * len(self.clients)
        for i in downs:
            if markers[i] in (IN_SYNC, CATCHING_UP):
                # Flagged down, yet it answers: it was cut off, paused or hung,
                # not restarted, and kept its old data. Mark it out on itself
                # too, so it stays out even if the server holding the flag
                # dies, until a repair brings it up to date.
                with suppress(MemcacheError, OSError):
                    self.clients[i].set(MEMBER, STALE, noreply=False)
                markers[i] = STALE
        self._readable = [m == IN_SYNC and i not in downs for i, m in enumerate(markers)]
        self._writable = [m in (IN_SYNC, CATCHING_UP) and i not in downs for i, m in enumerate(markers)]
        self._checked = time.monotonic()
        return markers

    def _refresh(self) -> None:
        if time.monotonic() - self._checked >= CHECK_EVERY:
            self.membership()

    def _primary(self) -> int:
        self._refresh()
        for i, ok in enumerate(self._readable):
            if ok:
                return i
        raise NoMirrorInSync("no mirror of the queues is in sync")

    def _fail(self, index: int, exc: Exception) -> None:
        """Take server `index` out, for every process: flag it on the others."""
        logger.warning(
            "queue mirror %s failed, taken out until repaired: %s", self.clients[index].server, exc
        )
        self._readable[index] = self._writable[index] = False
        for i, client in enumerate(self.clients):
            if i != index:
                with suppress(MemcacheError, OSError):
                    client.set(down_key(index), str(time.time()).encode(), noreply=False)

    @contextmanager
    def _guard(self, index: int) -> Iterator[None]:
        try:
            yield
        except (MemcacheError, OSError) as exc:
            if not is_full(exc):  # full under -M is an answer, not a failure
                self._fail(index, exc)
            raise

    def _read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        for _ in range(len(self.clients)):
            index = self._primary()
            try:
                with self._guard(index):
                    return getattr(self.clients[index], method)(*args, **kwargs)
            except (MemcacheError, OSError) as exc:
                if is_full(exc):
                    raise
                continue
        raise NoMirrorInSync("no mirror of the queues answered")

    def _write(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Apply on the sequencer, then on every other writable server; the
        sequencer's answer is the one returned."""
        result = self._read(method, *args, **kwargs)
        self._others(method, *args, **kwargs)
        return result

    def _others(self, method: str, *args: Any, **kwargs: Any) -> None:
        primary = self._primary()
        for i, client in enumerate(self.clients):
            if i == primary or not self._writable[i]:
                continue
            try:
                with self._guard(i):
                    getattr(client, method)(*args, **kwargs)
            except (MemcacheError, OSError) as exc:
                if is_full(exc):
                    self._fail(i, exc)  # refused on one side only: the copies now differ

    # -- the Client API Queue uses --------------------------------------------------

    def get(self, key: str, default: Any = None) -> Any:
        return self._read("get", key, default)

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        found: dict[str, Any] = self._read("get_many", list(keys))
        return found

    def gets(self, key: str) -> Any:
        return self._read("gets", key)

    def gets_many(self, keys: Iterable[str]) -> dict[str, tuple[Any, Any]]:
        found: dict[str, tuple[Any, Any]] = self._read("gets_many", list(keys))
        return found

    def cas_many(self, items: list[tuple[str, bytes, int]], expire: int = 0) -> list[bool | None]:
        """cas on the sequencer (its versions are the ones receipts carry); what
        it stored is copied to the other server with a plain set."""
        results: list[bool | None] = self._read("cas_many", items, expire)
        stored = {key: value for (key, value, _), ok in zip(items, results, strict=True) if ok}
        if stored:
            self._others("set_many", stored, expire=expire, noreply=False)
        return results

    def incr(self, key: str, value: int, noreply: bool = False) -> int | None:
        result: int | None = self._read("incr", key, value)
        if result is not None:
            # The standby's counter may lag behind in a race; after a failover
            # that only costs producers a retry, since add never overwrites.
            self._others("set", key, str(result).encode(), noreply=False)
        return result

    def cas(self, key: str, value: bytes, cas: Any, expire: int = 0, noreply: bool = False) -> Any:
        result = self._read("cas", key, value, cas, expire=expire, noreply=False)
        if result:
            self._others("set", key, value, expire=expire, noreply=False)
        return result

    def add(self, key: str, value: bytes, expire: int = 0, noreply: bool = False) -> Any:
        return self._write("add", key, value, expire=expire, noreply=False)

    def set(self, key: str, value: bytes, expire: int = 0, noreply: bool = False) -> Any:
        return self._write("set", key, value, expire=expire, noreply=False)

    def set_many(self, values: dict, expire: int = 0, noreply: bool = False) -> Any:
        return self._write("set_many", values, expire=expire, noreply=False)

    def delete(self, key: str, noreply: bool = False) -> Any:
        return self._write("delete", key, noreply=False)

    def delete_many(self, keys: Iterable[str], noreply: bool = False) -> Any:
        return self._write("delete_many", list(keys), noreply=False)

    def add_many(self, values: dict[str, bytes], expire: int = 0) -> dict[str, bool]:
        stored: dict[str, bool] = self._write("add_many", values, expire)
        return stored

    def pipeline(self, commands: list[bytes], name: bytes) -> list[bytes]:
        replies: list[bytes] = self._write("pipeline", commands, name)
        return replies

    def add_then_check(
        self, values: dict[str, bytes], ttl: int, existing: str
    ) -> tuple[dict[str, bool], bool]:
        answer: tuple[dict[str, bool], bool] = self._write("add_then_check", values, ttl, existing)
        return answer

    def touch_many(self, keys: list[str], expire: int) -> None:
        self._write("touch_many", keys, expire)

    def wire_key(self, key: str) -> bytes:
        return self.clients[0].wire_key(key)

    def close(self) -> None:
        for client in self.clients:
            client.close()

    # -- the registry the repair walks ------------------------------------------------

    def register(self, key_base: str) -> None:
        """List a queue's keys ("q:<name>", "dq:<name>") for the repair to copy."""
        if self.add(f"mirror:registered:{key_base}", b"1"):
            if not self._read("append", REGISTRY, f"{key_base}\n".encode(), noreply=False):
                self.add(REGISTRY, f"{key_base}\n".encode())
            self._others("append", REGISTRY, f"{key_base}\n".encode(), noreply=False)


def repair(client: MirroredClient, *, settle: float = 2 * CHECK_EVERY) -> list[str]:
    """Copy the in-sync server's queues to a server that is back, then mark it
    in sync. Returns what was done, for the log."""
    markers = client.membership()
    source = next((i for i, ok in enumerate(client._readable) if ok), None)
    if source is None:
        raise NoMirrorInSync("no mirror is in sync: nothing to copy from")
    done = []
    for target, marker in enumerate(markers):
        if target == source or client._readable[target] or marker == b"":
            continue  # in sync already, or still unreachable
        src, dst = client.clients[source], client.clients[target]
        if marker == STALE:
            # It kept what it had when it was cut off: messages acked since,
            # counters behind. Nobody writes to it while it is out: clear its
            # queues, then copy them afresh like a restarted server's.
            _wipe(dst, _key_bases(src.get(REGISTRY)) + _key_bases(dst.get(REGISTRY)))
        # Writers start writing to it; wait until every process has noticed.
        dst.set(MEMBER, CATCHING_UP, noreply=False)
        src.delete(down_key(target), noreply=False)
        time.sleep(settle)
        copied = _copy(src, dst)
        dst.set(MEMBER, IN_SYNC, noreply=False)
        done.append(f"{dst.server}: copied {copied} keys from {src.server}, now in sync")
    client.membership()
    return done


_KEY_BASE_RE = re.compile(r"d?q:[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")


def _key_bases(raw: bytes | None) -> list[str]:
    """The registered queues' key bases; a bare name is an older "q:<name>"."""
    lines = (line.strip() for line in (raw or b"").decode(errors="replace").split("\n"))
    bases = [line if ":" in line else f"q:{line}" for line in lines if line]
    return [base for base in dict.fromkeys(bases) if _KEY_BASE_RE.fullmatch(base)]


def _int(raw: bytes | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def _wipe(dst: Client, bases: list[str]) -> None:
    """Delete the queues' keys on a stale server (not its other keys: the
    mirrors may be the farm's memcached servers too)."""
    for base in dict.fromkeys(bases):
        gen_raw = dst.get(f"{base}:gen")
        if gen_raw is None or not re.fullmatch(rb"[0-9a-f]{8}", gen_raw):
            continue
        gen = gen_raw.decode()
        counters = [f"{base}:{gen}:{k}" for k in ("tail", "head", "floor", "scan")]
        found = dst.get_many(counters[:3])
        floor, tail = _int(found.get(counters[2]), 1), _int(found.get(counters[0]), 0)
        for start in range(max(floor, 1), tail + 1, COPY_BATCH):
            batch = range(start, min(start + COPY_BATCH, tail + 1))
            dst.delete_many([f"{base}:{gen}:{kind}:{i}" for i in batch for kind in ("m", "c")], noreply=False)
        dst.delete_many([*counters, f"{base}:gen"], noreply=False)


def _copy(src: Client, dst: Client) -> int:
    """Fill the gaps on dst from src. `add` never overwrites what writers put
    there since the catch-up began; counters only move up. Entries keep their
    lifetimes: a message lives until it is acknowledged, as on src, and a
    marker (acked, hole) or a dead letter no longer than its queue setting
    (webfarm.queues.conf), never for good."""
    bases = _key_bases(src.get(REGISTRY))
    dst.set(REGISTRY, "".join(f"{base}\n" for base in bases).encode(), noreply=False)
    config = get_config()
    copied = 0
    for base in bases:
        dst.add(f"mirror:registered:{base}", b"1", noreply=False)
        gen_raw = src.get(f"{base}:gen")
        if gen_raw is None or not re.fullmatch(rb"[0-9a-f]{8}", gen_raw):
            continue
        gen = gen_raw.decode()
        dst.set(f"{base}:gen", gen_raw, noreply=False)
        counters = {k: f"{base}:{gen}:{k}" for k in ("tail", "head", "floor")}
        values = src.get_many(list(counters.values()))
        theirs = dst.get_many(list(counters.values()))
        for key in counters.values():
            if key in values and _int(theirs.get(key), -1) < _int(values[key], -1):
                dst.set(key, values[key], noreply=False)
        floor = _int(values.get(counters["floor"]), 1)
        tail = _int(values.get(counters["tail"]), 0)
        message_ttl = config["DEAD_LETTER_TTL"] if base.startswith("dq:") else 0
        ttls = {b"A": config["FINISHED_TTL"], b"H": config["HOLE_TTL"]}
        for start in range(max(floor, 1), tail + 1, COPY_BATCH):
            batch = range(start, min(start + COPY_BATCH, tail + 1))
            entries = src.get_many([f"{base}:{gen}:m:{i}" for i in batch])
            by_ttl: dict[int, dict] = {}
            for key, value in entries.items():
                by_ttl.setdefault(ttls.get(value[:1], message_ttl), {})[key] = value
            for ttl, group in by_ttl.items():
                dst.add_many(group, ttl)
            copied += len(entries)
    return copied


_local = threading.local()
_all: list[MirroredClient] = []
_epoch = 0


def mirrored_client(servers: list[str]) -> MirroredClient:
    """This thread's client over the configured mirror pair."""
    key = (os.getpid(), _epoch, tuple(servers))
    cache: dict = _local.__dict__.setdefault("clients", {})
    client = cache.get(key)
    if client is None:
        client = cache[key] = MirroredClient(parse_servers(servers), **client_options())
        _all.append(client)
    return client


def close_all() -> None:
    """Close every thread's mirrored clients (settings changed)."""
    global _epoch
    _epoch += 1
    for client in _all:
        client.close()
    _all.clear()


get_config.when_changed(close_all)
