"""A message queue in plain memcached that loses nothing.

Keys of queue <n>, under the namespace, all on the one server "q:<n>" hashes to:

    q:<n>:gen            generation id; every other key carries it, so counters
                         that vanish (restart, flush, eviction) restart in a new
                         key space and new messages never meet old keys
    q:<n>:<g>:tail       last index handed to a producer (incr)
    q:<n>:<g>:head       last index taken by a consumer (incr)
    q:<n>:<g>:floor      every index below it is finished
    q:<n>:<g>:m:<i>      entry i: a message, or a marker (acked, hole)
    q:<n>:<g>:c:<i>      claim on entry i; expires after the visibility timeout
    q:<n>:stat:<what>    counters: in, out, acked, holes, redelivered, full, resets

Races are settled by memcached's `add`, which stores only if the key is absent:

* A producer takes index i with `incr tail`, then `add`s entry i. A consumer
  that finds i still empty after HOLE_WAIT `add`s a hole marker there. Exactly
  one of the two adds wins: either the message is there to deliver, or the
  producer's add fails and it retries at a new index. Nothing is lost, nothing
  is delivered twice.
* Every delivery first `add`s the claim key, so two consumers (or a consumer
  and the recovery scan) never both deliver the same claim.
* A producer's adds carry, in the same round trip, an empty `append` to the
  tail, which stores only if the tail exists: if memcached lost the
  generation between taking the indexes and writing (restart, flush), the
  producer learns it and writes again into a new generation.
* An acknowledged entry is overwritten by a small "acked" marker rather than
  deleted, so "missing" only ever means "not written yet".

A claim that expires (its consumer died) leaves the entry present and
unclaimed; the recovery scan, which walks from the floor to the head, claims it
again and delivers it marked as redelivered.
"""

import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError, MemcacheServerError

from progress.client import StableHashClient, client_epoch, server_client
from queues import registry
from queues.conf import get_config
from queues.exceptions import (
    InvalidReceipt,
    MessageTooLarge,
    QueueError,
    QueueFull,
    QueueUnavailable,
    is_full,
)
from queues.mirror import mirrored_client
from queues.names import validate_name

ACKED = b"A"
HOLE = b"H"
MESSAGE = b"M"
# Markers only need to outlive the recovery scan's passage over them.
MARKER_TTL = 24 * 3600
SCAN_BATCH = 200
ATTEMPTS = 20
RECEIPT_RE = re.compile(r"(?P<gen>[0-9a-f]{8})\.(?P<index>[1-9][0-9]{0,17})\.[0-9a-f]{16}")
# Puts closer together than this grow the producer's index block, up to MAX_BLOCK.
BURST_GAP = 0.01
MAX_BLOCK = 16
STATS = ("in", "out", "acked", "holes", "redelivered", "full", "resets", "purges")


@dataclass(frozen=True)
class Message:
    queue: str
    index: int
    body: bytes
    receipt: str
    redelivered: bool
    enqueued_at: float


def _encode(body: bytes, redelivered: bool) -> bytes:
    return b"%s%d %.3f\n" % (MESSAGE, int(redelivered), time.time()) + body


def _decode(raw: bytes) -> tuple[bool, float, bytes]:
    header, _, body = raw.partition(b"\n")
    flag, _, stamp = header[1:].partition(b" ")
    return flag == b"1", float(stamp), body


@contextmanager
def _memcached() -> Iterator[None]:
    try:
        yield
    except QueueError:
        raise
    except MemcacheServerError as exc:
        if is_full(exc):
            raise QueueFull("memcached is full: the message was not stored") from exc
        raise QueueUnavailable(f"memcached error: {exc}") from exc
    except (MemcacheError, OSError) as exc:
        raise QueueUnavailable(f"memcached unreachable: {exc}") from exc


