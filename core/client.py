"""The one place that builds the memcached client from settings."""

import contextlib
import os
import threading
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient
from pymemcache.client.rendezvous import RendezvousHash
from pymemcache.exceptions import (
    MemcacheServerError,
    MemcacheUnexpectedCloseError,
    MemcacheUnknownCommandError,
    MemcacheUnknownError,
)

from core import health
from core.conf import get_config

# A connection memcached closed (it restarted) fails once, when next used,
# before any server saw the request: another try on a fresh connection is safe
# and spares the first callers after a restart a needless error. A pool holds
# one such connection per thread that used it, each dropped as it fails, so a
# pooled client tries once more than it has idle connections.
_STALE_CONNECTION = (MemcacheUnexpectedCloseError, BrokenPipeError, ConnectionResetError)


def _past_stale_connections(call: Callable[..., Any], *args: Any, tries: int = 2, **kwargs: Any) -> Any:
    for _ in range(tries - 1):
        try:
            return call(*args, **kwargs)
        except _STALE_CONNECTION:
            continue
    return call(*args, **kwargs)


class MetaReply:
    """memcached's answer to one meta command: its status (HD stored or
    done, VA a value follows, EN miss, NF not found, NS not stored, EX CAS
    mismatch), the flags it returned (b"c" -> CAS, b"W" win, ...) and the value.
    Flags are parsed when asked for: a batch of a hundred answers seldom needs them."""

    __slots__ = ("_tokens", "status", "value")

    def __init__(self, status: bytes, tokens: bytes = b"", value: bytes | None = None) -> None:
        self.status, self._tokens, self.value = status, tokens, value

    @property
    def flags(self) -> dict[bytes, bytes]:
        return {t[:1]: t[1:] for t in self._tokens.split()}

    @property
    def ok(self) -> bool:
        return self.status in (b"HD", b"VA")

    @property
    def cas(self) -> int | None:
        """The CAS the command returned (asked for with the c flag)."""
        for token in self._tokens.split():
            if token[:1] == b"c":
                return int(token[1:])
        return None

    def __repr__(self) -> str:
        return f"MetaReply({self.status!r}, {self._tokens!r}, {self.value!r:.40})"

    def number(self) -> int | None:
        """The value of an `ma ... v` or a counter read with `mg ... v`; None if not a number."""
        return int(self.value) if self.value is not None and self.value.isdigit() else None


_META_STATUSES = frozenset((b"HD", b"VA", b"EN", b"NF", b"NS", b"EX", b"MN"))
# Bytes read at a time for meta answers (a batch of entries is hundreds of KB).
META_RECV = 256 * 1024


def meta_command(verb: bytes, wire_key: bytes, *flags: str, value: bytes | None = None) -> bytes:
    """One meta command (mg, ms, ma, md) for ReconnectingClient.meta: `flags`
    as memcached's protocol spells them ("v", "T60", "ME", "N30", "J1", "C<cas>")."""
    flag_bytes = " ".join(flags).encode()
    if value is None:
        return b"%s %s %s\r\n" % (verb, wire_key, flag_bytes)
    return b"%s %s %d %s\r\n%s\r\n" % (verb, wire_key, len(value), flag_bytes, value)


