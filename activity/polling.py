"""Which requests are polls: reads that pages repeat every second or two.

The request log counts them instead of logging each one, and the dashboard's
newest activity leaves them out: a person looking for what happened would see
nothing else. Failed polls (400 and up) are neither: they are logged and shown.
"""

import re

POLLED = re.compile(r"/(progress/|polls/\d+/results\.json|admin/dashboard/(live/|charts/)|stats/|static/)")


def is_poll(method: str | None, path: str | None) -> bool:
    return method in ("GET", "HEAD") and isinstance(path, str) and POLLED.match(path) is not None


def area(path: str) -> str:
    """The counter label of a polled path: its first segment ("progress", "polls", ...)."""
    return path.split("/", 2)[1] or "root"
