"""Append-only name lists in memcached (registries: counters, queues, workers).

A list is one key holding newline-separated names, grown with `append`, so a
reader lists everything in one get. `append` needs the key to exist and two
first-comers may race to `add` it; the loser appends.
"""

from typing import Any


def add_member(client: Any, list_key: str, name: str) -> None:
    """Append `name` to the list (the caller makes sure it is not listed yet)."""
    line = f"{name}\n".encode()
    if not client.append(list_key, line) and not client.add(list_key, line):
        client.append(list_key, line)


def members(client: Any, list_key: str) -> list[str]:
    """The listed names, sorted, without repeats."""
    raw = client.get(list_key) or b""
    return sorted({name for name in raw.decode().split("\n") if name})


def remove_members(client: Any, list_key: str, gone: set[str]) -> None:
    """Drop names from the list. Someone appending meanwhile makes the cas
    fail, and the next caller tries again."""
    raw, token = client.gets(list_key)
    if raw is not None:
        kept = [name for name in raw.decode().split("\n") if name and name not in gone]
        client.cas(list_key, "".join(f"{name}\n" for name in kept).encode(), token)
