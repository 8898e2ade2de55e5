"""What every part of a queue shares: its settings, its key layout, its
generation, its stats counters, and the messages it hands out (webfarm/queues/queue.py
has the design)."""

import base64
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple, cast

from pymemcache.exceptions import MemcacheError, MemcacheServerError

from webfarm.core.client import (
    ReconnectingClient,
    StableHashClient,
    client_epoch,
    incr_quietly_line,
    item_memory,
    kept_together,
    server_client,
)
from webfarm.core.tampering import refused
from webfarm.queues import entries, registry
from webfarm.queues.conf import get_config
from webfarm.queues.exceptions import (
    QueueError,
    QueueFull,
    QueueGone,
    QueueUnavailable,
    is_full,
)
from webfarm.queues.mirror import MirroredClient, mirrored_client
from webfarm.queues.names import validate_name

# A queue's keys and its dead letters' live on the server of "q:<name>".
QUEUE_KEYS, DEAD_LETTER_KEYS = kept_together("q:"), kept_together("dq:")
SCAN_BATCH = 200
ATTEMPTS = 20
# Puts closer together than this grow the producer's index block, up to MAX_BLOCK.
BURST_GAP = 0.01
MAX_BLOCK = 16
# The horizon marker is rewritten at every scan; this only bounds an idle queue's.
SCAN_TTL = 3600
# What a claim key holds: it only has to exist (receipts are checked against
# the entry's version, not against the claim).
CLAIMED = b"1"
# Digits of an index that memory is charged for (a trillion puts in a generation).
INDEX_DIGITS = 12
STATS = ("in", "out", "acked", "holes", "redelivered", "full", "resets", "purges", "dead")


class Message(NamedTuple):
    """A delivered message. (A named tuple: a batch makes hundreds, and a
    frozen dataclass costs three times as much to make.)"""

    queue: str
    index: int  # type: ignore[assignment]  # shadows tuple.index, which nothing here calls
    body: bytes
    receipt: str
    redelivered: bool
    enqueued_at: float
    # Failed deliveries before this one (claims that expired, rejects).
    redeliveries: int = 0
    generation: str = ""

    @property
    def position(self) -> str:
        """Where it sits in the queue ("<generation>.<index>"), the same at every delivery."""
        return f"{self.generation}.{self.index}"


@dataclass(frozen=True)
class DeadLetter:
    """A message taken out of its queue, with why."""

    reason: str
    queue: str
    index: int
    deliveries: int
    enqueued_at: float | None
    dead_at: float
    body: bytes

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "reason": self.reason,
                "queue": self.queue,
                "index": self.index,
                "deliveries": self.deliveries,
                "enqueued_at": self.enqueued_at,
                "dead_at": self.dead_at,
                "body": base64.b64encode(self.body).decode(),
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> "DeadLetter":
        data = json.loads(raw)
        return cls(**{**data, "body": base64.b64decode(data["body"])})


@contextmanager
def memcached_errors() -> Iterator[None]:
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


def number(raw: bytes | None, default: int) -> int | None:
    """A counter's value; None when it is not a number (not written by us)."""
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        return None


# A queue's client: one server's, or a mirrored pair's (QUEUES["MIRRORS"]).
QueueClient = ReconnectingClient | MirroredClient


