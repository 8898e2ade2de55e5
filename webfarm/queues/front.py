"""What the HTTP front may reach: queues of its own, a bounded number of them.

A name in a URL, `orders`, is the queue `http.orders`: the front has a
namespace of its own, so no client can read or feed the farm's own queues
(the site log, the votes, the Celery broker's), and asking for one by its
name is refused with a clear 403 rather than quietly meaning something else.

Each queue holds at most HTTP_MAX_MESSAGES messages and HTTP_MAX_BYTES
bytes (waiting, in work or dead): a put past either is refused, so a holder
of the token cannot fill the memcached that the farm's own queues and
Celery's broker live in. The bytes are memcached's memory, not the bodies':
a message is charged its entry and its claim, keys and item headers
included, each in its slab chunk (Layout.message_memory), so a flood of
one-byte messages counts what it really takes (about 300 bytes each). The
bytes are counted up at each put and counted again from the entries
(Queue.held_bytes) when the count reaches the cap, at most once every
RECOUNT_EVERY seconds per queue and process: puts racing a recount may pass
the cap by their own size. Each queue's own keys (its counters, about 1 KB)
are outside the caps: HTTP_MAX_QUEUES bounds them.

The front keeps at most HTTP_MAX_QUEUES queues. One nobody has used for
HTTP_IDLE_AFTER seconds and that holds nothing (no message waiting or being
worked on, no dead letter) is forgotten: its keys are deleted and it leaves
the registry, so clients cannot grow memcached's key space without end. A
producer racing the forgetting loses nothing: its queue's counters vanish
under it, and the queue starts a new generation and lists itself again.
"""

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from pymemcache.exceptions import MemcacheClientError, MemcacheError

from webfarm.core.client import get_client, kept_together, server_client
from webfarm.queues import registry
from webfarm.queues.conf import default_queue, get_config
from webfarm.queues.exceptions import InvalidQueueName, QueueError, QueueUnavailable
from webfarm.queues.queue import STATS, Queue

logger = logging.getLogger(__name__)

PREFIX = "http."
MAX_NAME = 64
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# The registry is read at most this often per process (seconds).
KNOWN_FOR = 2.0
# A queue's "in use" mark is refreshed at most this often per process (seconds).
TOUCH_EVERY = 60.0
# A queue's bytes are counted again from its entries at most this often per process (seconds).
RECOUNT_EVERY = 1.0


class InternalQueue(QueueError):
    """A name of one of the farm's own queues (HTTP 403)."""


class TooManyQueues(QueueError):
    """The front keeps no more queues (HTTP 403)."""


class NoSuchQueue(QueueError):
    """Nobody has put anything in this queue (HTTP 404)."""


class QueueAtCapacity(QueueError):
    """The queue holds as much as the front lets one queue hold (HTTP 507)."""


# The farm's own queues, named by the apps that own them (declare_internal in
# their AppConfig.ready): queues sits below those apps and imports none of them.
_internal: list[Callable[[], str]] = []


def declare_internal(name: Callable[[], str]) -> None:
    """Refuse this queue's name at the HTTP front; `name` is read at each
    request, so a setting that changes (in tests) is followed."""
    _internal.append(name)


def internal_names() -> set[str]:
    return {name() for name in _internal} | {default_queue(), "celery"}


def queue_name(url_name: str) -> str:
    """The queue behind a URL's name; InvalidQueueName or InternalQueue for
    names the front does not serve."""
    if not isinstance(url_name, str) or not _NAME_RE.fullmatch(url_name):
        raise InvalidQueueName(
            f"queue names are 1-{MAX_NAME} characters of A-Z a-z 0-9 _ . - starting with a letter or digit"
        )
    if url_name in internal_names():
        raise InternalQueue(
            f"'{url_name}' is one of the farm's own queues; the HTTP front serves only its own"
        )
    return PREFIX + url_name


_lock = threading.Lock()
_known: tuple[float, set[str]] = (-KNOWN_FOR, set())
_touched: dict[str, float] = {}


def known() -> set[str]:
    """The front's queues (internal names), as the registry lists them."""
    global _known
    at, names = _known
    if time.monotonic() - at >= KNOWN_FOR:
        try:
            names = {name for name in registry.known_queues() if name.startswith(PREFIX)}
        except (MemcacheError, OSError) as exc:
            raise QueueUnavailable(f"memcached unreachable: {exc}") from exc
        with _lock:
            _known = (time.monotonic(), names)
    return names


def _known_now() -> set[str]:
    global _known
    with _lock:
        _known = (-KNOWN_FOR, set())
    return known()


