"""A kombu transport over the memcached queue: CELERY_BROKER_URL=memcached://host:port.

Each kombu queue is one memcached queue. A delivered message is a claim;
kombu's ack acknowledges it, a reject puts it back (or drops it), and while
the worker holds it a background thread keeps the claim alive. A worker that
is killed stops doing so, and its messages come back, marked redelivered,
within one visibility timeout. That is what acks_late needs.

A message that is not a kombu message of this farm (planted in memcached, cut
short, not JSON) goes to the queue's dead letters and the next one is
delivered: it never reaches Celery, and never stalls the worker.

Not supported, as with kombu's other virtual transports without fanout:
broadcast (so `celery inspect`, remote control and revoke by broadcast do
not reach the workers), priorities, and exchanges other than direct.
"""

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from queue import Empty
from typing import TYPE_CHECKING, Any

from django.conf import settings
from kombu.transport import virtual
from kombu.utils.url import parse_url

from webfarm.core.client import StableHashClient, build_client, kept_together
from webfarm.core.conf import get_config as memcached_config
from webfarm.queues.exceptions import ClaimLost, QueueError, QueueFull, QueueUnavailable
from webfarm.queues.layout import memcached_errors
from webfarm.queues.names import MAX_NAME, validate_name
from webfarm.queues.queue import Message, Queue

logger = logging.getLogger(__name__)

DEFAULT_VISIBILITY = 60
DEFAULT_POLLING = 0.05
MIN_POLL = 0.001
# For this long after a delivery, polls stay MIN_POLL apart: the task just
# delivered is often done within it, and its ack frees the prefetch slot the
# next message waits for (the back-off had it wait up to polling_interval).
HOT_POLL = 0.025
# Bad messages buried in one poll before the worker gets a say again.
BURY_PER_POLL = 16
# Seconds between tries of an ack or reject memcached could not hear (it was unreachable).
FINISH_RETRY_EVERY = 1.0
# A full memcached refusing claims is said in the log at most this often (seconds).
FULL_LOGGED_EVERY = 10.0


class NotAKombuMessage(ValueError):
    pass


def kombu_payload(message: Message) -> dict:
    """The kombu message a queue entry holds, checked enough for kombu to
    take it without raising in the worker's loop."""
    try:
        payload = json.loads(message.body)
    except (ValueError, RecursionError) as exc:
        raise NotAKombuMessage(f"not JSON: {exc}") from exc
    if not isinstance(payload, dict) or not isinstance(payload.get("properties"), dict):
        raise NotAKombuMessage("not a kombu message (no properties)")
    properties = payload["properties"]
    if not isinstance(properties.get("delivery_tag"), str):
        raise NotAKombuMessage("no delivery tag")
    if not isinstance(payload.get("body"), str) or not isinstance(payload.get("headers", {}), dict):
        raise NotAKombuMessage("no body or headers")
    if not isinstance(properties.get("delivery_info", {}), dict):
        raise NotAKombuMessage("bad delivery info")
    return payload


BROKER_SUFFIX = "broker"
# Its keys, under the farm's namespace, are the broker's own: a change of the
# farm's pool leaves them where they are (every process imports this module
# when the broker app is ready).
BROKER_KEYS = kept_together(f"{BROKER_SUFFIX}:")


def broker_ring() -> Any:
    """The ring the memcached broker's queues live on, as a worker makes it
    from the settings (Celery's Django set-up reads CELERY_BROKER_URL and
    CELERY_BROKER_TRANSPORT_OPTIONS), or None when the broker is not memcached."""
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    if not url.startswith("memcached://"):
        return None
    parts = parse_url(url)
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    return ring_of(parts.get("hostname"), parts.get("port"), options)


def ring_of(hostname: str | None, port: int | None, options: dict[str, Any]) -> StableHashClient:
    """The broker's ring from a broker URL's host and port, unless the
    transport options name its servers (a list the URL cannot hold)."""
    servers = options.get("servers") or [f"{hostname or '127.0.0.1'}:{port or Transport.default_port}"]
    namespace = options.get("namespace") or memcached_config()["NAMESPACE"]
    return build_client(servers, f"{namespace}:{BROKER_SUFFIX}")


def queue_name(kombu_queue: str) -> str:
    """kombu names ("celery", "w1@host.celery.pidbox") -> valid queue names."""
    safe = kombu_queue.replace("@", ".")
    try:
        return validate_name(safe)
    except QueueError:
        digest = hashlib.sha1(kombu_queue.encode()).hexdigest()[:16]  # noqa: S324 (a name, not a secret)
        return f"k{digest}-{''.join(c for c in safe if c.isalnum())[: MAX_NAME - 18]}"


