class QueueError(Exception):
    """Base class: every failure of a queue operation is one of these."""


class InvalidQueueName(QueueError):
    pass


class MessageTooLarge(QueueError):
    pass


class QueueFull(QueueError):
    """memcached (run with -M) refused to store the message: nothing was enqueued."""


class QueueUnavailable(QueueError):
    """memcached could not be reached; the operation may be retried."""


class InvalidReceipt(QueueError):
    pass