def for_writing(name: str) -> None:
    """A producer is about to put into `name`: refuse a queue over the limit.
    A new name is judged by the registry as it is now, not as this process
    last read it (a burst of new names would pass the limit)."""
    names = known()
    if name not in names:
        names = _known_now()
    if name not in names and len(names) >= get_config()["HTTP_MAX_QUEUES"]:
        limit, idle = get_config()["HTTP_MAX_QUEUES"], get_config()["HTTP_IDLE_AFTER"]
        raise TooManyQueues(
            f"the HTTP front keeps at most {limit} queues; an empty one unused for {idle} s is forgotten"
        )
    touch(name)


def for_reading(name: str) -> None:
    """NoSuchQueue for a queue nobody ever put into (reading creates nothing)."""
    if name not in known() and name not in _known_now():  # listed a moment ago, perhaps
        raise NoSuchQueue(f"no queue named '{name.removeprefix(PREFIX)}'")
    touch(name)


_recounted: dict[str, float] = {}
# queue name -> (generation, tail, entries from the floor to it) as last counted.
_message_counts: dict[str, tuple[str, int, int]] = {}
# On its own server (server_client), as a queue's keys are: through a pool
# change, the old list's until every process is on the new one.
FRONT_BYTES = kept_together("q-front:") + "bytes"


def admit(queue: Queue, body_size: int) -> None:
    """Room for one more message with a body of `body_size` bytes in `queue`
    and in the front, or QueueAtCapacity. Takes the room it takes in
    memcached in the byte counts: call it just before the put (a put that
    then fails leaves an overcount, which the next recount corrects).

    The counts only go up, and are upper bounds: a count that reaches its cap
    (or is missing) is set to what the entries hold now (a scan, at most once
    every RECOUNT_EVERY seconds per count and process) before anything is
    refused."""
    config = get_config()
    url_name = queue.name.removeprefix(PREFIX)
    size = queue.layout.message_memory(body_size)
    stats = queue.stats()
    if _held_messages(queue, stats, config["HTTP_MAX_MESSAGES"]) >= config["HTTP_MAX_MESSAGES"]:
        raise QueueAtCapacity(
            f"queue '{url_name}' holds {config['HTTP_MAX_MESSAGES']} messages, as many as it may"
        )
    try:
        queue_count = _client(queue), _bytes_key(queue.name)
        taken, _ = _take(*queue_count, size, config["HTTP_MAX_BYTES"], lambda: _recount(queue))
        if not taken:
            raise QueueAtCapacity(
                f"queue '{url_name}' takes {config['HTTP_MAX_BYTES']} bytes of memcached, as many as it may"
            )
        taken, recounted = _take(
            _front_client(), FRONT_BYTES, size, config["HTTP_MAX_TOTAL_BYTES"], _recount_front
        )
        if not taken:
            if not recounted:  # a recount set the queue's count to what it holds, without this message
                queue_count[0].decr(queue_count[1], size, noreply=True)
            raise QueueAtCapacity(
                f"the HTTP front's queues take {config['HTTP_MAX_TOTAL_BYTES']} bytes of memcached, "
                "as many as they may"
            )
    except (MemcacheError, OSError) as exc:
        raise QueueUnavailable(f"memcached unreachable: {exc}") from exc


# What a dead letter adds to its message's body: the letter's JSON fields.
DEAD_LETTER_FIELDS = 256


def reject(queue: Queue, receipt: str) -> int | None:
    """Queue.reject through the front: the message's re-put is admitted as a
    put is (QueueAtCapacity past a cap: the claim stays, and the message
    comes back when it lapses), and a dead letter's memory is counted (it
    is kept whatever the caps say). Without this a consumer rejecting in a
    loop filled memcached past the cap with copies the count never saw."""

    def admitted(body_size: int, dead: bool) -> None:
        if dead:
            _charge(queue, queue.layout.message_memory(body_size + DEAD_LETTER_FIELDS))
        else:
            admit(queue, body_size)

    return queue.reject(receipt, admit=admitted)


def _charge(queue: Queue, size: int) -> None:
    """Count `size` more bytes for the queue and the front, whatever the caps."""
    try:
        for client, key in ((_client(queue), _bytes_key(queue.name)), (_front_client(), FRONT_BYTES)):
            with contextlib.suppress(MemcacheClientError):  # not a number: the next recount sets it
                client.incr(key, size, noreply=True)
    except (MemcacheError, OSError) as exc:
        raise QueueUnavailable(f"memcached unreachable: {exc}") from exc