class QoS(virtual.QoS):
    """Acks and rejects go to memcached; unacked messages at shutdown are put back.

    kombu's own bookkeeping is done whatever memcached says: a delivery tag
    left in `_delivered` holds one slot of the prefetch window for good, and
    a worker of one process whose ack failed while memcached restarted took
    no task again (a chaos run found it). What memcached could not hear is tried again
    by the channel (Channel._finish)."""

    if TYPE_CHECKING:  # kombu's own, which its stubs leave out or type loosely
        channel: "Channel"
        _delivered: OrderedDict[str, Any]

        def _quick_ack(self, delivery_tag: str) -> None: ...
        def _flush(self) -> None: ...

    def ack(self, delivery_tag: str) -> None:
        try:
            self.channel._finish(delivery_tag, requeue=False, ack=True)
        finally:
            super().ack(delivery_tag)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        try:
            self.channel._finish(delivery_tag, requeue=requeue, ack=False)
        finally:
            self._quick_ack(delivery_tag)

    # kombu reads the list (messages it could not put back); its stubs say None.
    def restore_unacked(self) -> list[Any]:  # type: ignore[override]
        self._flush()
        for tag in list(self._delivered):
            self.channel._finish(tag, requeue=True, ack=False)
        self._delivered.clear()
        return []


def _finish_one(queue: Queue, receipt: str, *, requeue: bool) -> None:
    if requeue:
        queue.reject(receipt)
    else:  # done, or rejected for good: finished either way
        queue.ack(receipt)


