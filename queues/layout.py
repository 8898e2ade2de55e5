"""What every part of a queue shares: its settings, its key layout, its
generation, its stats counters, and the messages it hands out (queues/core.py
has the design)."""

import base64
import json
import os
import secrets
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import NamedTuple

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError, MemcacheServerError

from core.client import StableHashClient, client_epoch, server_client
from core.tampering import refused
from queues import entries, registry
from queues.conf import get_config
from queues.exceptions import (
    QueueError,
    QueueFull,
    QueueUnavailable,
    is_full,
)
from queues.mirror import mirrored_client
from queues.names import validate_name

SCAN_BATCH = 200
ATTEMPTS = 20
# Puts closer together than this grow the producer's index block, up to MAX_BLOCK.
BURST_GAP = 0.01
MAX_BLOCK = 16
# The horizon marker is rewritten at every scan; this only bounds an idle queue's.
SCAN_TTL = 3600
STATS = ("in", "out", "acked", "holes", "redelivered", "full", "resets", "purges", "dead")


class Message(NamedTuple):
    """A delivered message. (A named tuple: a batch makes hundreds, and a
    frozen dataclass costs three times as much to make.)"""

    queue: str
    index: int
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


class QueueBase:
    """The state and the keys of one named queue; Queue (queues/core.py) adds
    what it does.

    dead=True: the queue's dead letters (`dead_letters()` makes it).
    """

    def __init__(
        self,
        name: str,
        *,
        client: Client | None = None,
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
        self._buffer: deque[tuple[float, Message]] = deque()
        self._issued: dict[str, tuple[str, int, int, str]] = {}  # receipt -> its parts
        self._busy = False  # the last fresh take found more than it asked for
        self._stats_ready = False
        self._reserve: deque[int] = deque()  # indexes taken from the tail, not yet written
        self._reserve_gen: str | None = None
        self._reserved_at = 0.0
        self._block = 1
        self._last_put = -1.0
        self._gen: str | None = None
        self._missing: dict[int, float] = {}  # index -> when first seen empty
        self._tail_seen = 0  # the tail as this consumer last read it
        self._last_recover = 0.0
        # Generations the queue moved on from that may still hold messages:
        # gen -> (its tail when this consumer moved on, when).
        self._superseded: dict[str, tuple[int, float]] = {}

    # -- keys -------------------------------------------------------------------

    @property
    def speaks_meta(self) -> bool:
        """Whether the client takes meta commands: a mirrored one takes only
        the classic pipeline both of its servers take."""
        return hasattr(self.client, "meta")

    @property
    def client(self) -> Client:
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

    def dead_letters(self) -> "QueueBase":
        """This queue's dead letters, a queue of DeadLetter JSON documents."""
        dead = type(self)(self.name, client=self.client, dead=True)
        dead.visibility_timeout = self.visibility_timeout
        return dead

    def _gen_key(self) -> str:
        return f"{self.key_base}:gen"

    def _key(self, gen: str, *parts: object) -> str:
        return ":".join([self.key_base, gen, *map(str, parts)])

    def _stat(self, what: str, n: int = 1) -> None:
        """Best effort and without waiting for the reply: a counter never slows
        or fails the operation it counts."""
        try:
            if not self._stats_ready:
                self.client.add_many({self._stat_key(s): b"0" for s in STATS})
                self._stats_ready = True
            self.client.incr(self._stat_key(what), n, noreply=True)
        except (MemcacheError, OSError):
            pass

    def _uncount(self, what: str, n: int) -> None:
        """Take back what a _stat_command counted ahead (a put that lost its index)."""
        with suppress(MemcacheError, OSError):
            if n:
                self.client.decr(self._stat_key(what), n, noreply=True)

    def _stat_command(self, what: str, n: int) -> bytes:
        """_stat as a noreply command to send with others (once the counters exist)."""
        if not self._stats_ready or not n:
            self._stat(what, n) if n else None
            return b""
        return b"incr %s%s %d noreply\r\n" % (self.client.key_prefix, self._stat_key(what).encode(), n)

    def _stat_key(self, what: str) -> str:
        return f"{self.key_base}:stat:{what}"

    def _generation(self) -> str:
        if self._gen is None:
            raw = self.client.get(self._gen_key())
            if raw is None or not entries.GENERATION_RE.fullmatch(raw.decode(errors="replace")):
                if raw is not None:
                    refused("queue", self._gen_key(), "not a generation id")
                self._start_generation(expected=None if raw is None else raw.decode(errors="replace"))
                raw = self.client.get(self._gen_key())
                if raw is None or not entries.GENERATION_RE.fullmatch(raw.decode(errors="replace")):
                    raise QueueUnavailable(f"queue {self.name}: no valid generation could be set")
            self._gen = raw.decode()
            if not self.dead:
                registry.register(self.name, self._gen)
            register = getattr(self.client, "register", None)
            if register is not None:  # mirrored: the repair must know every queue
                register(self.key_base)
        return self._gen

    def _moved_on(self, gen: str, named: bytes | None) -> str | None:
        """What the generation key holds, read beside work done in `gen` (which
        was alive then): the generation the queue moved on to, or None when it
        still names `gen`.

        Processes keep the generation they read, and a process that starts
        later reads the key. Evicted alone or overwritten, the key is put back
        to `gen`; if another process already moved the queue on (it found
        the key so), everyone follows it."""
        if named == gen.encode():
            return None
        key = self._gen_key()
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
        now = None if raw is None else raw.decode(errors="replace")
        if now is None or now == gen or not entries.GENERATION_RE.fullmatch(now):
            return None  # put back (or still being fought over: the next look settles it)
        return now

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
        elif raw.decode(errors="replace") == expected and self.client.cas(
            self._gen_key(), new.encode(), token, noreply=False
        ):
            self._stat(reason)

    def _counters_lost(self, gen: str, reason: str = "resets") -> None:
        """tail or head is gone (a restart, flush) or not a number: start over in
        a new generation so fresh indexes cannot land on surviving old entries."""
        self._start_generation(expected=gen, reason=reason)
        self._gen = None
        self._missing.clear()
        self._tail_seen = 0
