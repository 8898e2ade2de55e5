"""Putting messages in: indexes from the tail (in reserved blocks when
putting fast), entries written with `add`."""

import time
from collections import deque
from collections.abc import Callable, Sequence

from pymemcache.exceptions import MemcacheClientError, MemcacheServerError

from webfarm.core.client import (
    MetaBatch,
    MetaReply,
    arithmetic_flags,
    get_flags,
    meta_arithmetic,
    meta_get,
    meta_set,
    set_flags,
)
from webfarm.core.tampering import refused
from webfarm.queues import entries
from webfarm.queues.exceptions import (
    MessageTooLarge,
    QueueFull,
    QueueUnavailable,
    is_full,
)
from webfarm.queues.layout import (
    ATTEMPTS,
    BURST_GAP,
    CLAIMED,
    MAX_BLOCK,
    Layout,
    memcached_errors,
)

# The reserved indexes a producer remembers giving up: a few blocks' worth.
DROPPED_KEPT = 4 * MAX_BLOCK


class Producer:
    """A queue's producer part: takes indexes and writes entries."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._reserve: deque[int] = deque()  # indexes taken from the tail, not yet written
        # Reserved indexes given up unwritten (they are holes now): (generation, index).
        self._dropped: deque[tuple[str, int]] = deque(maxlen=DROPPED_KEPT)
        self._reserve_gen: str | None = None
        self._reserved_at = 0.0
        self._block = 1
        self._last_put = -1.0

    def put(self, body: bytes) -> int:
        """Enqueue one message; returns its index."""
        return self.put_many([body])[0]

    def put_many(self, bodies: Sequence[bytes], *, redeliveries: int = 0) -> list[int]:
        """Enqueue messages in one round trip (plus one for the index range).

        Raises QueueFull when memcached refuses to store; its `stored` lists the
        positions in `bodies` that were enqueued all the same.
        """
        for body in bodies:
            if len(body) > self.layout.max_bytes:
                raise MessageTooLarge(
                    f"message of {len(body)} bytes is over the {self.layout.max_bytes} limit"
                )
        if not bodies:
            return []
        # An entry is sealed for its index: made once the indexes are taken.
        now = time.time()
        indexes: list[int | None] = [None] * len(bodies)
        written_in: dict[int, str] = {}  # position -> generation its entry went into
        todo = list(range(len(bodies)))
        # With meta commands the adds count themselves as put, in the same
        # write; what was not stored is taken back.
        counted_ahead = self.layout.speaks_meta
        with memcached_errors():
            for _ in range(ATTEMPTS):
                gen = self.layout.generation()
                taken = self._take_indexes(gen, len(todo))
                if taken is None:
                    self.layout.counters_lost(gen)
                    continue
                keys = {pos: self.layout.key(gen, "m", taken[n]) for n, pos in enumerate(todo)}
                values = {
                    keys[pos]: entries.encode(
                        self.layout.key_base,
                        bodies[pos],
                        gen=gen,
                        index=taken[n],
                        redeliveries=redeliveries,
                        enqueued_at=now,
                    )
                    for n, pos in enumerate(todo)
                }
                try:
                    results, alive, named = self._add_entries(gen, values)
                except MemcacheServerError as exc:
                    if not is_full(exc):
                        raise
                    stored = self._stored_after_error(keys, values)
                    if counted_ahead:
                        self.layout.uncount("in", len(todo) - len(stored))
                    self.layout.stat("full")
                    error = QueueFull("memcached is full: message not stored")
                    error.stored = [
                        pos for pos in range(len(bodies)) if indexes[pos] is not None or pos in stored
                    ]
                    raise error from exc
                if not alive:
                    # memcached lost this generation (restarted, flushed) after
                    # the indexes were taken: no consumer will read there.
                    # Everything written into it goes again into a new one.
                    lost = [pos for pos, g in written_in.items() if g == gen]
                    # All of them go again, and are counted again.
                    self.layout.uncount("in", (len(todo) if counted_ahead else 0) + len(lost))
                    stale = [keys[pos] for pos in todo if results[keys[pos]]]
                    self.layout.client.delete_many(
                        stale + [self.layout.key(gen, "m", indexes[p]) for p in lost]
                    )
                    for pos in lost:
                        indexes[pos] = None
                        del written_in[pos]
                    todo = sorted(todo + lost)
                    self.layout.counters_lost(gen)
                    continue
                moved = self.layout.moved_on(gen, named)
                # Written after the queue moved on: what no consumer took yet is
                # taken back and goes again into the generation consumers read now.
                written = {keys[pos]: taken[n] for n, pos in enumerate(todo) if results[keys[pos]]}
                back = self._take_back(gen, written) if moved and written else set()
                retry = []
                for n, pos in enumerate(todo):
                    if results[keys[pos]] and keys[pos] not in back:
                        indexes[pos] = taken[n]
                        written_in[pos] = gen
                    else:  # a consumer gave up waiting and marked the index a hole, or taken back
                        retry.append(pos)
                if moved:
                    self.layout.gen = None
                    self._reserve.clear()
                if not counted_ahead:
                    self.layout.stat("in", len(todo) - len(retry))
                elif retry:
                    self.layout.uncount("in", len(retry))
                todo = retry
                if not todo:
                    return [i for i in indexes if i is not None]
        raise QueueUnavailable("could not find free indexes; the queue is being reset repeatedly")

    def _take_back(self, gen: str, written: dict[str, int]) -> set[str]:
        """Of the entries just written into `gen` (key -> index), those no
        consumer has claimed: claimed here, so none ever will, and marked
        finished. Their keys are returned, to be put again."""
        claims = {key: self.layout.key(gen, "c", i) for key, i in written.items()}
        won = self.layout.client.add_many(
            dict.fromkeys(claims.values(), CLAIMED), self.layout.visibility_timeout
        )
        back = {key for key, claim in claims.items() if won[claim]}
        if back:
            self.layout.client.set_many(
                dict.fromkeys(back, entries.ACKED), expire=self.layout.finished_ttl, noreply=False
            )
        return back

    def _add_entries(self, gen: str, values: dict[str, bytes]) -> tuple[dict[str, bool], bool, bytes | None]:
        """`add` the entries, then, in the same round trip, check that the
        generation still has its tail, and that it is a number: `ma` by 0
        changes nothing and answers NF for a tail that is gone, CLIENT_ERROR
        for one someone overwrote (consumers then move to a new generation).
        Indexes come from a reserve or from an incr a moment earlier; if
        memcached lost everything since, or the tail was overwritten, the adds
        succeed into a key space nobody reads, and only this tells. The
        generation key, read last, tells whether the queue moved on meanwhile.

        A producer that put a moment ago reserves its next indexes in the
        same round trip, so while it is busy a put is one round trip."""
        if not self.layout.speaks_meta:  # mirrored: the classic pipeline both servers take
            return self._add_entries_classic(gen, values)
        wire = self.layout.client.wire_key
        as_added = set_flags(ttl=self.layout.entry_ttl or None, mode="add")
        commands = [meta_set(wire(key), *as_added, value=value) for key, value in values.items()]
        commands.append(meta_arithmetic(wire(self.layout.key(gen, "tail")), *arithmetic_flags(delta=0)))
        commands.append(meta_get(wire(self.layout.gen_key()), *get_flags()))
        replies = self.layout.meta_client.meta(
            commands, errors=True, quietly=self.layout.stat_command("in", len(values))
        )
        refused = next((r for r in replies if r.refused), None)
        if refused is not None:
            raise refused.as_error()
        added = {key: reply.done for key, reply in zip(values, replies, strict=False)}
        return added, replies[-2].done, replies[-1].value

    def _add_entries_classic(
        self, gen: str, values: dict[str, bytes]
    ) -> tuple[dict[str, bool], bool, bytes | None]:
        tail = self.layout.key(gen, "tail")
        added, tail_there = self.layout.client.add_then_check(values, self.layout.entry_ttl, tail)
        return added, tail_there, self.layout.client.get(self.layout.gen_key())

    def reserve_in(self, batch: MetaBatch) -> Callable[[list[MetaReply]], None] | None:
        """Put the command that reserves this producer's next index into a
        batch of the caller's, run a moment before its put (a vote's checks):
        the put is then one round trip. Returns what to call with the batch's
        answers; None when there is nothing to reserve (an index is reserved
        already, or the queue is mirrored and reserves its own way)."""
        if not self.layout.speaks_meta or self._reserve or (self.layout.ring or batch.ring) is not batch.ring:
            return None
        gen = self.layout.generation()
        index = batch.arithmetic(self.layout.key(gen, "tail"), value=True, route=f"q:{self.layout.name}")

        def reserved(replies: list[MetaReply]) -> None:
            last = replies[index].number()
            if last is not None:
                self._reserve.append(last)
                self._reserve_gen, self._reserved_at = gen, time.monotonic()

        return reserved

    def unwritten(self, gen: str) -> list[int]:
        """The indexes this producer reserved in `gen` and has not written:
        those it still may, and those it gave up (holes, until consumers
        pass them)."""
        dropped = [i for g, i in self._dropped if g == gen]
        return (list(self._reserve) if self._reserve_gen == gen else []) + dropped

    def _take_indexes(self, gen: str, count: int) -> list[int] | None:
        """`count` indexes for new entries: from this producer's reserve, else
        from the tail. A producer putting fast reserves a growing block with
        one incr, so most puts cost one round trip; reserved indexes it does
        not use in time simply become holes that consumers skip."""
        now = time.monotonic()
        fast = now - self._last_put < BURST_GAP
        self._last_put = now
        if self._reserve_gen != gen or now - self._reserved_at > self.layout.hole_wait / 2:
            if self._reserve_gen is not None:
                self._dropped.extend((self._reserve_gen, i) for i in self._reserve)
            self._reserve.clear()
        if len(self._reserve) < count:
            self._block = min(self._block * 2, MAX_BLOCK) if fast else 1
            want = count - len(self._reserve) + (self._block - 1 if count == 1 else 0)
            try:
                last = self.layout.client.incr(self.layout.key(gen, "tail"), want)
            except MemcacheClientError:  # "non-numeric value": not a tail of ours
                refused("queue", self.layout.key(gen, "tail"), "not a number")
                return None
            if last is None:
                return None
            self._reserve.extend(range(last - want + 1, last + 1))
            self._reserve_gen, self._reserved_at = gen, now
        return [self._reserve.popleft() for _ in range(count)]

    def _stored_after_error(self, keys: dict[int, str], values: dict[str, bytes]) -> set[int]:
        """After an error part-way through a pipeline, which entries are ours?"""
        found = self.layout.client.get_many(list(keys.values()))
        return {pos for pos, key in keys.items() if found.get(key) == values[key]}
