"""Which server a key lives on: rendezvous hashing, except for the keys
nginx reads itself, which go where nginx looks first."""

import zlib

from pymemcache.client.rendezvous import RendezvousHash


class KeyFamilies:
    """Key prefixes the apps that write the keys named (this module knows
    only what to do with them). Tuples, so a key is matched by one
    str.startswith."""

    def __init__(self) -> None:
        self.prefixes: tuple[str, ...] = ()

    def add(self, prefix: str) -> str:
        if prefix not in self.prefixes:
            self.prefixes = (*self.prefixes, prefix)
        return prefix

    def holds(self, key: str) -> bool:
        return bool(self.prefixes) and key.startswith(self.prefixes)


_read_by_nginx = KeyFamilies()
_kept_together = KeyFamilies()


def read_by_nginx(prefix: str) -> str:
    """Keys that start with `prefix` are read by nginx (`hash $memcached_key;`
    over the same servers): they go on the server nginx asks first. Call it
    where the key family is defined, before its first key is written."""
    return _read_by_nginx.add(prefix)


def kept_together(prefix: str) -> str:
    """Keys that start with `prefix` live on the server of a group they
    belong to (a queue's on "q:<name>"'s, a scope's slots on "slot:<scope>"'s),
    not on their own key's, or are another namespace's under this one (the
    broker's "<namespace>:broker:"), or are read and written on one server
    by callers that route them themselves (server_client: memo's values, the
    queue front's byte count): a pool change moves them by their group
    (webfarm/queues/leftovers.py), or leaves them to be made again on the
    new list, never one by one."""
    return _kept_together.add(prefix)


def is_kept_together(key: str) -> bool:
    return _kept_together.holds(key)


def is_read_by_nginx(key: str) -> bool:
    """Whether nginx reads `key` (its family called read_by_nginx)."""
    return _read_by_nginx.holds(key)


def nginx_server_index(full_key: bytes, servers: int) -> int:
    """The server nginx's `hash $memcached_key;` asks first for full_key (the
    namespaced key), with servers listed in order and of equal weight.

    nginx documents this hash as compatible with Perl's Cache::Memcached:
    ((crc32(key) >> 16) & 0x7fff) modulo the total weight.
    """
    return ((zlib.crc32(full_key) >> 16) & 0x7FFF) % servers


# Keys whose server FarmHash remembers (it hashes in pure Python, per server).
PLACED_MAX = 16384


class FarmHash(RendezvousHash):
    """Rendezvous hashing, except for the keys nginx reads: those go where
    nginx looks first, so a fast-path poll costs one memcached round trip
    however many servers there are.

    The ring never changes while a client lives (StableHashClient keeps dead
    servers in it), so a key's server is worked out once and remembered;
    with one server there is nothing to work out."""

    def __init__(self, key_prefix: bytes = b"") -> None:
        super().__init__()
        self.key_prefix = key_prefix
        self._placed: dict[str | bytes, str | None] = {}

    def add_node(self, node: str) -> None:
        super().add_node(node)
        self._placed = {}

    def remove_node(self, node: str) -> None:
        super().remove_node(node)
        self._placed = {}

    def get_node(self, key: str | bytes) -> str | None:
        nodes = self.nodes
        if len(nodes) == 1:
            return nodes[0]
        placed = self._placed
        node = placed.get(key)
        if node is None:
            node = self._place(key)
            if len(placed) >= PLACED_MAX:
                placed.clear()
            placed[key] = node
        return node

    def _place(self, key: str | bytes) -> str | None:
        text = key.decode() if isinstance(key, bytes) else key
        if self.nodes and _read_by_nginx.holds(text):
            full = self.key_prefix + text.encode()
            return self.nodes[nginx_server_index(full, len(self.nodes))]
        return super().get_node(key)