class Queue:
    """One named queue. Cheap to make; not to be shared between threads."""

    def __init__(
        self, name: str, *, client: Client | None = None, ring: StableHashClient | None = None
    ) -> None:
        self.name = validate_name(name)
        self._client = client
        self._ring = ring
        self._client_pid = os.getpid()
        # A client given by the caller is kept; one made here follows settings.
        self._epoch = client_epoch() if client is None else -1
        config = get_config()
        self.max_bytes: int = config["MAX_MESSAGE_BYTES"]
        self.visibility_timeout: int = config["VISIBILITY_TIMEOUT"]
        self.hole_wait: float = config["HOLE_WAIT"]
        self.recover_interval: float = config["RECOVER_INTERVAL"]
        self.prefetch: int = config["PREFETCH"]
        self._mirrors: list[str] = config["MIRRORS"]
        self._buffer: deque[tuple[float, Message]] = deque()
        self._busy = False  # the last fresh take found more than it asked for
        self._stats_ready = False
        self._reserve: deque[int] = deque()  # indexes taken from the tail, not yet written
        self._reserve_gen: str | None = None
        self._reserved_at = 0.0
        self._block = 1
        self._last_put = -1.0
        self._gen: str | None = None
        self._missing: dict[int, float] = {}  # index -> when first seen empty
        self._last_recover = 0.0

    # -- keys -------------------------------------------------------------------

    @property
    def client(self) -> Client:
        # Finding the server hashes in pure Python: do it once per process.
        stale = self._epoch != -1 and self._epoch != client_epoch()
        if self._client is None or self._client_pid != os.getpid() or stale:
            if self._mirrors and self._ring is None:
                self._client = mirrored_client(self._mirrors)
            else:
                self._client = server_client(f"q:{self.name}", self._ring)
            self._client_pid = os.getpid()
            self._epoch = client_epoch()
        return self._client

    def _gen_key(self) -> str:
        return f"q:{self.name}:gen"

    def _key(self, gen: str, *parts: object) -> str:
        return ":".join(["q", self.name, gen, *map(str, parts)])

    def _stat(self, what: str, n: int = 1) -> None:
        """Best effort and without waiting for the reply: a counter never slows
        or fails the operation it counts."""
        try:
            if not self._stats_ready:
                self.client._store_cmd(b"add", {self._stat_key(s): b"0" for s in STATS}, 0, False)
                self._stats_ready = True
            self.client.incr(self._stat_key(what), n, noreply=True)
        except (MemcacheError, OSError):
            pass

    def _stat_key(self, what: str) -> str:
        return f"q:{self.name}:stat:{what}"

    def _generation(self) -> str:
        if self._gen is None:
            raw = self.client.get(self._gen_key())
            if raw is None:
                self._start_generation(expected=None)
                raw = self.client.get(self._gen_key())
            self._gen = raw.decode()
            registry.register(self.name, self._gen)
            register = getattr(self.client, "register", None)
            if register is not None:  # mirrored: the repair must know every queue
                register(self.name)
        return self._gen

    def _start_generation(self, *, expected: str | None, reason: str = "resets") -> None:
        """Move to a fresh key space, unless another process already has."""
        new = secrets.token_hex(4)
        for key, value in (("tail", b"0"), ("head", b"0"), ("floor", b"1")):
            self.client.add(self._key(new, key), value, noreply=False)
        if expected is None:
            self.client.add(self._gen_key(), new.encode(), noreply=False)
            return
        raw, token = self.client.gets(self._gen_key())
        if raw is None:
            self.client.add(self._gen_key(), new.encode(), noreply=False)
        elif raw.decode() == expected and self.client.cas(
            self._gen_key(), new.encode(), token, noreply=False
        ):
            self._stat(reason)

    def _counters_lost(self, gen: str, reason: str = "resets") -> None:
        """tail or head is gone: a restart, flush or eviction. Start over in a
        new generation so fresh indexes cannot land on surviving old entries."""
        self._start_generation(expected=gen, reason=reason)
        self._gen = None
        self._missing.clear()

    # -- producing ----------------------------------------------------------------

    def put(self, body: bytes) -> int:
        """Enqueue one message; returns its index."""
        return self.put_many([body])[0]

    def put_many(self, bodies: Sequence[bytes], *, redelivered: bool = False) -> list[int]:
        """Enqueue messages in one round trip (plus one for the index range).

        Raises QueueFull when memcached refuses to store; its `stored` lists the
        positions in `bodies` that were enqueued all the same.
        """
        for body in bodies:
            if len(body) > self.max_bytes:
                raise MessageTooLarge(f"message of {len(body)} bytes is over the {self.max_bytes} limit")
        if not bodies:
            return []
        entries = [_encode(body, redelivered) for body in bodies]
        indexes: list[int | None] = [None] * len(entries)
        written_in: dict[int, str] = {}  # position -> generation its entry went into
        todo = list(range(len(entries)))
        with _memcached():
            for _ in range(ATTEMPTS):
                gen = self._generation()
                taken = self._take_indexes(gen, len(todo))
                if taken is None:
                    self._counters_lost(gen)
                    continue
                keys = {pos: self._key(gen, "m", taken[n]) for n, pos in enumerate(todo)}
                try:
                    results, alive = self._add_entries(gen, {keys[pos]: entries[pos] for pos in todo})
                except MemcacheServerError as exc:
                    if not is_full(exc):
                        raise
                    stored = self._stored_after_error(keys, entries)
                    self._stat("full")
                    error = QueueFull("memcached is full: message not stored")
                    error.stored = [
                        pos for pos in range(len(entries)) if indexes[pos] is not None or pos in stored
                    ]
                    raise error from exc
                if not alive:
                    # memcached lost this generation (restarted, flushed) after
                    # the indexes were taken: no consumer will read there.
                    # Everything written into it goes again into a new one.
                    lost = [pos for pos, g in written_in.items() if g == gen]
                    stale = [keys[pos] for pos in todo if results[keys[pos]]]
                    self.client.delete_many(stale + [self._key(gen, "m", indexes[p]) for p in lost])
                    for pos in lost:
                        indexes[pos] = None
                        del written_in[pos]
                    todo = sorted(todo + lost)
                    self._counters_lost(gen)
                    continue
                retry = []
                for n, pos in enumerate(todo):
                    if results[keys[pos]]:
                        indexes[pos] = taken[n]
                        written_in[pos] = gen
                    else:  # a consumer gave up waiting and marked the index a hole
                        retry.append(pos)
                self._stat("in", len(todo) - len(retry))
                todo = retry
                if not todo:
                    return [i for i in indexes if i is not None]
        raise QueueUnavailable("could not find free indexes; the queue is being reset repeatedly")

    def _add_entries(self, gen: str, values: dict[str, bytes]) -> tuple[dict[str, bool], bool]:
        """`add` the entries, then, in the same round trip, check that the
        generation still has its tail: an empty `append` stores only onto an
        existing key and changes nothing. Indexes come from a reserve or from
        an incr a moment earlier; if memcached lost everything since, the adds
        succeed into a key space nobody reads, and only this tells."""
        prefix = self.client.key_prefix
        commands = [
            b"add %s 0 0 %d\r\n%s\r\n" % (self.client.check_key(key, prefix), len(value), value)
            for key, value in values.items()
        ]
        commands.append(b"append %s 0 0 0\r\n\r\n" % self.client.check_key(self._key(gen, "tail"), prefix))
        lines = self.client._misc_cmd(commands, b"add", False)
        stored = {key: line == b"STORED" for key, line in zip(values, lines, strict=False)}
        return stored, lines[-1] == b"STORED"

    def _take_indexes(self, gen: str, count: int) -> list[int] | None:
        """`count` indexes for new entries: from this producer's reserve, else
        from the tail. A producer putting fast reserves a growing block with
        one incr, so most puts cost one round trip; reserved indexes it does
        not use in time simply become holes that consumers skip."""
        now = time.monotonic()
        fast = now - self._last_put < BURST_GAP
        self._last_put = now
        if self._reserve_gen != gen or now - self._reserved_at > self.hole_wait / 2:
            self._reserve.clear()
        if len(self._reserve) < count:
            self._block = min(self._block * 2, MAX_BLOCK) if fast else 1
            want = count - len(self._reserve) + (self._block - 1 if count == 1 else 0)
            last = self.client.incr(self._key(gen, "tail"), want)
            if last is None:
                return None
            self._reserve.extend(range(last - want + 1, last + 1))
            self._reserve_gen, self._reserved_at = gen, now
        return [self._reserve.popleft() for _ in range(count)]

    def _stored_after_error(self, keys: dict[int, str], entries: list[bytes]) -> set[int]:
        """After an error part-way through a pipeline, which entries are ours?"""
        found = self.client.get_many(list(keys.values()))
        return {pos for pos, key in keys.items() if found.get(key) == entries[pos]}

    # -- consuming ---------------------------------------------------------------

    def claim(self) -> Message | None:
        """One message, or None. Claims up to PREFETCH at a time when the queue
        has them and hands them out one by one; a buffered message whose claim
        is past half the visibility timeout is dropped, not handed out (it will
        be redelivered to someone with time to finish it)."""
        if not self._buffer:
            messages = self.claim_many(self.prefetch)
            now = time.monotonic()
            self._buffer.extend((now, m) for m in messages)
        buffered = self._from_buffer(1)
        return buffered[0] if buffered else None

    def _from_buffer(self, limit: int) -> list[Message]:
        fresh_after = time.monotonic() - self.visibility_timeout / 2
        out: list[Message] = []
        while self._buffer and len(out) < limit:
            claimed_at, message = self._buffer.popleft()
            if claimed_at >= fresh_after:
                out.append(message)
        return out

    def release(self) -> None:
        """Give back prefetched messages not yet handed out (claims are dropped
        so they can be delivered again at once)."""
        with _memcached():
            keys = [self._key(*self._parse(m.receipt)[:1], "c", m.index) for _, m in self._buffer]
            self.client.delete_many(keys, noreply=False)
        self._buffer.clear()

    def claim_many(self, limit: int) -> list[Message]:
        """Claim up to `limit` messages for the visibility timeout. Never blocks."""
        messages = self._from_buffer(limit)
        if len(messages) == limit:
            return messages
        with _memcached():
            messages += self._take_missing(limit - len(messages))
            if len(messages) < limit:
                messages += self._take_fresh(limit - len(messages))
            due = time.monotonic() - self._last_recover >= self.recover_interval
            if len(messages) < limit and due:
                messages += self._recover(limit - len(messages))
            return messages

    def _take_fresh(self, limit: int) -> list[Message]:
        gen = self._generation()
        head_key, tail_key = self._key(gen, "head"), self._key(gen, "tail")
        n = limit
        if not self._busy:
            # Look before taking, so polling an empty queue takes no index.
            found = self.client.get_many([head_key, tail_key])
            if head_key not in found or tail_key not in found:
                self._counters_lost(gen)
                return []
            available = int(found[tail_key]) - int(found[head_key])
            if available <= 0:
                return []
            n = min(limit, available)
            self._busy = available > n
        last = self.client.incr(head_key, n)
        if last is None:
            self._counters_lost(gen)
            return []
        # On a busy queue we took without looking; an index past the tail is
        # then held (in _missing) for the next producer, like any unwritten one.
        messages = self._deliver(gen, range(last - n + 1, last + 1), recovering=False)
        self._busy = self._busy and len(messages) == n
        return messages

    def _take_missing(self, limit: int) -> list[Message]:
        """Indexes this consumer took whose entries were not written yet."""
        if not self._missing or self._gen is None:
            return []
        return self._deliver(self._gen, sorted(self._missing)[: max(limit, 1)], recovering=False)

    def _deliver(self, gen: str, indexes: Sequence[int], *, recovering: bool) -> list[Message]:
        keys = {i: self._key(gen, "m", i) for i in indexes}
        entries = self.client.get_many(list(keys.values()))
        now = time.monotonic()
        ready: dict[int, bytes] = {}
        holes = []
        for i, key in keys.items():
            raw = entries.get(key)
            if raw is None:
                # Past the horizon an empty index has waited long enough already.
                seen = self._missing.setdefault(i, 0.0 if recovering else now)
                if now - seen >= self.hole_wait:
                    holes.append(i)
                continue
            self._missing.pop(i, None)
            if raw[:1] == MESSAGE:
                ready[i] = raw
        if holes:
            marked = self.client._store_cmd(b"add", {keys[i]: HOLE for i in holes}, MARKER_TTL, False)
            self._stat("holes", sum(1 for ok in marked.values() if ok))
            for i in holes:
                if marked[keys[i]]:
                    self._missing.pop(i, None)
                else:
                    self._missing[i] = 0.0  # its producer won the race: read it next time
        if not ready:
            return []
        tokens = {i: secrets.token_hex(8) for i in ready}
        claim_keys = {i: self._key(gen, "c", i) for i in ready}
        claimed = self.client._store_cmd(
            b"add",
            {claim_keys[i]: tokens[i].encode() for i in ready},
            self.visibility_timeout,
            False,
        )
        messages = []
        for i, raw in ready.items():
            if not claimed[claim_keys[i]]:
                continue  # someone else holds it
            redelivered, stamp, body = _decode(raw)
            messages.append(
                Message(
                    queue=self.name,
                    index=i,
                    body=body,
                    receipt=f"{gen}.{i}.{tokens[i]}",
                    redelivered=redelivered or recovering,
                    enqueued_at=stamp,
                )
            )
        if messages:
            self._stat("out", len(messages))
            if recovering:
                self._stat("redelivered", len(messages))
        return messages

    def _recover(self, limit: int) -> list[Message]:
        """Walk from the floor to the head: redeliver entries whose claim
        expired, mark long-empty indexes as holes, and move the floor past the
        finished prefix."""
        self._last_recover = time.monotonic()
        gen = self._generation()
        floor_key, head_key, scan_key = (self._key(gen, k) for k in ("floor", "head", "scan"))
        found = self.client.get_many([floor_key, head_key, scan_key])
        if head_key not in found:
            return []
        floor, head = int(found.get(floor_key, b"1")), int(found[head_key])
        horizon = self._horizon(scan_key, found.get(scan_key), head)
        messages: list[Message] = []
        done_until = floor  # first index not known to be finished
        prefix_open = True
        start = floor
        while start <= head and len(messages) < limit:
            batch = range(start, min(start + SCAN_BATCH, head + 1))
            keys = [self._key(gen, "m", i) for i in batch] + [self._key(gen, "c", i) for i in batch]
            values = self.client.get_many(keys)
            unclaimed = []
            for i in batch:
                entry = values.get(self._key(gen, "m", i))
                finished = entry is not None and entry[:1] in (ACKED, HOLE)
                if prefix_open and finished:
                    done_until = i + 1
                else:
                    prefix_open = False
                abandoned = entry is None or (entry[:1] == MESSAGE and self._key(gen, "c", i) not in values)
                if abandoned and i <= horizon:
                    unclaimed.append(i)
            if unclaimed:
                messages += self._deliver(gen, unclaimed[: limit - len(messages)], recovering=True)
            start = batch.stop
        if done_until > floor:
            self.client.set(floor_key, str(done_until).encode(), noreply=False)
        return messages

    def _horizon(self, scan_key: str, stored: bytes | None, head: int) -> int:
        """The head as some consumer saw it at least HOLE_WAIT ago (0 if none).

        An index above it may have been taken a moment ago by a consumer about
        to write its claim, or handed to a producer about to write its entry;
        at or below it, an unclaimed entry was abandoned and an empty index can
        be marked a hole. Kept in memcached so a consumer that lives for one
        call (a periodic drain) judges as well as one that lives for days.
        """
        now = time.time()
        horizon, at = 0, None
        if stored:
            value, _, when = stored.decode().partition(":")
            horizon, at = int(value), float(when)
        aged = at is not None and now - at >= max(self.recover_interval, self.hole_wait)
        if at is None or aged:
            self.client.set(scan_key, f"{head}:{now:.3f}".encode(), expire=MARKER_TTL, noreply=False)
        return horizon if aged else 0

    # -- finishing -------------------------------------------------------------

    def _parse(self, receipt: object) -> tuple[str, int]:
        # The parts go into memcached keys: accept only what claims make.
        match = RECEIPT_RE.fullmatch(receipt) if isinstance(receipt, str) else None
        if match is None:
            raise InvalidReceipt("malformed receipt")
        return match["gen"], int(match["index"])

    def ack(self, receipt: str) -> None:
        """The message is done. An ack after the visibility timeout still
        removes it (it may have been redelivered meanwhile: at-least-once)."""
        self.ack_many([receipt])

    def ack_many(self, receipts: Sequence[str]) -> None:
        parsed = [self._parse(r) for r in receipts]
        with _memcached():
            self._mark_finished(parsed)
            self._stat("acked", len(parsed))

    def _mark_finished(self, entries: Sequence[tuple[str, int]]) -> None:
        # The marker ends the entry; its claim key just expires.
        self.client.set_many(
            {self._key(gen, "m", i): ACKED for gen, i in entries}, expire=MARKER_TTL, noreply=False
        )

    def extend(self, receipts: Sequence[str], seconds: int | None = None) -> None:
        """Keep claims alive: their messages stay hidden `seconds` more."""
        if not receipts:
            return
        seconds = seconds or self.visibility_timeout
        expire = str(seconds).encode()
        with _memcached():
            commands = []
            for receipt in receipts:
                gen, i = self._parse(receipt)
                key = self.client.check_key(self._key(gen, "c", i), self.client.key_prefix)
                commands.append(b"touch " + key + b" " + expire + b"\r\n")
            self.client._misc_cmd(commands, b"touch", False)

    def reject(self, receipt: str) -> int | None:
        """Put the message back at the tail, marked redelivered; returns its new index."""
        gen, i = self._parse(receipt)
        with _memcached():
            raw = self.client.get(self._key(gen, "m", i))
            if raw is None or raw[:1] != MESSAGE:
                return None
            _, _, body = _decode(raw)
            (index,) = self.put_many([body], redelivered=True)
            self._mark_finished([(gen, i)])
            return index

    # -- looking -------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        """Depth and counters in one round trip."""
        with _memcached():
            gen = self._generation()
            names = STATS
            keys = [self._key(gen, k) for k in ("tail", "head", "floor")]
            keys += [f"q:{self.name}:stat:{n}" for n in names]
            found = self.client.get_many(keys)
            tail, head, floor = (int(found.get(k, b"0")) for k in keys[:3])
            return {
                "ready": max(tail - head, 0),
                "unfinished": max(head - floor + 1, 0),
                "tail": tail,
                "head": head,
                "floor": floor,
                **{n: int(found.get(f"q:{self.name}:stat:{n}", b"0")) for n in names},
            }

    def purge(self) -> int:
        """Drop every message: move to a new generation, then delete the old
        entries. Returns how many indexes were cleared."""
        with _memcached():
            gen = self._generation()
            stats = self.stats()
            self._counters_lost(gen, reason="purges")
            cleared = 0
            for start in range(stats["floor"], stats["tail"] + 1, SCAN_BATCH):
                batch = range(start, min(start + SCAN_BATCH, stats["tail"] + 1))
                keys = [self._key(gen, "m", i) for i in batch] + [self._key(gen, "c", i) for i in batch]
                self.client.delete_many(keys, noreply=False)
                cleared += len(batch)
            for key in ("tail", "head", "floor"):
                self.client.delete(self._key(gen, key), noreply=False)
            return cleared


_local = threading.local()


def producer(name: str) -> Queue:
    """This thread's Queue for putting into `name`, kept between calls: it
    remembers the generation, the stats keys and its reserved indexes, so a
    put in a busy request thread is one round trip, not four. Made afresh
    when the settings change (another memcached, namespace or queue options)."""
    pid, epoch, config = os.getpid(), client_epoch(), get_config()
    queues: dict[str, tuple[int, int, dict, Queue]] = _local.__dict__.setdefault("producers", {})
    kept = queues.get(name)
    if kept is None or kept[:2] != (pid, epoch) or kept[2] is not config:
        kept = queues[name] = (pid, epoch, config, Queue(name))
    return kept[3]
