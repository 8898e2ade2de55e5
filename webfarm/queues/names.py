import re

from webfarm.queues.exceptions import InvalidQueueName

# Internal names; the HTTP front takes 64 and prefixes its own (webfarm.queues.views).
MAX_NAME = 80
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def validate_name(name: object) -> str:
    """Queue names become part of memcached keys: a strict alphabet, short."""
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME_RE.fullmatch(name):
        raise InvalidQueueName(
            f"queue names are 1-{MAX_NAME} characters of A-Z a-z 0-9 _ . - starting with a letter or digit"
        )
    return name
