"""Named counters any node or worker increments in memcached.

    count("jobs", kind="sales-by-region", state="queued")

One round trip (`incr`) once a counter exists in this process. memcached down
never raises into the caller: the increment is kept as "dropped" in this
process and added to the `counters_dropped` counter once memcached answers
again.

Counters only go up. The harvester (webfarm.stats.harvest) stores how far it has read
each one, so nothing is reset and no increment can fall between a read and a
reset. A generation key tells the harvester when memcached lost its counters.
"""

import atexit
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import MetaBatch, MetaReply, StableHashClient, get_client
from webfarm.core.lists import add_member
from webfarm.core.tampering import value_refused

logger = logging.getLogger(__name__)

REGISTRY = "c:registry"
GENERATION = "c:generation"
DROPPED = "counters_dropped"
_LABEL_RE = re.compile(r"[A-Za-z0-9_.-]{1,96}")
_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")

_lock = threading.Lock()
_known: set[str] = set()
# Names and labels count_soon has checked: every poll counts the same few.
_checked: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
MAX_CHECKED = 10_000
_dropped = 0


def counter_key(name: str, **labels: str) -> str:
    """counter name and labels -> "name|label=value|..." (sorted, validated)."""
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"bad counter name {name!r}")
    parts = [name]
    for label, value in sorted(labels.items()):
        if not _NAME_RE.fullmatch(label) or not _LABEL_RE.fullmatch(str(value)):
            raise ValueError(f"bad counter label {label}={value!r}")
        parts.append(f"{label}={value}")
    return "|".join(parts)


def parse_counter_key(key: str) -> tuple[str, dict[str, str]]:
    """ "name|label=value|..." -> (name, labels); ValueError for anything
    counter_key() could not have made."""
    name, *parts = key.split("|")
    labels = dict(part.split("=", 1) for part in parts if "=" in part)
    if len(labels) != len(parts) or counter_key(name, **labels) != key:
        raise ValueError(f"not a counter key: {key!r:.80}")
    return name, labels


def is_counter_key(key: str) -> bool:
    try:
        parse_counter_key(key)
    except ValueError:
        return False
    return True


def count(name: str, n: int = 1, /, **labels: str) -> None:
    """Add n to a counter. Never raises for memcached; drops are counted."""
    key = counter_key(name, **labels)
    global _dropped
    try:
        client = get_client()
        if _dropped:
            dropped = _dropped
            _incr(client, DROPPED, dropped)
            with _lock:  # only once memcached has them
                _dropped -= dropped
        _incr(client, key, n)
    except (MemcacheError, OSError) as exc:
        with _lock:
            _dropped += n
        logger.debug("counter %s dropped: %s", key, exc)


def _incr(client: StableHashClient, key: str, n: int) -> None:
    if key in _known and client.incr(f"c:{key}", n) is not None:
        return
    # First use here, or memcached lost it: make sure it exists and is listed.
    client.add(GENERATION, secrets.token_hex(4).encode())
    if client.add(f"c:{key}", b"0"):
        add_member(client, REGISTRY, key)
    client.incr(f"c:{key}", n)
    with _lock:
        _known.add(key)


# What count_in() returns: call it with the batch's replies (None if it did not run).
Settle = Callable[[list[MetaReply] | None], None]


def count_in(batch: MetaBatch, name: str, n: int = 1, /, **labels: str) -> Settle:
    """count(), riding in the caller's batch of meta commands: no round trip
    of its own once the counter exists in this process. What the batch could
    not count (its first use here, memcached lost it, the batch never ran)
    the returned settle counts the careful way."""
    key = counter_key(name, **labels)
    if key not in _known:
        return lambda replies: count(name, n, **labels)
    index = batch.arithmetic(f"c:{key}", delta=n)

    def settle(replies: list[MetaReply] | None) -> None:
        if replies is None or not replies[index].done:
            count(name, n, **labels)

    return settle


def dropped_here() -> int:
    return _dropped


def forget_known() -> None:
    """For tests and settings changes: re-check every counter on next use, and
    forget what this process holds back (drops, tallies)."""
    global _dropped
    with _lock:
        _known.clear()
        _soon.clear()
        _dropped = 0


# Upper bounds (seconds) of the job-duration buckets; p50/p95 come from these.
DURATION_BUCKETS = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


def observe_duration(name: str, seconds: float, **labels: str) -> None:
    """Count a duration in the first bucket it fits ("inf" past the last)."""
    count(name, le=_bucket(seconds), **labels)


def observe_in(batch: MetaBatch, name: str, seconds: float, **labels: str) -> Settle:
    """observe_duration(), riding in the caller's batch (count_in)."""
    return count_in(batch, name, le=_bucket(seconds), **labels)


def _bucket(seconds: float) -> str:
    return next((str(b) for b in DURATION_BUCKETS if seconds <= b), "inf")


# -- counted on hot paths: tallied in the process, sent once a second by a thread --

FLUSH_EVERY = 1.0
# How often the sending thread looks whether a send is due.
_TICK = 0.1
_soon: dict[tuple[str, tuple], int] = {}
_last_flush = 0.0
_sender_pid = 0
# Held from taking the tally until it is sent, so one flush waits for another;
# a child forked during a send gets a fresh one.
_sending = threading.Lock()


def _fresh_sending_lock() -> None:
    global _sending
    _sending = threading.Lock()


os.register_at_fork(after_in_child=_fresh_sending_lock)


def count_soon(name: str, n: int = 1, **labels: str) -> None:
    """Like count(), without a round trip on the caller's path: increments
    are tallied here and sent by a thread of this process once a second
    (and at exit). A process killed outright loses at most that second."""
    key = (name, tuple(sorted(labels.items())))
    if key not in _checked:
        counter_key(name, **labels)  # fail now on a bad name, not at flush time
        if len(_checked) >= MAX_CHECKED:
            _checked.clear()
        _checked.add(key)
    with _lock:
        _soon[key] = _soon.get(key, 0) + n
    if _sender_pid != os.getpid():
        _start_sender()


def _start_sender() -> None:
    """One sending thread per process (a forked child starts its own)."""
    global _sender_pid
    with _lock:
        if _sender_pid == os.getpid():
            return
        _sender_pid = os.getpid()
    threading.Thread(target=_send_forever, name="counters-sender", daemon=True).start()


def _send_forever() -> None:
    while True:
        time.sleep(_TICK)
        if _soon and time.monotonic() - _last_flush >= FLUSH_EVERY:
            try:
                flush_soon()
            except Exception:  # the thread must outlive any one failure
                logger.exception("counters not sent")


def flush_soon() -> None:
    """Send what is tallied; on return, everything tallied before the call
    is in memcached, also what the sending thread took a moment earlier."""
    global _last_flush
    with _sending:
        with _lock:
            pending = dict(_soon)
            _soon.clear()
            _last_flush = time.monotonic()
        for (name, labels), n in pending.items():
            count(name, n, **dict(labels))


atexit.register(flush_soon)


def _count_refusal(*, family: str, **_: Any) -> None:
    count_soon("memcached_refused", family=family)


value_refused.connect(_count_refusal, dispatch_uid="webfarm.core.counters.refused")
