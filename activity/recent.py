"""The newest site-log entries, kept in memcached by the drainer so that any
web node can show them (the log file lives on the drainer's machine)."""

import json
from collections import deque
from pathlib import Path
from typing import Any

from pymemcache.exceptions import MemcacheError

from activity.logfile import tail_entries
from progress.client import get_client

KEY = "sitelog:recent"
KEEP = 100
TAIL_BYTES = 256 * 1024


def remember(client: Any, lines: list[bytes]) -> None:
    """Add freshly written JSON lines (only the drainer writes: it holds the lock)."""
    if not lines:
        return
    try:
        kept = deque(json.loads(client.get(KEY) or b"[]"), maxlen=KEEP)
        kept.extend(json.loads(line) for line in lines)
        client.set(KEY, json.dumps(list(kept)).encode())
    except (MemcacheError, OSError):
        pass  # the file has them; the dashboard falls back to its tail


def newest(limit: int, log_file: Path | None = None) -> list[dict[str, Any]]:
    """Newest first. From memcached; from the log file's tail when memcached
    has none (restarted) and the file is on this machine."""
    try:
        entries = json.loads(get_client().get(KEY) or b"[]")
    except (MemcacheError, OSError):
        entries = []
    if not entries and log_file is not None:
        entries = tail_entries(log_file, TAIL_BYTES)[-KEEP:]
    return entries[::-1][:limit]
