"""Taking messages out: claims, prefetching and delivery. The consumer's
finisher (webfarm/queues/finishing.py) acks, rejects and buries what it handed
out; its recovery scan (webfarm/queues/recovery.py) delivers what lost its claim."""

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

from pymemcache.exceptions import MemcacheClientError, MemcacheServerError

from webfarm.core.client import (
    delete_quietly_line,
    flags_bytes,
    get_flags,
    get_line,
    set_flags,
    set_line,
    with_opaque,
)
from webfarm.queues import entries
from webfarm.queues.entries import HOLE, BadEntry
from webfarm.queues.exceptions import QueueFull, is_full
from webfarm.queues.finishing import Finisher
from webfarm.queues.layout import (
    CLAIMED,
    Layout,
    Message,
    memcached_errors,
    number,
)
from webfarm.queues.producing import Producer
from webfarm.queues.recovery import RecoveryScan

logger = logging.getLogger(__name__)

# Receipts this consumer issued and not yet saw acknowledged, kept so their
# acks skip the MAC check (a receipt from elsewhere is checked in full).
ISSUED_KEPT = 10_000


# A claimed entry to hand out: (index, its CAS version, the entry, deliveries so far).
Taken = tuple[int, int, entries.Entry, int]
# One for the dead letters: (index, receipt, enqueued at, body, deliveries, reason).
Dead = tuple[int, str, float | None, bytes, int, str]


