"""The newest site-log entries, kept in memcached by the drainer so that any
web node can show them (the log file lives on the drainer's machine).

One sealed key (webfarm.core.seal): a list someone else put there reads as none,
and every entry is checked again on the way out. Pages polling for what
changed (progress bars, poll results, the dashboard, metrics) are left out:
a person looking for what happened would see nothing else. The log file and
the counters keep them.
"""

import json
from collections import deque
from pathlib import Path
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.activity.entries import valid_only
from webfarm.activity.logfile import tail_entries
from webfarm.activity.polling import is_poll
from webfarm.core.client import get_client
from webfarm.core.seal import seal, unseal

KEY = "sitelog:recent"
KEEP = 100
TAIL_BYTES = 256 * 1024
# One key; rewritten at every drain. Lapses a day after the last one, when the
# dashboard reads the file's tail instead.
TTL = 24 * 3600


def worth_showing(entry: dict[str, Any]) -> bool:
    """Anything but an answered poll (a sampled one, webfarm.activity.polling)."""
    status = entry.get("status")
    if is_poll(entry.get("method"), entry.get("path")) and isinstance(status, int):
        return status >= 400
    return True


def _stored(client: Any) -> list[dict[str, Any]]:
    raw = unseal("sitelog", KEY, client.get(KEY))
    try:
        return valid_only(json.loads(raw)) if raw is not None else []
    except (ValueError, RecursionError):
        return []


def remember(client: Any, entries: list[dict[str, Any]]) -> None:
    """Add freshly written entries (only the drainer writes: it holds the lock)."""
    entries = [entry for entry in entries if worth_showing(entry)]
    if not entries:
        return
    try:
        kept = deque(_stored(client), maxlen=KEEP)
        kept.extend(entries)
        client.set(KEY, seal(KEY, json.dumps(list(kept)).encode(), ttl=TTL), expire=TTL)
    except (MemcacheError, OSError):
        pass  # the file has them; the dashboard falls back to its tail


def newest(limit: int, log_file: Path | None = None) -> list[dict[str, Any]]:
    """Newest first. From memcached; from the log file's tail when memcached
    has none (restarted) and the file is on this machine."""
    try:
        entries = _stored(get_client())
    except (MemcacheError, OSError):
        entries = []
    if not entries and log_file is not None:
        entries = [e for e in valid_only(tail_entries(log_file, TAIL_BYTES)) if worth_showing(e)][-KEEP:]
    return entries[::-1][:limit]
