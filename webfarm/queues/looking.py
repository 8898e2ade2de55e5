"""Looking at a queue without consuming it: stats, peek, what it holds."""

from collections.abc import Iterator

from webfarm.queues import entries
from webfarm.queues.entries import BadEntry
from webfarm.queues.layout import (
    SCAN_BATCH,
    STATS,
    Layout,
    Message,
    memcached_errors,
    number,
)


class Inspector:
    """A queue's part that looks without consuming."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def dead_letters(self) -> "Inspector":
        return Inspector(Layout(self.layout.name, client=self.layout.client, dead=True))

    def exists(self) -> bool:
        """Whether some process has used this queue since memcached started.
        Unlike stats() and peek(), asking does not create it."""
        with memcached_errors():
            return self.layout.client.get(self.layout.gen_key()) is not None

    def stats(self) -> dict[str, int]:
        """Depth and counters in one round trip (two when there are dead letters)."""
        with memcached_errors():
            gen = self.layout.generation()
            keys = [self.layout.key(gen, k) for k in ("tail", "head", "floor")]
            dead_gen_key = f"d{self.layout.key_base}:gen"
            keys += [self.layout.stat_key(n) for n in STATS] + [dead_gen_key]
            found = self.layout.client.get_many(keys)
            tail, head = (number(found.get(k), 0) or 0 for k in keys[:2])
            # The first index is 1, as every other reader of the floor says:
            # a floor read as 0 counted one message too many (the front's cap).
            floor = number(found.get(keys[2]), 1) or 1
            result = {
                "ready": max(tail - head, 0),
                "unfinished": max(min(head, tail) - floor + 1, 0),
                "tail": tail,
                "head": head,
                "floor": floor,
                **{n: number(found.get(self.layout.stat_key(n)), 0) or 0 for n in STATS},
                "dead_letters": 0,
            }
            dead_gen = found.get(dead_gen_key)
            if dead_gen is not None and not self.layout.dead:
                # Not yet finished: waiting, or being looked at (claimed).
                dead = self.dead_letters()
                dead_keys = [dead.layout.key(dead_gen.decode(errors="replace"), k) for k in ("tail", "floor")]
                counts = self.layout.client.get_many(dead_keys)
                dead_tail, dead_floor = (
                    number(counts.get(dead_keys[0]), 0),
                    number(counts.get(dead_keys[1]), 1),
                )
                result["dead_letters"] = max((dead_tail or 0) - (dead_floor or 1) + 1, 0)
            return result

    def holds_nothing(self) -> bool:
        """No message waits, is claimed or lies in the dead letters."""
        stats = self.stats()
        return not stats["ready"] and not stats["dead_letters"] and not self.peek(1)

    def peek(self, limit: int, *, unreadable: list[int] | None = None) -> list[Message]:
        """Up to `limit` unfinished messages from the floor on, without claiming
        them (their receipts are empty): for looking, not for consuming.
        Entries whose MAC fails are left out; their indexes go into
        `unreadable` when it is given (a tool says so)."""
        with memcached_errors():
            gen = self.layout.generation()
            found = self.layout.client.get_many([self.layout.key(gen, "floor"), self.layout.key(gen, "tail")])
            floor = number(found.get(self.layout.key(gen, "floor")), 1) or 1
            tail = number(found.get(self.layout.key(gen, "tail")), 0) or 0
            seen: list[Message] = []
            for start in range(floor, tail + 1, SCAN_BATCH):
                batch = range(start, min(start + SCAN_BATCH, tail + 1))
                values = self.layout.client.get_many([self.layout.key(gen, "m", i) for i in batch])
                for i in batch:
                    raw = values.get(self.layout.key(gen, "m", i))
                    if raw is None or entries.is_finished(raw):
                        continue
                    try:
                        entry = entries.decode(self.layout.key_base, raw, gen, i)
                    except BadEntry:
                        if unreadable is not None:
                            unreadable.append(i)
                        continue
                    seen.append(
                        Message(
                            self.layout.name, i, entry.body, "", entry.redeliveries > 0, entry.enqueued_at
                        )
                    )
                    if len(seen) >= limit:
                        return seen
            return seen

    def held_bytes(self) -> int:
        """The memory memcached takes for the queue's entries (layout.held_memory)
        and its dead letters: a scan from the floor to the tail, for counting
        again what a cap (webfarm.queues.front) counted up."""
        with memcached_errors():
            gen = self.layout.generation()
            found = self.layout.client.get_many(
                [self.layout.key(gen, "floor"), self.layout.key(gen, "tail"), f"d{self.layout.key_base}:gen"]
            )
            floor = number(found.get(self.layout.key(gen, "floor")), 1) or 1
            tail = number(found.get(self.layout.key(gen, "tail")), 0) or 0
            held = sum(map(self.layout.held_memory, self._entries(gen, floor, tail)))
        if not self.layout.dead and found.get(f"d{self.layout.key_base}:gen") is not None:
            held += self.dead_letters().held_bytes()
        return held

    def entries_between(self, floor: int, tail: int) -> int:
        """How many entries there are from `floor` to `tail` (a scan): the
        indexes in between that hold nothing are holes, reserved by a
        producer and never written, which consumers will pass."""
        with memcached_errors():
            return sum(1 for _ in self._entries(self.layout.generation(), floor, tail))

    def _entries(self, gen: str, floor: int, tail: int) -> Iterator[bytes]:
        for start in range(floor, tail + 1, SCAN_BATCH):
            keys = [self.layout.key(gen, "m", i) for i in range(start, min(start + SCAN_BATCH, tail + 1))]
            yield from self.layout.client.get_many(keys).values()
