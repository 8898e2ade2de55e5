"""Append-only name lists in memcached (registries: counters, queues, workers).

A list is one key holding newline-separated names, grown with `append`, so a
reader lists everything in one get. `append` needs the key to exist and two
first-comers may race to `add` it; the loser appends.
"""

from collections.abc import Callable
from typing import Any

from webfarm.core.tampering import refused


def add_member(client: Any, list_key: str, name: str) -> None:
    """Append `name` to the list (the caller makes sure it is not listed yet).

    The line starts with a newline of its own: a value someone else wrote
    that does not end with one (a planted pickle) would otherwise swallow
    the name into its last line, which readers refuse, and the name would
    never be listed again by a caller that remembers it added it."""
    line = f"\n{name}\n".encode()
    if not client.append(list_key, line) and not client.add(list_key, line):
        client.append(list_key, line)


def members(client: Any, list_key: str, valid: Callable[[str], bool]) -> list[str]:
    """The listed names, sorted, without repeats. Names that `valid` refuses
    (someone else wrote them: memcached has no authentication) are left out
    and counted, so one planted line cannot break whoever walks the list."""
    raw = client.get(list_key) or b""
    names = {name for name in raw.decode(errors="replace").split("\n") if name}
    good = {name for name in names if valid(name)}
    if len(good) < len(names):
        refused("list", list_key, f"{len(names) - len(good)} names that are not names")
    return sorted(good)


def remove_members(client: Any, list_key: str, gone: set[str]) -> None:
    """Drop names from the list. Someone appending meanwhile makes the cas
    fail, and the next caller tries again."""
    raw, token = client.gets(list_key)
    if raw is not None:
        kept = [name for name in raw.decode(errors="replace").split("\n") if name and name not in gone]
        client.cas(list_key, "".join(f"{name}\n" for name in kept).encode(), token)