class Layout:
    """One named queue's keys, settings, generation and counters: what its
    producer, consumer and inspector share (webfarm/queues/queue.py composes them).

    dead=True: the queue's dead letters.
    """

    def __init__(
        self,
        name: str,
        *,
        client: "QueueClient | None" = None,
        ring: StableHashClient | None = None,
        dead: bool = False,
    ) -> None:
        self.name = validate_name(name)
        self.dead = dead
        self.key_base = f"{'dq' if dead else 'q'}:{self.name}"
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
        self.max_deliveries: int = config["MAX_DELIVERIES"]
        self.finished_ttl: int = config["FINISHED_TTL"]
        self.hole_ttl: int = config["HOLE_TTL"]
        self.entry_ttl: int = config["DEAD_LETTER_TTL"] if dead else 0
        self._mirrors: list[str] = config["MIRRORS"]
        self._stats_ready = False
        # The generation this process works in, as it last read the gen key.
        self.gen: str | None = None
        # Only a generation that exists is used, never started (a queue's
        # copy on the server it moved from: webfarm/queues/queue.py).
        self.existing_only = False

    @property
    def ring(self) -> StableHashClient | None:
        return self._ring

    @property
    def on_main_ring(self) -> bool:
        """Whether its server is the one its name hashes to on the farm's
        ring (not a ring of its own, nor the queues' mirrors)."""
        return self._ring is None and not self._mirrors and self._epoch != -1

    # -- keys -------------------------------------------------------------------

    @property
    def speaks_meta(self) -> bool:
        """Whether the client takes meta commands: a mirrored one takes only
        the classic pipeline both of its servers take."""
        return hasattr(self.client, "meta")

    @property
    def meta_client(self) -> ReconnectingClient:
        """The client, where speaks_meta says it takes meta commands."""
        return cast(ReconnectingClient, self.client)

    @property
    def client(self) -> "QueueClient":
        # Finding the server hashes in pure Python: do it once per process.
        stale = self._epoch != -1 and self._epoch != client_epoch()
        if self._client is None or self._client_pid != os.getpid() or stale:
            if self._mirrors and self._ring is None:
                self._client = mirrored_client(self._mirrors)
            else:
                # Dead letters live on their queue's server.
                self._client = server_client(f"q:{self.name}", self._ring)
            self._client_pid = os.getpid()
            self._epoch = client_epoch()
        return self._client

    def gen_key(self) -> str:
        return f"{self.key_base}:gen"

    def key(self, gen: str, *parts: object) -> str:
        return ":".join([self.key_base, gen, *map(str, parts)])

    def wire_base(self, gen: str) -> bytes:
        """The wire form of this generation's keys up to their last part
        ("<namespace>:q:<name>:<gen>:"), made by the client: a batch appends
        "m:<i>" or "c:<i>" to it instead of checking each key."""
        return self.client.wire_key(self.key(gen, ""))

    def message_memory(self, body_size: int) -> int:
        """The memory memcached takes for one message with a body of
        `body_size` bytes, at most: its entry and, while a consumer works on
        it, its claim, each in its slab chunk (item_memory)."""
        key = len(self.wire_base("0" * 8)) + len(b"m:") + INDEX_DIGITS
        return item_memory(key, entries.MAX_ENVELOPE + body_size) + item_memory(key, len(CLAIMED))

    def held_memory(self, raw: bytes) -> int:
        """The memory an entry read back takes: a message's as message_memory
        charges it, a finished entry's own until the floor passes it."""
        if entries.is_finished(raw):
            return item_memory(len(self.wire_base("0" * 8)) + len(b"m:") + INDEX_DIGITS, len(raw))
        return self.message_memory(max(len(raw) - entries.MAX_ENVELOPE, 0))

    def stat(self, what: str, n: int = 1) -> None:
        """Best effort and without waiting for the reply: a counter never slows
        or fails the operation it counts."""
        try:
            if not self._stats_ready:
                self.client.add_many({self.stat_key(s): b"0" for s in STATS})
                self._stats_ready = True
            self.client.incr(self.stat_key(what), n, noreply=True)
        except (MemcacheError, OSError):
            pass

    def uncount(self, what: str, n: int) -> None:
        """Take back what a stat_command counted ahead (a put that lost its index)."""
        with suppress(MemcacheError, OSError):
            if n:
                self.meta_client.decr(self.stat_key(what), n, noreply=True)

    def stat_command(self, what: str, n: int) -> bytes:
        """stat() as a noreply command to send with others (once the counters exist)."""
        if not self._stats_ready or not n:
            self.stat(what, n) if n else None
            return b""
        return incr_quietly_line(self.client.wire_key(self.stat_key(what)), n)

    def stat_key(self, what: str) -> str:
        return f"{self.key_base}:stat:{what}"

    def generation(self) -> str:
        if self.gen is None:
            raw = self.client.get(self.gen_key())
            if raw is None and self.existing_only:
                raise QueueGone(f"queue {self.name} has no generation on this server")
            if raw is None or not entries.GENERATION_RE.fullmatch(raw.decode(errors="replace")):
                if raw is not None:
                    refused("queue", self.gen_key(), "not a generation id")
                self.start_generation(expected=None if raw is None else raw.decode(errors="replace"))
                raw = self.client.get(self.gen_key())
                if raw is None or not entries.GENERATION_RE.fullmatch(raw.decode(errors="replace")):
                    raise QueueUnavailable(f"queue {self.name}: no valid generation could be set")
            self.gen = raw.decode()
            if not self.dead:
                registry.register(self.name, self.gen, self._ring)
            register = getattr(self.client, "register", None)
            if register is not None:  # mirrored: the repair must know every queue
                register(self.key_base)
        return self.gen

    def moved_on(self, gen: str, named: bytes | None) -> str | None:
        """What the generation key holds, read beside work done in `gen` (which
        was alive then): the generation the queue moved on to, or None when it
        still names `gen`.

        Processes keep the generation they read, and a process that starts
        later reads the key. Evicted alone or overwritten, the key is put back
        to `gen`; if another process already moved the queue on (it found
        the key so), everyone follows it."""
        if named == gen.encode():
            return None
        if named is None and self.existing_only:
            raise QueueGone(f"queue {self.name} was retired from this server")
        key = self.gen_key()
        text = None if named is None else named.decode(errors="replace")
        if text is not None and entries.GENERATION_RE.fullmatch(text):
            return text
        if named is None:
            self.client.add(key, gen.encode(), noreply=False)
        else:
            refused("queue", key, "not a generation id")
            raw, token = self.client.gets(key)
            if raw == named:
                self.client.cas(key, gen.encode(), token, noreply=False)
        raw = self.client.get(key)
        now: str | None = None if raw is None else raw.decode(errors="replace")
        if now is None or now == gen or not entries.GENERATION_RE.fullmatch(now):
            return None  # put back (or still being fought over: the next look settles it)
        return now

    def start_generation(self, *, expected: str | None, reason: str = "resets") -> None:
        """Move to a fresh key space, unless another process already has."""
        if self.existing_only:
            raise QueueGone(f"queue {self.name} was retired from this server")
        new = secrets.token_hex(4)
        for key, value in (("tail", b"0"), ("head", b"0"), ("floor", b"1")):
            self.client.add(self.key(new, key), value, noreply=False)
        if expected is None:
            self.client.add(self.gen_key(), new.encode(), noreply=False)
            return
        raw, token = self.client.gets(self.gen_key())
        if raw is None:
            self.client.add(self.gen_key(), new.encode(), noreply=False)
        elif raw.decode(errors="replace") == expected and self.client.cas(
            self.gen_key(), new.encode(), token, noreply=False
        ):
            self.stat(reason)

    def counters_lost(self, gen: str, reason: str = "resets") -> None:
        """tail or head is gone (a restart, flush) or not a number: start over in
        a new generation so fresh indexes cannot land on surviving old entries."""
        self.start_generation(expected=gen, reason=reason)
        self.gen = None