def _take(client: Any, key: str, size: int, cap: int, recount: Callable[[], int]) -> tuple[bool, bool]:
    """Count `size` more under `key` unless that passes `cap`: (taken, recounted)."""
    try:
        counted = client.incr(key, size)
    except MemcacheClientError:  # not a number (written by someone else): counted again
        client.delete(key, noreply=False)
        counted = None
    if counted is not None and counted <= cap:
        return True, False
    if counted is None or _may_recount(key):
        held = recount()
        if held + size > cap:
            return False, True
        client.incr(key, size)
        return True, True
    client.decr(key, size, noreply=True)
    return False, False


def _held_messages(queue: Queue, stats: dict[str, int], cap: int) -> int:
    """At least the messages `queue` holds: waiting, in work, finished but not
    yet passed by the floor, or dead. Every index from the floor to the tail
    is one, unless that reaches the cap: then the entries are counted (at
    most once every RECOUNT_EVERY seconds per queue and process, each index
    taken since counting as a message), because a producer that pauses
    leaves the rest of its reserved block as holes until consumers pass them."""
    floor, tail, gen = stats["floor"], stats["tail"], queue.layout.generation()
    # This process's own reserved indexes, written not yet or never, hold nothing.
    own = [i for i in queue.producer.unwritten(gen) if floor <= i <= tail]
    held = max(tail - floor + 1 - len(own), 0) + stats["dead_letters"]
    if held < cap:
        return held
    counted = _message_counts.get(queue.name)
    may_recount = _may_recount(f"{queue.name}:messages")
    if may_recount or counted is None or counted[0] != gen or counted[1] > tail:
        counted = (gen, tail, queue.inspector.entries_between(floor, tail))
        _message_counts[queue.name] = counted
    taken_since = tail - counted[1] - sum(1 for index in own if index > counted[1])
    return min(held, counted[2] + max(taken_since, 0) + stats["dead_letters"])


def _may_recount(key: str) -> bool:
    now = time.monotonic()
    if now - _recounted.get(key, -RECOUNT_EVERY) < RECOUNT_EVERY:
        return False
    _recounted[key] = now
    return True


def _recount(queue: Queue) -> int:
    """Set the queue's count to the bytes its entries hold now, and return it."""
    held = queue.held_bytes()
    _client(queue).set(_bytes_key(queue.name), str(held).encode(), noreply=False)
    return held


def _recount_front() -> int:
    held = sum(_recount(Queue(name)) for name in known())
    _front_client().set(FRONT_BYTES, str(held).encode(), noreply=False)
    return held


def _client(queue: Queue) -> Any:
    return server_client(f"q:{queue.name}")


def _front_client() -> Any:
    return server_client(FRONT_BYTES)


def _bytes_key(name: str) -> str:
    return f"q:{name}:stat:bytes"


def touch(name: str) -> None:
    """Mark `name` in use (at most once a minute per process, without waiting)."""
    now = time.monotonic()
    if now - _touched.get(name, -TOUCH_EVERY) < TOUCH_EVERY:
        return
    _touched[name] = now
    with contextlib.suppress(MemcacheError, OSError):
        get_client().set(_alive_key(name), b"1", expire=int(get_config()["HTTP_IDLE_AFTER"]), noreply=True)


def _alive_key(name: str) -> str:
    return f"q-alive:{name}"


def forget_idle() -> list[str]:
    """Forget the front's queues that are idle and hold nothing; returns their names."""
    names = sorted(name for name in registry.known_queues() if name.startswith(PREFIX))
    if not names:
        return []
    alive = get_client().get_many([_alive_key(name) for name in names])
    forgotten = []
    for name in names:
        if _alive_key(name) in alive:
            continue
        queue = Queue(name)
        if not queue.holds_nothing():
            continue  # a message waits or is being worked on, or a dead letter is kept
        _forget(queue)
        forgotten.append(name)
    if forgotten:
        registry.unregister(set(forgotten))
        logger.info("forgot %d idle HTTP queues: %s", len(forgotten), ", ".join(forgotten))
    return forgotten


def _forget(queue: Queue) -> None:
    gen = queue.layout.generation()
    client = server_client(f"q:{queue.name}")
    keys = [f"q:{queue.name}:gen", *(f"q:{queue.name}:{gen}:{k}" for k in ("tail", "head", "floor", "scan"))]
    keys += [f"q:{queue.name}:stat:{what}" for what in STATS] + [_bytes_key(queue.name)]
    client.delete_many(keys, noreply=False)
