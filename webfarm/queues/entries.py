"""How queue entries and receipts are written, and checked when read back.

An entry is one memcached value:

    M<redeliveries> <enqueued at> <mac>\\n<body>      a message
    A                                                 acknowledged
    H                                                 a hole (an index nobody wrote)

The MAC (keyed BLAKE2b, webfarm.core.seal) covers the queue's name, the entry's
generation and index, the enqueue time and the body, so a message planted in
memcached by someone else (a forged Celery task, a fake vote), one copied
from another queue or to another index of its own (a replay: the task would
run again), or one cut short is refused by every consumer and goes to the
dead letters. The
redelivery count is outside the MAC: consumers rewrite it, and all a writer
could do with it is send a message to the dead letters sooner or later.

A receipt, `<generation>.<index>.<version>.<nonce><mac>`, names one delivery:
the entry's version is memcached's CAS unique of the entry as it was
delivered. Its MAC refuses forged receipts without a round trip. `ack` is a
`cas` on that version: every redelivery rewrites the entry (its redelivery
count), so the receipt of a delivery another consumer has taken over no
longer matches, and the ack is refused without touching the message.
"""

import hashlib
import hmac
import math
import random
import re
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple, TypeGuard

from webfarm.core.seal import MAC_BYTES, PERSON, mac, secrets_in_use

MESSAGE = b"M"
ACKED = b"A"
HOLE = b"H"
RECEIPT_RE = re.compile(
    r"(?P<gen>[0-9a-f]{8})\.(?P<index>[1-9][0-9]{0,17})\.(?P<version>[0-9]{1,20})\.(?P<token>[0-9a-f]{48})"
)
GENERATION_RE = re.compile(r"[0-9a-f]{8}")
UNCOUNTED = 0xFF  # a receipt's count of redeliveries that says nothing
# A message's entry before its body, at most: "M<redeliveries> <enqueued at> <mac>\n"
# (decode refuses a longer time; a count past 999 only sends it to the dead letters).
MAX_ENVELOPE = len(b"M999 ") + 15 + len(b" ") + 32 + len(b"\n")
# Enqueue times after 2286 are no times (and overflow datetime).
_LATEST = 1e10


class BadEntry(ValueError):
    """An entry this farm did not write (or not for this queue); `reason` says why."""


class Entry(NamedTuple):
    redeliveries: int
    enqueued_at: float
    body: bytes


@lru_cache(maxsize=256)
def _hasher(queue_key: str, secret: bytes) -> "hashlib.blake2b":
    """A keyed BLAKE2b already fed the queue's key: copied for every message."""
    base = hashlib.blake2b(key=secret, digest_size=16, person=PERSON)
    base.update(queue_key.encode() + b"\0")
    return base


def _mac(queue_key: str, place: bytes, stamp: bytes, body: bytes, secret: bytes) -> bytes:
    digest = _hasher(queue_key, secret).copy()
    digest.update(place)
    digest.update(stamp)
    digest.update(b"\n")
    digest.update(body)
    return digest.hexdigest().encode()


def _place(gen: str, index: int) -> bytes:
    return b"%s.%d\0" % (gen.encode(), index)


def encode(
    queue_key: str,
    body: bytes,
    *,
    gen: str,
    index: int,
    redeliveries: int = 0,
    enqueued_at: float | None = None,
) -> bytes:
    """The entry for `body` at `index` of generation `gen` of the queue
    `queue_key` ("q:sitelog"): valid there only."""
    stamp = b"%.3f" % (time.time() if enqueued_at is None else enqueued_at)
    tag = _mac(queue_key, _place(gen, index), stamp, body, secrets_in_use()[0])
    return b"M%d %s %s\n%s" % (redeliveries, stamp, tag, body)


def with_redeliveries(raw: bytes, redeliveries: int) -> bytes:
    """The same message with another redelivery count (the MAC stays valid)."""
    return b"M%d %s" % (redeliveries, raw[raw.index(b" ") + 1 :])


def decode(queue_key: str, raw: bytes, gen: str, index: int) -> Entry:
    return decoder(queue_key)(raw, gen, index)


