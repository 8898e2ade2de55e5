"""Each memcached server's health, from its own `stats` commands."""

from dataclasses import dataclass

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import parse_servers
from webfarm.core.conf import get_config

# A dashboard must not hang on a dead server.
PROBE_TIMEOUT = 0.5


@dataclass
class ServerHealth:
    address: str
    up: bool
    error: str = ""
    version: str = ""
    uptime: int = 0
    hits: int = 0
    misses: int = 0
    items: int = 0
    bytes: int = 0
    limit_bytes: int = 0
    evictions: int = 0
    out_of_memory: int = 0
    connections: int = 0
    rejected_connections: int = 0
    evicts_when_full: bool = True

    @property
    def hit_ratio(self) -> float | None:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None

    @property
    def used(self) -> float | None:
        return self.bytes / self.limit_bytes if self.limit_bytes else None


def probe(address: str) -> ServerHealth:
    ((host, port),) = parse_servers([address])
    client = Client((host, port), connect_timeout=PROBE_TIMEOUT, timeout=PROBE_TIMEOUT)
    try:
        general = client.stats()
        # -M refusals are counted per slab class only ("outofmemory").
        items = client.stats("items")
        settings = client.stats("settings")
    except (MemcacheError, OSError) as exc:
        return ServerHealth(address=address, up=False, error=str(exc) or type(exc).__name__)
    finally:
        client.close()
    return ServerHealth(
        address=address,
        up=True,
        version=_text(general.get(b"version", b"")),
        uptime=general.get(b"uptime", 0),
        hits=general.get(b"get_hits", 0),
        misses=general.get(b"get_misses", 0),
        items=general.get(b"curr_items", 0),
        bytes=general.get(b"bytes", 0),
        limit_bytes=general.get(b"limit_maxbytes", 0),
        evictions=general.get(b"evictions", 0),
        out_of_memory=sum(v for k, v in items.items() if k.endswith(b":outofmemory") and isinstance(v, int)),
        connections=general.get(b"curr_connections", 0),
        rejected_connections=general.get(b"rejected_connections", 0),
        evicts_when_full=_text(settings.get(b"evictions", b"on")) == "on",
    )


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def farm_servers() -> list[ServerHealth]:
    return [probe(address) for address in get_config()["SERVERS"]]
