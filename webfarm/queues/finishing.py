"""Finishing messages: ack, reject, extend, bury, all checked against the
receipt the delivery issued."""

import logging
import time
from collections.abc import Callable, Sequence

from webfarm.core.client import delete_quietly_line, flags_bytes, set_flags, set_line, with_cas, with_opaque
from webfarm.core.tampering import refused
from webfarm.queues import entries
from webfarm.queues.entries import ACKED, BadEntry
from webfarm.queues.exceptions import (
    ClaimLost,
    InvalidReceipt,
)
from webfarm.queues.layout import (
    DeadLetter,
    Layout,
    Message,
    memcached_errors,
)
from webfarm.queues.producing import Producer

logger = logging.getLogger(__name__)

# Told of the body a reject keeps again (its size, and whether as a dead letter).
Admit = Callable[[int, bool], None]

# A CAS changed by memcached moving the entry, then changed again meanwhile.
ACK_ATTEMPTS = 3


class Finisher:
    """A consumer's part that finishes what it handed out: ack, reject,
    extend and bury, each checked against the delivery's receipt."""

    def __init__(
        self, layout: Layout, producer: Producer, issued: dict[str, tuple[str, int, int, str]]
    ) -> None:
        self.layout = layout
        self.producer = producer  # a reject puts the message again at the tail
        self._issued = issued  # receipts its consumer handed out, checked already

    def checked_receipt(self, receipt: object) -> tuple[str, int, int, str]:
        """(generation, index, version, token) of a receipt this farm issued
        for this queue; InvalidReceipt for anything else (malformed, forged)."""
        issued = self._issued.get(receipt) if isinstance(receipt, str) else None
        if issued is not None:
            return issued  # handed out by this consumer: checked when it was made
        parsed = entries.parse_receipt(receipt)
        if parsed is None:
            raise InvalidReceipt("malformed receipt")
        if not entries.issued_here(self.layout.key_base, *parsed):
            raise InvalidReceipt("this receipt was not issued by this queue")
        return parsed

    def ack(self, receipt: str) -> None:
        """The message is done. Raises ClaimLost if another consumer holds it
        now (its claim expired and it was delivered again)."""
        if self.ack_many([receipt]):
            raise ClaimLost("the message's claim expired and another consumer holds it now")

    def ack_many(self, receipts: Sequence[str]) -> list[str]:
        """Finish the messages, in one round trip: a `cas` on each entry at the
        version its receipt names. Returns the receipts refused because their
        message was delivered again since (another consumer holds it now). An
        ack after the visibility timeout that nobody took over still counts
        (at-least-once)."""
        parsed = [self.checked_receipt(r) for r in receipts]
        if not parsed:
            return []
        with memcached_errors():
            results = self._cas_acked(parsed)
            for _ in range(ACK_ATTEMPTS):
                changed = [k for k, ok in enumerate(results) if ok is False]
                current = self._versions_now([parsed[k] for k in changed]) if changed else []
                again = [(k, now) for k, now in zip(changed, current, strict=True) if now is not None]
                if not again:
                    break
                for (k, _), ok in zip(again, self._cas_acked([now for _, now in again]), strict=True):
                    results[k] = ok
            done = [(gen, i) for (gen, i, _, _), ok in zip(parsed, results, strict=True) if ok is not False]
            # Without waiting: a claim left behind only lapses on its own.
            if not self.layout.speaks_meta:  # mirrored
                self.layout.client.delete_many(
                    [self.layout.key(gen, "c", i) for gen, i in done], noreply=True
                )
                self.layout.stat("acked", sum(1 for ok in results if ok))
            else:
                bases = {g: self.layout.wire_base(g) for g in {g for g, _ in done}}
                deletes = [delete_quietly_line(b"%sc:%d" % (bases[g], i)) for g, i in done]
                stat = self.layout.stat_command("acked", sum(1 for ok in results if ok))
                self.layout.meta_client.meta([], quietly=b"".join(deletes) + stat)
        for receipt in receipts:
            self._issued.pop(receipt, None)
        return [receipt for receipt, ok in zip(receipts, results, strict=True) if ok is False]

    def _cas_acked(self, parsed: list[tuple[str, int, int, str]]) -> list[bool | None]:
        """Mark each entry acked if it is still at its receipt's version, in one
        round trip: True stored, False changed since (EX), None gone (NF)."""
        if not self.layout.speaks_meta:  # mirrored: the classic pipeline both servers take
            return self.layout.client.cas_many(
                [(self.layout.key(gen, "m", i), ACKED, version) for gen, i, version, _ in parsed],
                self.layout.finished_ttl,
            )
        ttl = self.layout.finished_ttl
        bases = {gen: self.layout.wire_base(gen) for gen in {p[0] for p in parsed}}
        # Quiet: only an entry changed since (EX) or gone (NF) answers, named by its opaque.
        acked = flags_bytes(set_flags(ttl=ttl, quiet=True))
        commands = [
            set_line(b"%sm:%d" % (bases[gen], i), with_opaque(with_cas(acked, version), pos), ACKED)
            for pos, (gen, i, version, _) in enumerate(parsed)
        ]
        _, failed = self.layout.meta_client.meta_quiet([], commands)
        results: list[bool | None] = [True] * len(parsed)
        for token, reply in failed.items():
            results[int(token)] = False if reply.changed else None
        return results

    def _versions_now(
        self, parsed: list[tuple[str, int, int, str]]
    ) -> list[tuple[str, int, int, str] | None]:
        """For receipts whose entry's CAS changed since: the receipt at the
        entry's CAS now if the entry is still the one delivered (memcached
        moved it to another slab page: same bytes, new CAS), else None (it
        was delivered again, finished or gone)."""
        found = self.layout.client.gets_many([self.layout.key(gen, "m", i) for gen, i, _, _ in parsed])
        out: list[tuple[str, int, int, str] | None] = []
        for gen, i, _, token in parsed:
            raw, now = found.get(self.layout.key(gen, "m", i), (None, None))
            same = raw is not None and self._same_delivery(gen, i, token, raw)
            out.append((gen, i, int(now), token) if same else None)
        return out

    def _same_delivery(self, gen: str, i: int, token: str, raw: bytes) -> bool:
        """Whether entry `raw` is as the receipt's delivery left it: every
        redelivery rewrites the entry with its count one higher."""
        count = entries.delivered_after(token)
        if count is None or entries.is_finished(raw):
            return False
        try:
            return entries.decode(self.layout.key_base, raw, gen, i).redeliveries == count
        except BadEntry:
            return False

    def _still_mine(
        self, parsed: list[tuple[str, int, int, str]], receipts: Sequence[str]
    ) -> tuple[list[tuple[str, int]], list[str]]:
        """Split receipts into those whose entry is as they received it (or
        gone) and those whose message was delivered again since."""
        if not parsed:
            return [], []
        found = self.layout.client.gets_many([self.layout.key(gen, "m", i) for gen, i, _, _ in parsed])
        mine, lost = [], []
        for (gen, i, version, token), receipt in zip(parsed, receipts, strict=True):
            raw, now = found.get(self.layout.key(gen, "m", i), (None, None))
            if now is None or int(now) == version or self._same_delivery(gen, i, token, raw):
                mine.append((gen, i))
            else:
                lost.append(receipt)
        return mine, lost

    def finish(self, finished: Sequence[tuple[str, int]]) -> None:
        """Mark entries acked (deleted once the floor passes them) and drop
        their claims, in one round trip."""
        if not finished:
            return
        self.layout.client.set_many(
            {self.layout.key(gen, "m", i): ACKED for gen, i in finished},
            expire=self.layout.finished_ttl,
            noreply=False,
        )
        self.layout.client.delete_many([self.layout.key(gen, "c", i) for gen, i in finished], noreply=True)

    def extend(self, receipts: Sequence[str], seconds: int | None = None) -> None:
        """Keep claims alive: their messages stay hidden `seconds` more."""
        if not receipts:
            return
        seconds = seconds or self.layout.visibility_timeout
        with memcached_errors():
            keys = []
            for receipt in receipts:
                gen, i, _, _ = self.checked_receipt(receipt)
                keys.append(self.layout.key(gen, "c", i))
            self.layout.client.touch_many(keys, int(seconds))

    def reject(self, receipt: str, *, admit: Admit | None = None) -> int | None:
        """Put the message back at the tail, marked redelivered; returns its new
        index, or None if it went to the dead letters (rejected once too
        often) or was already finished. ClaimLost if another consumer holds it.
        `admit(body_size, dead)` is told first of the memory the message will
        take again (a cap's count: it may refuse, and the claim then stays)."""
        parsed = self.checked_receipt(receipt)
        gen, i = parsed[:2]
        with memcached_errors():
            mine, lost = self._still_mine([parsed], [receipt])
            if lost:
                raise ClaimLost("the message's claim expired and another consumer holds it now")
            raw = self.layout.client.get(self.layout.key(gen, "m", i))
            if raw is None or entries.is_finished(raw):
                return None
            try:
                entry = entries.decode(self.layout.key_base, raw, gen, i)
            except BadEntry as exc:
                self.bury_entries(gen, [(i, receipt, None, raw, 1, str(exc))])
                return None
            redeliveries = entry.redeliveries + 1
            if redeliveries >= self.layout.max_deliveries and not self.layout.dead:
                if admit is not None:
                    admit(len(entry.body), True)
                reason = f"rejected or redelivered {redeliveries} times"
                self.bury_entries(gen, [(i, receipt, entry.enqueued_at, entry.body, redeliveries, reason)])
                return None
            if admit is not None:
                admit(len(entry.body), False)
            (index,) = self.producer.put_many([entry.body], redeliveries=redeliveries)
            self.finish(mine)
            return index

    def bury(self, message: Message, reason: str) -> None:
        """Send a claimed message to the dead letters: its consumer cannot
        process it (malformed, not what the queue carries). The ones behind
        it go on."""
        self.bury_many([(message, reason)])

    def bury_many(self, messages: Sequence[tuple[Message, str]]) -> None:
        if not messages:
            return
        parsed = [self.checked_receipt(m.receipt) for m, _ in messages]
        with memcached_errors():
            mine, _ = self._still_mine(parsed, [m.receipt for m, _ in messages])
            keep = set(mine)
            by_gen: dict[str, list] = {}
            for (message, reason), (gen, i, _, _) in zip(messages, parsed, strict=True):
                if (gen, i) in keep:  # not taken over by another consumer meanwhile
                    letter = (
                        i,
                        message.receipt,
                        message.enqueued_at,
                        message.body,
                        message.redeliveries + 1,
                        reason,
                    )
                    by_gen.setdefault(gen, []).append(letter)
            for gen, letters in by_gen.items():
                self.bury_entries(gen, letters)

    def bury_entries(self, gen: str, dead: list[tuple[int, str, float | None, bytes, int, str]]) -> None:
        """Move claimed entries to the dead letters, then finish them here."""
        if self.layout.dead:
            # A dead letter that is not ours: dropped (it is counted as refused).
            for i, _, _, _, _, reason in dead:
                refused("queue", self.layout.key(gen, "m", i), reason)
        else:
            now = time.time()
            letters = [
                DeadLetter(
                    reason=reason,
                    queue=self.layout.name,
                    index=i,
                    deliveries=deliveries,
                    enqueued_at=enqueued_at,
                    dead_at=now,
                    body=body,
                ).to_json()
                for i, _, enqueued_at, body, deliveries, reason in dead
            ]
            for i, _, _, _, _, reason in dead:
                logger.warning(
                    "queue %s: message %s:%s to the dead letters: %s", self.layout.name, gen, i, reason
                )
            Producer(Layout(self.layout.name, client=self.layout.client, dead=True)).put_many(letters)
            self.layout.stat("dead", len(dead))
        self.finish([(gen, i) for i, *_ in dead])