def decoder(queue_key: str) -> Callable[[bytes, str, int], Entry]:
    """decode() for many entries of one queue: the keyed hashes are set up once."""
    signing, *fallbacks = (_hasher(queue_key, secret) for secret in secrets_in_use())

    def verified(hasher: Any, place: bytes, stamp: bytes, body: bytes, tag: bytes) -> bool:
        digest = hasher.copy()
        digest.update(place)
        digest.update(stamp)
        digest.update(b"\n")
        digest.update(body)
        return hmac.compare_digest(tag, digest.hexdigest().encode())

    def decode(raw: bytes, gen: str, index: int) -> Entry:
        end = raw.find(b"\n")
        parts = raw[:end].split(b" ") if end > 0 and raw[:1] == MESSAGE else []
        if len(parts) != 3 or not parts[0][1:].isdigit() or len(parts[2]) != 32 or len(parts[1]) > 15:
            raise BadEntry("not a message of this farm's format")
        count, stamp, tag = parts
        body, place = raw[end + 1 :], _place(gen, index)
        if not verified(signing, place, stamp, body, tag) and not any(
            verified(h, place, stamp, body, tag) for h in fallbacks
        ):
            raise BadEntry(
                "bad MAC: written by something other than this farm, or for another index "
                "(or DJANGO_SECRET_KEY differs)"
            )
        try:
            enqueued_at = float(stamp)
        except ValueError:
            raise BadEntry("bad enqueue time") from None
        if not math.isfinite(enqueued_at) or not 0 <= enqueued_at < _LATEST:
            raise BadEntry("bad enqueue time")
        return Entry(int(count[1:]), enqueued_at, body)

    return decode


def is_finished(raw: bytes | None) -> TypeGuard[bytes]:
    return raw is not None and raw[:1] in (ACKED, HOLE)


# -- receipts ----------------------------------------------------------------------


def new_receipt(queue_key: str, gen: str, index: int, version: int, redeliveries: int = 0) -> tuple[str, str]:
    """A receipt for a delivery of the entry at `version`, and its token."""
    return receipt_maker(queue_key, gen)(index, version, redeliveries)


def receipt_maker(queue_key: str, gen: str) -> Callable[[int, int, int], tuple[str, str]]:
    """new_receipt for many deliveries of one queue and generation: the keyed
    hash is set up once. The nonce only makes two receipts differ (the MAC is
    what cannot be forged), so it need not come from the OS's generator.

    The nonce's first byte is the delivery's count of redeliveries, under the
    MAC: memcached gives an entry a new CAS when it moves the entry's slab
    page, and only this tells that delivery from a later one (every
    redelivery rewrites the entry with its count one higher)."""
    key = queue_key.encode()
    base = hashlib.blake2b(key, key=secrets_in_use()[0], digest_size=MAC_BYTES)
    base.update(b"\0")

    def make(index: int, version: int, redeliveries: int = 0) -> tuple[str, str]:
        nonce = f"{min(redeliveries, UNCOUNTED):02x}{random.getrandbits(56):014x}"
        digest = base.copy()
        digest.update(f"{gen}.{index}.{version}.{nonce}".encode())
        token = nonce + digest.hexdigest()
        return f"{gen}.{index}.{version}.{token}", token

    return make


def delivered_after(token: str) -> int | None:
    """How many redeliveries the entry had counted when the receipt's delivery
    was made (None: too many to say)."""
    count = int(token[:2], 16)
    return None if count == UNCOUNTED else count


def parse_receipt(receipt: object) -> tuple[str, int, int, str] | None:
    """(generation, index, version, token) of a well-formed receipt, else None."""
    match = RECEIPT_RE.fullmatch(receipt) if isinstance(receipt, str) else None
    if match is None:
        return None
    return match["gen"], int(match["index"]), int(match["version"]), match["token"]


def issued_here(queue_key: str, gen: str, index: int, version: int, token: str) -> bool:
    """Whether this farm made the receipt (for this queue, generation, index and version)."""
    nonce, tag = token[:16], token[16:]
    message = f"{gen}.{index}.{version}.{nonce}".encode()
    return any(hmac.compare_digest(tag, mac(queue_key, message, s).hex()) for s in secrets_in_use())