class ReconnectingClient(Client):
    """pymemcache's Client, trying again on a connection found dead, with the
    pipelined calls pymemcache has no public method for. This module is the
    one adapter to pymemcache's internals; the rest of the code calls these."""

    def add_many(self, values: dict[str, bytes], expire: int = 0) -> dict[str, bool]:
        """`add` every value in one round trip: True where it was stored (the
        key was absent)."""
        if not values:
            return {}
        return self._store_cmd(b"add", values, expire, False)

    def pipeline(self, commands: list[bytes], name: bytes) -> list[bytes]:
        """Raw protocol commands (built with `wire_key`) in one round trip; the
        reply line of each. `name` is the command, for pymemcache's errors."""
        return self._misc_cmd(commands, name, False)

    def wire_key(self, key: str) -> bytes:
        """`key` as it goes on the wire: namespaced and checked."""
        return self.check_key(key, self.key_prefix)

    def cas_many(self, items: list[tuple[str, bytes, int]], expire: int = 0) -> list[bool | None]:
        """`cas` each (key, value, version) in one round trip: True stored,
        False changed since (EXISTS), None gone (NOT_FOUND)."""
        commands = [
            b"cas %s 0 %d %d %d\r\n%s\r\n" % (self.wire_key(key), expire, len(value), version, value)
            for key, value, version in items
        ]
        lines = self.pipeline(commands, b"cas")
        return [True if line == b"STORED" else False if line == b"EXISTS" else None for line in lines]

    def touch_many(self, keys: list[str], expire: int) -> None:
        """Give each key `expire` seconds more to live, in one round trip."""
        self.pipeline([b"touch %s %d\r\n" % (self.wire_key(key), expire) for key in keys], b"touch")

    def meta(self, commands: list[bytes], *, errors: bool = False, quietly: bytes = b"") -> list[MetaReply]:
        """Meta commands (made with meta_command and wire_key) in one round
        trip, the answer to each in order. memcached's meta protocol does in
        one command what takes two in the classic one: create-and-increment
        (`ma` with N and J), add returning a CAS (`ms` with ME and c), delete
        only if unchanged (`md` with C), a miss that elects one refresher
        (`mg` with N: W to the winner).

        errors=True: a command memcached refused (SERVER_ERROR out of memory
        under -M, CLIENT_ERROR for a counter that is not a number) is an
        answer like any other, with that status and memcached's words as its
        value, and the commands after it are still read; by default it raises
        as pymemcache does. `quietly`: classic noreply commands sent in the
        same write, which answer nothing."""
        if not commands and not quietly:
            return []
        return health.call(self.address, _past_stale_connections, self._meta, commands, errors, quietly)

    def _meta(
        self, commands: list[bytes], errors: bool, quietly: bytes, quiet: list[bytes] | None = None
    ) -> list[MetaReply]:
        if self.sock is None:
            self._connect()
        try:
            trailer = b"" if quiet is None else b"".join(quiet) + b"mn\r\n"
            self.sock.sendall(b"".join(commands) + trailer + quietly)
            reader = _MetaReader(self)
            replies = [reader.reply(errors) for _ in commands]
            if quiet is not None:
                while (reply := reader.reply(True)).status != b"MN":
                    replies.append(reply)
            return replies
        except Exception:
            self.close()
            raise

    def meta_quiet(
        self, commands: list[bytes], quiet: list[bytes]
    ) -> tuple[list[MetaReply], dict[bytes, MetaReply]]:
        """`commands` as meta(), then `quiet` commands (made with the q flag
        and an opaque O<token>), which answer only when they fail, closed by
        `mn`: one round trip, and a batch's successes cost no answer to parse.
        Returns the commands' answers and the failed quiet ones by token.
        An error memcached does not say the command of raises."""
        replies = health.call(self.address, _past_stale_connections, self._meta, commands, False, b"", quiet)
        failed: dict[bytes, MetaReply] = {}
        for reply in replies[len(commands) :]:
            token = reply.flags.get(b"O")
            if token is None:
                raise MemcacheServerError(reply.status + b" " + (reply.value or b""))
            failed[token] = reply
        return replies[: len(commands)], failed

    def _fetch_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, _past_stale_connections, super()._fetch_cmd, *args, **kwargs)

    def _store_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, _past_stale_connections, super()._store_cmd, *args, **kwargs)

    def _misc_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, _past_stale_connections, super()._misc_cmd, *args, **kwargs)

    @property
    def address(self) -> str:
        """host:port, as core.health knows the server."""
        return server_address(self.server)

    def __del__(self) -> None:
        # Retired clients of a thread that never calls again (closed by no one).
        with contextlib.suppress(Exception):
            self.close()


class _MetaReader:
    """Meta answers from a client's socket, read through one buffer with a
    position: a batch's answers are parsed without copying what is left of
    the buffer for every line."""

    __slots__ = ("buf", "client", "pos")

    def __init__(self, client: ReconnectingClient) -> None:
        self.client, self.buf, self.pos = client, b"", 0

    def _more(self) -> None:
        data = self.client.sock.recv(META_RECV)
        if not data:
            raise MemcacheUnexpectedCloseError()
        self.buf, self.pos = self.buf[self.pos :] + data, 0

    def reply(self, errors: bool) -> MetaReply:
        end = self.buf.find(b"\r\n", self.pos)
        while end < 0:
            self._more()
            end = self.buf.find(b"\r\n", self.pos)
        line, self.pos = self.buf[self.pos : end], end + 2
        status, _, tokens = line.partition(b" ")
        value = None
        if status == b"VA":
            size, _, tokens = tokens.partition(b" ")
            while len(self.buf) < self.pos + int(size) + 2:
                self._more()
            stop = self.pos + int(size)
            value, self.pos = self.buf[self.pos : stop], stop + 2
        elif status not in _META_STATUSES:
            if errors and status in (b"SERVER_ERROR", b"CLIENT_ERROR"):
                return MetaReply(status, b"", tokens)
            if line == b"ERROR":
                raise MemcacheUnknownCommandError(
                    f"memcached at {self.client.server} does not know meta commands: it needs 1.6.10 or later"
                )
            self.client._raise_errors(line, b"meta")
            raise MemcacheUnknownError(line[:32])
        return MetaReply(status, tokens, value)


