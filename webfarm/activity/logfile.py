"""Reading the JSON-lines activity log back."""

import json
from pathlib import Path
from typing import Any


def tail_entries(path: Path, max_bytes: int) -> list[dict[str, Any]]:
    """The entries in the last `max_bytes` of the file, oldest first; lines
    that are not JSON objects (cut by the start, or torn by a crash) are skipped."""
    if not path.exists():
        return []
    with path.open("rb") as f:
        start = max(path.stat().st_size - max_bytes, 0)
        f.seek(start)
        lines = f.read().split(b"\n")
    if start:
        lines = lines[1:]  # read from mid-file: the first piece may be cut
    entries = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
