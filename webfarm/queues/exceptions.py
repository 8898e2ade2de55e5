from pymemcache.exceptions import MemcacheServerError


def is_full(exc: BaseException) -> bool:
    """memcached under -M refused a store. (A dropped connection is also a
    MemcacheServerError in pymemcache; that is not "full".)"""
    return isinstance(exc, MemcacheServerError) and "out of memory" in str(exc)


class QueueError(Exception):
    """Base class: every failure of a queue operation is one of these."""


class InvalidQueueName(QueueError):
    pass


class MessageTooLarge(QueueError):
    pass


class QueueFull(QueueError):
    """memcached (run with -M) refused to store the message: nothing was enqueued.
    From put_many: `stored`, the positions of the bodies that were."""

    stored: list[int]

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.stored = []


class QueueUnavailable(QueueError):
    """memcached could not be reached; the operation may be retried."""


class QueueGone(QueueError):
    """A queue looked at only where it exists (its old server, while the
    pool changes) has no generation there: nothing to take."""


class InvalidReceipt(QueueError):
    pass


class ReceiptNotJSON(InvalidReceipt):
    """A receipt sent in a body that is not JSON (HTTP 415)."""


class ClaimLost(QueueError):
    """An ack or reject for a message whose claim expired and which another
    consumer holds now (HTTP 409); it will be finished by that consumer."""