class Channel(virtual.Channel):
    QoS = QoS
    do_restore = True

    def __init__(self, connection: Any, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        options = connection.client.transport_options
        self.visibility_timeout = int(options.get("visibility_timeout", DEFAULT_VISIBILITY))
        self._ring: StableHashClient = connection.ring
        self._lock = threading.RLock()
        self._queues: dict[str, Queue] = {}
        self._held: dict[str, tuple[str, str]] = {}  # delivery tag -> (queue, receipt)
        # Acks and rejects memcached could not hear: (queue, receipt, requeue, given up at), tried again.
        self._unfinished: list[tuple[str, str, bool, float]] = []
        self._closing = threading.Event()
        self._full_logged_at = -FULL_LOGGED_EVERY
        self._keeper = threading.Thread(target=self._keep_claims, name="memcached-claims", daemon=True)
        self._keeper.start()

    def _queue(self, name: str) -> Queue:
        queue = self._queues.get(name)
        if queue is None:
            queue = Queue(queue_name(name), ring=self._ring)
            queue.prefetch = 1  # kombu's QoS does the prefetching
            queue.visibility_timeout = self.visibility_timeout
            self._queues[name] = queue
        return queue

    def _full(self, queue: str, exc: QueueFull) -> None:
        now = time.monotonic()
        if now - self._full_logged_at >= FULL_LOGGED_EVERY:
            self._full_logged_at = now
            logger.warning("no task claimed from %s: %s (polling again)", queue, exc)

    def _put(self, queue: str, message: dict, **kwargs: Any) -> None:
        with self._lock:
            self._queue(queue).put(json.dumps(message).encode())

    def _get(self, queue: str, timeout: float | None = None) -> dict:
        for _ in range(BURY_PER_POLL):
            with self._lock:
                try:
                    message = self._queue(queue).claim()
                except QueueFull as exc:
                    # A claim memcached (-M) has no room to record: nothing is
                    # taken now, and the worker polls again. Raised on, kombu
                    # would take it for unrecoverable and stop the worker.
                    self._full(queue, exc)
                    raise Empty() from exc
                if message is None:
                    raise Empty()
                try:
                    payload = kombu_payload(message)
                    break
                except NotAKombuMessage as exc:
                    self._queue(queue).bury(message, str(exc))
        else:
            raise Empty()
        properties = payload["properties"]
        # The publisher's tag repeats on redelivery; add the index to keep it unique.
        tag = f"{properties['delivery_tag']}.{message.index}"
        properties["delivery_tag"] = tag
        properties.setdefault("delivery_info", {})["redelivered"] = message.redelivered
        payload.setdefault("headers", {})
        self._held[tag] = (queue, message.receipt)
        return payload

    def _finish(self, tag: str, *, requeue: bool, ack: bool) -> None:
        held = self._held.pop(tag, None)
        if held is None:
            return
        queue, receipt = held
        with self._lock:
            try:
                _finish_one(self._queue(queue), receipt, requeue=requeue and not ack)
            except ClaimLost as exc:
                # Its claim lapsed and another worker has it now: the task runs
                # again there (at-least-once; the job itself runs only once).
                logger.warning("message %s on %s not finished here: %s", tag, queue, exc)
            except QueueUnavailable as exc:
                # Tried again until its claim would have lapsed; by then the
                # message is delivered again anyway (and memcached restarted
                # has lost it with everything else).
                logger.warning("message %s on %s not acknowledged yet (trying again): %s", tag, queue, exc)
                self._unfinished.append(
                    (queue, receipt, requeue and not ack, time.monotonic() + self.visibility_timeout)
                )

    def _finish_later(self) -> None:
        """Try again the acks and rejects memcached could not hear."""
        with self._lock:
            pending, self._unfinished = self._unfinished, []
        kept = []
        for queue, receipt, requeue, until in pending:
            try:
                # A queue object of this thread's own: clients are not shared.
                _finish_one(Queue(queue_name(queue), ring=self._ring), receipt, requeue=requeue)
            except QueueUnavailable:
                if time.monotonic() < until:
                    kept.append((queue, receipt, requeue, until))
            except QueueError as exc:  # memcached came back without it (restarted), or it was taken over
                logger.info("a late ack on %s found nothing to finish: %s", queue, exc)
        with self._lock:
            self._unfinished.extend(kept)

    def _keep_claims(self) -> None:
        """While the worker lives, its claims do not expire, and what memcached
        could not hear is said again."""
        extend_at = time.monotonic() + self.visibility_timeout / 3
        while not self._closing.wait(min(FINISH_RETRY_EVERY, self.visibility_timeout / 3)):
            if self._unfinished:
                self._finish_later()
            if time.monotonic() < extend_at:
                continue
            extend_at = time.monotonic() + self.visibility_timeout / 3
            by_queue: dict[str, list[str]] = {}
            for queue, receipt in list(self._held.values()):
                by_queue.setdefault(queue, []).append(receipt)
            for queue, receipts in by_queue.items():
                try:
                    # A queue object of this thread's own: clients are not shared.
                    keeper = Queue(queue_name(queue), ring=self._ring)
                    keeper.extend(receipts, self.visibility_timeout)
                except QueueError as exc:
                    logger.warning("could not extend %d claims on %s: %s", len(receipts), queue, exc)

    def _size(self, queue: str) -> int:
        with self._lock:
            return self._queue(queue).stats()["ready"]

    def _purge(self, queue: str) -> int:
        with self._lock:
            return self._queue(queue).purge()

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self._queue(queue)

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return True

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self._purge(queue)

    def close(self) -> None:
        self._closing.set()
        super().close()


class Transport(virtual.Transport):
    Channel = Channel
    driver_type = driver_name = "memcached"
    default_port = 11211
    # The longest pause between polls of an idle queue (seconds). Polling is
    # one small get, so memcached does not notice; see drain_events.
    polling_interval = DEFAULT_POLLING
    implements = virtual.Transport.implements.extend(asynchronous=False, exchange_type=frozenset(["direct"]))
    # memcached gone is a lost connection: Celery reconnects (and kombu's
    # publish retries, then raises OperationalError) instead of giving up.
    connection_errors = (*virtual.Transport.connection_errors, QueueUnavailable)

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.ring = ring_of(client.hostname, client.port, client.transport_options)
        self._delivered_at = -HOT_POLL

    def driver_version(self) -> str:
        return "1"

    def establish_connection(self) -> Any:
        # Connected means memcached answered. A connection made without asking
        # failed at its first poll, and the consumer restarted in a loop, five
        # times a second (RestartFreqExceeded), for as long as memcached was
        # away; now kombu retries the connection with its back-off.
        with memcached_errors():
            self.ring.ping()
        return super().establish_connection()

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """Poll again at once after a delivery, every MIN_POLL for HOT_POLL
        after it, then back off to polling_interval while nothing comes
        (kombu's default sleeps the full interval after every empty poll,
        which caps a worker at a few tasks per interval)."""
        start = time.monotonic()
        pause = MIN_POLL
        cycle = self.cycle
        assert cycle is not None  # made by kombu's Transport.__init__
        while True:
            try:
                cycle.get(self._deliver, timeout=timeout)
                self._delivered_at = time.monotonic()
                return
            except Empty:
                now = time.monotonic()
                if timeout is not None and now - start >= timeout:
                    raise TimeoutError() from None
                time.sleep(pause)
                if now - self._delivered_at >= HOT_POLL:
                    pause = min(pause * 1.5, self.polling_interval)