class Consumer:
    """A queue's consumer part. Its state is this process's: the prefetched
    messages, the receipts it issued, and the indexes it took whose entries
    were not written yet (all of them of one generation)."""

    def __init__(self, layout: Layout, producer: Producer) -> None:
        self.layout = layout
        self._buffer: deque[tuple[float, Message]] = deque()
        self._issued: dict[str, tuple[str, int, int, str]] = {}  # receipt -> its parts
        self._busy = False  # the last fresh take found more than it asked for
        self._missing: dict[int, float] = {}  # index -> when first seen empty
        self._tail_seen = 0  # the tail as this consumer last read it
        self._position_gen: str | None = None  # the generation the two above are of
        self.finisher = Finisher(layout, producer, self._issued)
        self.recovery = RecoveryScan(layout, self._deliver, self._mark_holes)

    def _at(self, gen: str) -> None:
        """Work in `gen` from now: what this consumer knew of another generation goes."""
        if gen != self._position_gen:
            self._position_gen = gen
            self._missing.clear()
            self._tail_seen = 0

    def claim(self) -> Message | None:
        """One message, or None. Claims up to PREFETCH at a time when the queue
        has them and hands them out one by one; a buffered message whose claim
        is past half the visibility timeout is dropped, not handed out (it will
        be redelivered to someone with time to finish it)."""
        if not self._buffer:
            messages = self.claim_many(self.layout.prefetch)
            now = time.monotonic()
            self._buffer.extend((now, m) for m in messages)
        buffered = self._from_buffer(1)
        return buffered[0] if buffered else None

    def _from_buffer(self, limit: int) -> list[Message]:
        fresh_after = time.monotonic() - self.layout.visibility_timeout / 2
        out: list[Message] = []
        while self._buffer and len(out) < limit:
            claimed_at, message = self._buffer.popleft()
            if claimed_at >= fresh_after:
                out.append(message)
        return out

    def release(self, messages: Sequence[Message] | None = None) -> None:
        """Give back claimed messages (by default the prefetched ones not yet
        handed out): their claims are dropped so they can be delivered again
        at once."""
        given = [m for _, m in self._buffer] if messages is None else list(messages)
        with memcached_errors():
            keys = []
            for message in given:
                gen, index, _, _ = self.finisher.checked_receipt(message.receipt)
                keys.append(self.layout.key(gen, "c", index))
            self.layout.client.delete_many(keys, noreply=False)
        if messages is None:
            self._buffer.clear()

    def claim_many(self, limit: int) -> list[Message]:
        """Claim up to `limit` messages for the visibility timeout. Never blocks."""
        messages = self._from_buffer(limit)
        if len(messages) == limit:
            return messages
        with memcached_errors():
            messages += self._take_missing(limit - len(messages))
            if len(messages) < limit:
                messages += self._take_fresh(limit - len(messages))
            if len(messages) < limit and self.recovery.due():
                try:
                    messages += self.recovery.recover(limit - len(messages))
                except (MemcacheServerError, QueueFull) as exc:
                    # Its bookkeeping found no room (-M): the messages claimed
                    # already are delivered, and recovery runs when next due.
                    if not messages or not (isinstance(exc, QueueFull) or is_full(exc)):
                        raise
            return messages

    def _take_fresh(self, limit: int) -> list[Message]:
        gen = self.layout.generation()
        self._at(gen)
        head_key, tail_key = self.layout.key(gen, "head"), self.layout.key(gen, "tail")
        n = limit
        if not self._busy:
            # Look before taking, so polling an empty queue takes no index.
            found = self.layout.client.get_many([head_key, tail_key])
            tail, head = number(found.get(tail_key), -1), number(found.get(head_key), -1)
            if tail is None or head is None or tail < 0 or head < 0:
                self.layout.counters_lost(gen)
                return []
            self._tail_seen = tail
            available = tail - head
            if available <= 0:
                return []
            n = min(limit, available)
            self._busy = available > n
        try:
            last = self.layout.client.incr(head_key, n)
        except MemcacheClientError:
            last = None
        if last is None:
            self.layout.counters_lost(gen)
            return []
        taken = range(last - n + 1, last + 1)
        # Ours from the moment the head moved: should their delivery fail
        # (memcached full or gone between the two trips), the next claim
        # takes them again (_take_missing), not a recovery scan a
        # visibility timeout later. On a busy queue we took without
        # looking; an index past the tail is held there too, for its producer.
        now = time.monotonic()
        for i in taken:
            self._missing.setdefault(i, now)
        messages = self._deliver(gen, taken, recovering=False)
        self._busy = self._busy and len(messages) == n
        return messages

    def _take_missing(self, limit: int) -> list[Message]:
        """Indexes this consumer took whose entries were not written yet."""
        gen = self._position_gen
        if not self._missing or gen is None or self.layout.gen != gen:
            return []
        # Indexes past the tail last seen have no producer yet: no trip for them.
        due = [i for i in sorted(self._missing) if i <= self._tail_seen][: max(limit, 1)]
        return self._deliver(gen, due, recovering=False) if due else []

    def _deliver(self, gen: str, indexes: Sequence[int], *, recovering: bool) -> list[Message]:
        if not recovering and self.layout.speaks_meta:
            return self._deliver_claimed(gen, indexes)
        keys = {i: self.layout.key(gen, "m", i) for i in indexes}
        tail_key = self.layout.key(gen, "tail")
        found = self.layout.client.gets_many([*keys.values(), tail_key])
        # An index past the tail (a busy consumer took it without looking) has
        # no producer yet: it is never a hole, or the floor would pass it and
        # the producer that takes it later would write below the floor.
        tail = number(found.get(tail_key, (None, None))[0], 0) or 0
        current = gen == self._position_gen
        if current:
            self._tail_seen = tail
        now = time.monotonic()
        ready: dict[int, tuple[bytes, int]] = {}
        holes = []
        for i, key in keys.items():
            raw, version = found.get(key, (None, None))
            if raw is None and not current:
                continue  # a generation the queue moved on from: its scan marks the holes
            if raw is None:
                # Past the horizon an empty index has waited long enough already.
                seen = self._missing.setdefault(i, 0.0 if recovering else now)
                if now - seen >= self.layout.hole_wait and i <= tail:
                    holes.append(i)
                continue
            self._missing.pop(i, None)
            if not entries.is_finished(raw):
                ready[i] = (raw, int(version))  # a message, or something that claims to be one
        self._mark_holes(gen, holes)
        if not ready:
            return []
        # The claim only has to exist: receipts are checked against the entry's version.
        claim_keys = {i: self.layout.key(gen, "c", i) for i in ready}
        claimed = self.layout.client.add_many(
            {claim_keys[i]: CLAIMED for i in ready}, self.layout.visibility_timeout
        )
        taken: list[Taken] = []
        dead: list[Dead] = []
        rewrites = {}
        for i, (raw, version) in ready.items():
            if not claimed[claim_keys[i]]:
                continue  # someone else holds it
            self._judge(gen, i, raw, version, recovering, taken, dead)
        for i, _, entry, redeliveries in taken:
            if redeliveries != entry.redeliveries:
                # A new version: the receipts of earlier deliveries no longer match it.
                rewrites[keys[i]] = entries.with_redeliveries(ready[i][0], redeliveries)
        if rewrites:  # we hold these claims: nobody else writes the entries now
            self.layout.client.set_many(rewrites, expire=self.layout.entry_ttl, noreply=False)
            versions = self.layout.client.gets_many(list(rewrites))
            taken = [
                (i, int(versions[keys[i]][1]) if keys[i] in versions else v, e, n) for i, v, e, n in taken
            ]
        return self._handed_out(gen, taken, dead, recovering=recovering)

    def _deliver_claimed(self, gen: str, indexes: Sequence[int]) -> list[Message]:
        """Fresh indexes: each entry read and claimed in the same round trip
        (meta mg and ms in add mode). A claim taken where there was nothing
        to deliver (not written yet, or finished) is dropped again at once,
        without waiting for an answer."""
        client = self.layout.meta_client
        indexes = list(indexes)
        n = len(indexes)
        # The wire keys of layout.key(gen, "m" or "c", i), built in one step each.
        base = self.layout.wire_base(gen)
        claim_keys = [b"%sc:%d" % (base, i) for i in indexes]
        value_and_cas = flags_bytes(get_flags(cas=True))
        commands = [get_line(b"%sm:%d" % (base, i), value_and_cas) for i in indexes]
        commands.append(get_line(b"%stail" % base, flags_bytes(get_flags())))
        # Quiet: only a claim someone else holds answers (NS), named by its opaque.
        claim = flags_bytes(set_flags(ttl=self.layout.visibility_timeout, mode="add", quiet=True))
        claims = [set_line(key, with_opaque(claim, pos), CLAIMED) for pos, key in enumerate(claim_keys)]
        replies, refused = client.meta_quiet(commands, claims)
        # An index past the tail has no producer yet: never a hole (see _deliver).
        tail = self._tail_seen = number(replies[n].value, 0) or 0
        now = time.monotonic()
        holes: list[int] = []
        dropped: list[bytes] = []
        taken: list[Taken] = []
        dead: list[Dead] = []
        decode = entries.decoder(self.layout.key_base)
        for pos, i in enumerate(indexes):
            entry, ours = replies[pos], b"%d" % pos not in refused
            raw = entry.value
            if raw is None:
                seen = self._missing.setdefault(i, now)
                if now - seen >= self.layout.hole_wait and i <= tail:
                    holes.append(i)
            else:
                self._missing.pop(i, None)
                if ours and not entries.is_finished(raw):
                    assert entry.cas is not None  # asked for (the c flag) with the value
                    self._judge(gen, i, raw, entry.cas, False, taken, dead, decode)
                    continue
            if ours:
                dropped.append(delete_quietly_line(claim_keys[pos]))
        if dropped:
            client.meta([], quietly=b"".join(dropped))
        self._mark_holes(gen, holes)
        return self._handed_out(gen, taken, dead, recovering=False)

    def _judge(
        self,
        gen: str,
        i: int,
        raw: bytes,
        version: int | bytes,
        recovering: bool,
        taken: list["Taken"],
        dead: list["Dead"],
        decode: Callable[[bytes, str, int], entries.Entry] | None = None,
    ) -> None:
        """A claimed entry: to hand out (into `taken`), or to the dead letters."""
        try:
            entry = decode(raw, gen, i) if decode else entries.decode(self.layout.key_base, raw, gen, i)
        except BadEntry as exc:
            dead.append((i, "", None, raw, 1, str(exc)))
            return
        redeliveries = entry.redeliveries + 1 if recovering else entry.redeliveries
        if redeliveries >= self.layout.max_deliveries and not self.layout.dead:
            reason = f"delivered {redeliveries} times without being acknowledged"
            dead.append((i, "", entry.enqueued_at, entry.body, redeliveries, reason))
            return
        taken.append((i, int(version), entry, redeliveries))

    def _mark_holes(self, gen: str, holes: list[int]) -> None:
        """Indexes nobody wrote in time: mark them, unless their producer wins the race."""
        if not holes:
            return
        keys = {i: self.layout.key(gen, "m", i) for i in holes}
        marked = self.layout.client.add_many({keys[i]: HOLE for i in holes}, self.layout.hole_ttl)
        self.layout.stat("holes", sum(1 for ok in marked.values() if ok))
        if gen != self._position_gen:
            return  # a generation the queue moved on from: its scan looks again
        for i in holes:
            if marked[keys[i]]:
                self._missing.pop(i, None)
            else:
                self._missing[i] = 0.0  # its producer won the race: read it next time

    def _handed_out(self, gen: str, taken: list, dead: list, *, recovering: bool) -> list[Message]:
        messages = []
        receipts = entries.receipt_maker(self.layout.key_base, gen)
        issued = self._issued
        if len(issued) > ISSUED_KEPT:
            issued.clear()  # receipts never acknowledged here: checked the long way
        for i, version, entry, redeliveries in taken:
            receipt, token = receipts(i, version, redeliveries)
            issued[receipt] = (gen, i, version, token)
            messages.append(
                Message(
                    queue=self.layout.name,
                    index=i,
                    body=entry.body,
                    receipt=receipt,
                    redelivered=redeliveries > 0 or recovering,
                    enqueued_at=entry.enqueued_at,
                    redeliveries=redeliveries,
                    generation=gen,
                )
            )
        if dead:
            self.finisher.bury_entries(gen, dead)
        if messages:
            self.layout.stat("out", len(messages))
            if recovering:
                self.layout.stat("redelivered", len(messages))
        return messages