# Keys nginx reads itself (the public progress documents of progress.store).
NGINX_READ_PREFIX = "pub:"


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
        if text.startswith(NGINX_READ_PREFIX) and self.nodes:
            full = self.key_prefix + text.encode()
            return self.nodes[nginx_server_index(full, len(self.nodes))]
        return super().get_node(key)


class StableHashClient(HashClient):
    """A HashClient whose key-to-server map never changes.

    pymemcache's HashClient takes a failing server out of the ring, so its keys
    move to the survivors, and inside its retry window it answers with the
    default instead of raising. For counters, queue pointers and job records
    that silently splits state between servers (docs/operations.md). Here a
    server that fails stays in the ring: operations on its keys raise until it
    is back, and the caller decides what to do.
    """

    def __init__(self, servers: list, **kwargs: Any) -> None:
        prefix = kwargs.get("key_prefix", b"")
        super().__init__(servers, hasher=lambda: FarmHash(prefix), **kwargs)

    def _mark_failed_server(self, server: object) -> None:
        return None

    def _safely_run_func(self, client: Any, func: Any, default_val: Any, *args: Any, **kwargs: Any) -> Any:
        return super()._safely_run_func(client, _guarded(client, func), default_val, *args, **kwargs)

    def _set_many(self, client: Any, values: Any, *args: Any, **kwargs: Any) -> Any:
        # pymemcache's, with the call guarded: (stored keys, failed keys, error to raise).
        failed: list = []
        try:
            failed = _guarded(client, client.set_many)(values, *args, **kwargs)
        except Exception as exc:
            if not self.ignore_exc:
                return [], [], exc
        return [key for key in values if key not in failed], failed, None

    def close(self) -> None:
        # Closing needs no server: a down one must not refuse it.
        for client in self.clients.values():
            with contextlib.suppress(Exception):
                client.close()

    def __del__(self) -> None:
        # reset_client() drops clients without closing them (another thread may
        # be using one): the last one to let go closes the connections.
        with contextlib.suppress(Exception):
            self.close()


@lru_cache(maxsize=1024)
def server_address(server: Any) -> str:
    """A pymemcache client's server, (host, port) or a string, as "host:port"."""
    if isinstance(server, tuple):
        return f"{server[0]}:{server[1]}"
    return str(server)


def _guarded(client: Any, func: Callable[..., Any]) -> Callable[..., Any]:
    """func, a call through one of the ring's clients, past stale connections
    and refused at once while its server is down (core.health)."""
    # The pool drops the dead connection (destroy_on_fail): the retry gets a new one.
    idle = len(getattr(getattr(client, "client_pool", None), "free", ()))
    address = server_address(client.server)

    def run(*args: Any, **kwargs: Any) -> Any:
        return health.call(address, _past_stale_connections, func, *args, tries=idle + 2, **kwargs)

    return run


def parse_servers(servers: list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """host:port strings -> (host, port) pairs; IPv6 as [::1]:11211."""
    parsed = []
    for spec in servers:
        host, sep, port = spec.strip().rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f"memcached server {spec!r} is not host:port (MEMCACHED_SERVERS)")
        parsed.append((host, int(port)))
    if not parsed:
        raise ImproperlyConfigured("MEMCACHED_SERVERS names no server")
    return parsed


def build_client(servers: list[str] | tuple[str, ...], namespace: str, **options: object) -> StableHashClient:
    config = get_config()
    kwargs: dict = {
        "key_prefix": f"{namespace}:".encode(),
        # With noreply, add() never reports "exists" and -M's out-of-memory
        # refusals are lost.
        "default_noreply": False,
        "connect_timeout": config["CONNECT_TIMEOUT"],
        "timeout": config["TIMEOUT"],
        "no_delay": True,
        # Gunicorn threads and the reporter's heartbeat share the client.
        "use_pooling": True,
        "ignore_exc": False,
        # MEMCACHED["OPTIONS"]: more of pymemcache's options (a pool size, or
        # the counting socket module the round-trip tests pass).
        **config["OPTIONS"],
        **options,
    }
    return StableHashClient(parse_servers(servers), **kwargs)


_lock = threading.Lock()
_clients: dict[int, StableHashClient] = {}


