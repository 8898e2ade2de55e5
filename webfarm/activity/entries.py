"""What a site-log entry is, checked wherever one is read: from the queue (the
drainer), from memcached (the newest entries) and from the log file."""

import math
from typing import Any

# A timestamp after 2286 is no timestamp (and overflows datetime).
LATEST = 1e10
MAX_TEXT = 2000
SCALARS = (str, int, float, bool, type(None))


class BadEntry(ValueError):
    """Not a site-log entry; the reason says why."""


def check(data: Any) -> dict[str, Any]:
    """The entry, if `data` is one: a JSON object with a sane `ts` and text
    fields that are text. Extra fields (from `extra=`) are kept if they are
    plain values; long text is cut."""
    if not isinstance(data, dict):
        raise BadEntry(f"not an object but {type(data).__name__}")
    ts = data.get("ts")
    if (
        not isinstance(ts, int | float)
        or isinstance(ts, bool)
        or not math.isfinite(ts)
        or not 0 < ts < LATEST
    ):
        raise BadEntry(f"bad ts {ts!r:.40}")
    for name in ("level", "logger", "message", "node"):
        if name in data and not isinstance(data[name], str):
            raise BadEntry(f"{name} is not text")
    entry = {}
    for key, value in data.items():
        if not isinstance(key, str) or not isinstance(value, SCALARS):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        entry[key[:64]] = value[:MAX_TEXT] if isinstance(value, str) else value
    return entry


def valid_only(items: Any) -> list[dict[str, Any]]:
    """The entries of a list that are entries (what someone else wrote is dropped)."""
    if not isinstance(items, list):
        return []
    kept = []
    for item in items:
        try:
            kept.append(check(item))
        except BadEntry:
            continue
    return kept
