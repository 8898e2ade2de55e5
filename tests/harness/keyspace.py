"""What a memcached server holds, key by key, read with `lru_crawler metadump`."""

import base64
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from pymemcache.client.base import Client

# memcached keeps time in whole seconds from its own start: a TTL read back
# from `exp` may be this much longer than the one written.
CLOCK_SLACK = 2


@dataclass(frozen=True)
class Item:
    key: str
    expires: int  # Unix time; -1 for never
    size: int

    def ttl(self, now: float | None = None) -> float | None:
        """Seconds left, or None for an item that never expires."""
        if self.expires < 0:
            return None
        return self.expires - (time.time() if now is None else now)


def command(address: str, command: bytes, end: bytes) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(command)
        data = b""
        while not data.endswith(end):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    return data


def value_and_item(address: str, key: str) -> tuple[bytes | None, Item | None]:
    """A key's value and its expiry read in one command (meta get), so the
    two agree: a listing and a get made apart may straddle a rewrite (a
    message acknowledged in between turns into a marker with a lifetime)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"mg %s s t v\r\n" % key.encode())
        data = b""
        while b"\r\n" not in data or (
            data.startswith(b"VA ") and len(data.partition(b"\r\n")[2]) < int(data.split()[1]) + 2
        ):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            data += chunk
    head, _, rest = data.partition(b"\r\n")
    if not head.startswith(b"VA "):
        return None, None
    size, *flags = head.split()[1:]
    fields = {flag[:1]: flag[1:] for flag in flags}
    ttl = int(fields.get(b"t", b"-1"))
    expires = -1 if ttl < 0 else int(time.time()) + ttl
    return rest[: int(size)], Item(key=key, expires=expires, size=int(fields.get(b"s", b"0")))


def items(address: str, prefix: str = "") -> list[Item]:
    """Every live item whose key starts with `prefix`."""
    raw = command(address, b"lru_crawler metadump all\r\n", b"END\r\n")
    found = []
    for line in raw.decode(errors="replace").splitlines():
        if not line.startswith("key="):
            continue
        fields = dict(part.split("=", 1) for part in line.split(" ") if "=" in part)
        key = unquote_to_bytes(fields["key"]).decode(errors="replace")
        if key.startswith(prefix):
            found.append(
                Item(key=key, expires=int(fields.get("exp", "-1")), size=int(fields.get("size", "0")))
            )
    return found


def stats(address: str) -> dict[str, int]:
    raw = command(address, b"stats\r\n", b"END\r\n")
    values = {}
    for line in raw.decode().splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].lstrip("-").isdigit():
            values[parts[1]] = int(parts[2])
    return values


def reclaim_expired(address: str) -> None:
    """Have memcached's LRU crawler free expired items now (it does so on its
    own, lazily), so curr_items and bytes count only live ones."""
    command(address, b"lru_crawler crawl all\r\n", b"\r\n")


def plant_by_bytes(address: str, key: bytes, value: bytes, ttl: int = 300) -> None:
    """Write a value under a key of any bytes (control bytes, not UTF-8), as
    anyone who can reach memcached could, with the meta set's base64 key."""
    setting = b"ms %s %d b T%d\r\n%s\r\n" % (base64.b64encode(key), len(value), ttl, value)
    reply = command(address, setting, b"\r\n")
    assert reply == b"HD\r\n", reply


def plant(address: str, key: str, value: bytes, flags: int = 0, ttl: int = 300) -> None:
    """Write a raw value as anyone who can reach memcached could."""
    setting = b"set %s %d %d %d\r\n%s\r\n" % (key.encode(), flags, ttl, len(value), value)
    reply = command(address, setting, b"\r\n")
    assert reply == b"STORED\r\n", reply


@contextmanager
def raw_client(address: str, namespace: str = "") -> Iterator[Client]:
    """A plain pymemcache client to one server (keys under `namespace:` when
    given), as anyone who can reach memcached would have; closed afterwards."""
    host, port = address.rsplit(":", 1)
    client = Client((host, int(port)), key_prefix=f"{namespace}:".encode() if namespace else b"")
    try:
        yield client
    finally:
        client.close()