def get_client() -> StableHashClient:
    """The process's client; a forked child (Celery prefork) builds its own."""
    pid = os.getpid()
    client = _clients.get(pid)
    if client is None:
        with _lock:
            client = _clients.get(pid)
            if client is None:
                config = get_config()
                client = build_client(config["SERVERS"], config["NAMESPACE"])
                _clients.clear()
                _clients[pid] = client
    return client


def reset_client() -> None:
    with _lock:
        # Not closed here: another thread (a log shipper, a heartbeat) may be
        # in the middle of a call, and a pool cleared under it loses track of
        # the connection it reopens. Dropped, the client closes its
        # connections when the last user lets go of it (__del__).
        _clients.clear()
        # Each thread closes its own server clients of older epochs (server_client).
        global _epoch
        _epoch += 1


def client_epoch() -> int:
    """Changes whenever reset_client() replaces the clients (settings changed)."""
    return _epoch


def client_options(ring: StableHashClient | None = None) -> dict:
    """The settings' options for a plain (unpooled) client: namespace, timeouts."""
    ring = ring or get_client()
    return {k: v for k, v in ring.default_kwargs.items() if k not in _POOL_OPTIONS}


_local = threading.local()
_POOL_OPTIONS = {"max_pool_size", "pool_idle_timeout", "lock_generator"}
_epoch = 0


def server_client(route_key: str, ring: StableHashClient | None = None) -> ReconnectingClient:
    """A plain client, for this thread, to the one server `route_key` hashes to
    on `ring` (the settings' servers by default).

    A queue keeps all its keys on one server so its counters and entries never
    split, and so a batch is one pipelined round trip to one socket.
    """
    ring = ring or get_client()
    server = ring.hasher.get_node(route_key)
    if server is None:
        raise ImproperlyConfigured("MEMCACHED_SERVERS names no server")
    return _client_of(server, ring)


def _client_of(server: str, ring: StableHashClient) -> ReconnectingClient:
    cache: dict[tuple, Client] = _local.__dict__.setdefault("clients", {})
    # A forked child inherits this thread's sockets: key by pid too. The epoch
    # retires every thread's entries when reset_client() replaces the clients;
    # each thread closes its own retired ones (never another thread's, which
    # may be in the middle of a call).
    pid = os.getpid()
    slot = (pid, _epoch, id(ring), server)
    client = cache.get(slot)
    if client is None:
        for old in [key for key in cache if key[0] == pid and key[1] != _epoch]:
            with contextlib.suppress(Exception):
                cache.pop(old).close()
        client = ReconnectingClient(ring.clients[server].server, **client_options(ring))
        cache[slot] = client
    return client


class MetaBatch:
    """Meta commands on keys anywhere on the ring, sent as one pipeline per
    server: on one server, the whole batch is one round trip.

        batch = MetaBatch()
        voted = batch.add(b"ms", marker, "T600", "ME", value=b"1")
        epoch = batch.add(b"mg", built, "v")
        replies = batch.run()
        replies[voted].status == b"HD"

    A key goes to the server it hashes to, or to its `route`'s (the keys a
    queue or a limit keeps together on one server). Raises what pymemcache
    raises for a server that cannot be reached; the batch may then have run
    on the other servers.
    """

    def __init__(self, ring: StableHashClient | None = None) -> None:
        self.ring = ring or get_client()
        self._commands: list[tuple[str, bytes, str, tuple[str, ...], bytes | None]] = []

    def add(
        self, verb: bytes, key: str, *flags: str, value: bytes | None = None, route: str | None = None
    ) -> int:
        """Queue one command; its index in run()'s answer."""
        self._commands.append((route or key, verb, key, flags, value))
        return len(self._commands) - 1

    def __len__(self) -> int:
        return len(self._commands)

    def run(self) -> list[MetaReply]:
        by_server: dict[str, list[int]] = {}
        for index, (route, *_) in enumerate(self._commands):
            server = self.ring.hasher.get_node(route)
            if server is None:
                raise ImproperlyConfigured("MEMCACHED_SERVERS names no server")
            by_server.setdefault(server, []).append(index)
        replies: list[MetaReply | None] = [None] * len(self._commands)
        for server, indexes in by_server.items():
            client = _client_of(server, self.ring)
            commands = []
            for index in indexes:
                _, verb, key, flags, value = self._commands[index]
                commands.append(meta_command(verb, client.wire_key(key), *flags, value=value))
            for index, reply in zip(indexes, client.meta(commands), strict=True):
                replies[index] = reply
        self._commands = []
        return replies  # type: ignore[return-value]
