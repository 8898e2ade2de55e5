"""The wire: pymemcache's Client with the pipelined and meta commands the
farm sends, and the one place that reads memcached's replies itself."""

import contextlib
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal

from pymemcache.client.base import Client
from pymemcache.exceptions import (
    MemcacheServerError,
    MemcacheUnexpectedCloseError,
    MemcacheUnknownCommandError,
    MemcacheUnknownError,
)

from webfarm.core import health

# A connection memcached closed (it restarted) fails once, when next used,
# before any server saw the request: another try on a fresh connection is safe
# and spares the first callers after a restart a needless error. A pool holds
# one such connection per thread that used it, each dropped as it fails, so a
# pooled client tries once more than it has idle connections.
_STALE_CONNECTION = (MemcacheUnexpectedCloseError, BrokenPipeError, ConnectionResetError)


def past_stale_connections(call: Callable[..., Any], *args: Any, tries: int = 2, **kwargs: Any) -> Any:
    for _ in range(tries - 1):
        try:
            return call(*args, **kwargs)
        except _STALE_CONNECTION:
            continue
    return call(*args, **kwargs)


# What memcached holds for an item besides its key and value: the item header,
# the CAS unique and the client flags (memcached 1.6's `bytes` statistic
# counts 59 bytes, 63 with flags), rounded up.
ITEM_OVERHEAD = 64
# memcached's slab classes as it makes them by default (-n 48, -f 1.25): an
# item takes a chunk of the smallest class that holds it.
_SMALLEST_CHUNK, _GROWTH, _CHUNK_ALIGN, _LARGEST_CHUNK = 96, 1.25, 8, 512 * 1024


@lru_cache(maxsize=1)
def _slab_chunks() -> tuple[int, ...]:
    chunks, size = [], _SMALLEST_CHUNK
    while size < _LARGEST_CHUNK:
        chunks.append(size)
        size = -(-int(size * _GROWTH) // _CHUNK_ALIGN) * _CHUNK_ALIGN
    return (*chunks, _LARGEST_CHUNK)


def item_memory(key_size: int, value_size: int) -> int:
    """The memory memcached takes for an item with a key (as on the wire)
    and a value of these sizes: the slab chunk it lands in. A cap on what a
    client may store counts this, not the value alone: a one-byte value
    takes a chunk of 96 bytes or more."""
    size = ITEM_OVERHEAD + key_size + value_size
    for chunk in _slab_chunks():
        if size <= chunk:
            return chunk
    # Past the largest chunk an item is stored in chunks of that size.
    return -(-size // _LARGEST_CHUNK) * _LARGEST_CHUNK


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
    def done(self) -> bool:
        """HD: stored (ms), deleted (md), applied (ma without v), or found (mg without v)."""
        return self.status == b"HD"

    @property
    def hit(self) -> bool:
        """VA: the command returned a value."""
        return self.status == b"VA"

    @property
    def changed(self) -> bool:
        """EX: the item's CAS was not the one the command named."""
        return self.status == b"EX"

    @property
    def missing(self) -> bool:
        """NF: no such item (ms with a CAS, md, ma)."""
        return self.status == b"NF"

    @property
    def refused(self) -> bool:
        """SERVER_ERROR: memcached refused the command (out of memory under -M)."""
        return self.status == b"SERVER_ERROR"

    def as_error(self) -> MemcacheServerError:
        """What pymemcache raises for a command memcached refused (see `refused`)."""
        return MemcacheServerError(self.status + b" " + (self.value or b""))

    @property
    def won(self) -> bool:
        """W: memcached elected this caller to recompute the value (mg with N or R)."""
        return b"W" in self.flags

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


def meta_get(wire_key: bytes, *flags: str) -> bytes:
    """`mg`: read an item ("v" its value, "c" its CAS, "N30" create on miss...)."""
    return meta_command(b"mg", wire_key, *flags)


def meta_set(wire_key: bytes, *flags: str, value: bytes) -> bytes:
    """`ms`: store an item ("T60" its lifetime, "ME" only if absent, "C<cas>" only at that CAS)."""
    return meta_command(b"ms", wire_key, *flags, value=value)


def meta_arithmetic(wire_key: bytes, *flags: str) -> bytes:
    """`ma`: add to a number ("D5" by 5, "MD" subtract, "N30" create on miss, "v" return it)."""
    return meta_command(b"ma", wire_key, *flags)


def meta_delete(wire_key: bytes, *flags: str) -> bytes:
    """`md`: delete an item ("C<cas>" only at that CAS)."""
    return meta_command(b"md", wire_key, *flags)


# The queue's hot paths compose a batch's flags once and send hundreds of
# these: one % each, where meta_command joins and encodes its flags per call.
def get_line(wire_key: bytes, flags: bytes) -> bytes:
    """`mg` with flags already spelled as bytes (b"v c")."""
    return b"mg %s %s\r\n" % (wire_key, flags)


def set_line(wire_key: bytes, flags: bytes, value: bytes) -> bytes:
    """`ms` with flags already spelled as bytes (b"T60 ME q O3")."""
    return b"ms %s %d %s\r\n%s\r\n" % (wire_key, len(value), flags, value)


def _add_line(wire_key: bytes, ttl: int, value: bytes) -> bytes:
    return b"add %s 0 %d %d\r\n%s\r\n" % (wire_key, ttl, len(value), value)


def _exists_line(wire_key: bytes) -> bytes:
    # An append of nothing: STORED if the item exists, and it changes nothing.
    return b"append %s 0 0 0\r\n\r\n" % wire_key


def delete_quietly_line(wire_key: bytes) -> bytes:
    """A classic `delete` with noreply: rides in a meta batch's quiet part."""
    return b"delete %s noreply\r\n" % wire_key


def incr_quietly_line(wire_key: bytes, n: int) -> bytes:
    """A classic `incr` with noreply: rides in a meta batch's quiet part."""
    return b"incr %s %d noreply\r\n" % (wire_key, n)


@lru_cache(maxsize=1024)
def server_address(server: Any) -> str:
    """A pymemcache client's server, (host, port) or a string, as "host:port"."""
    if isinstance(server, tuple):
        return f"{server[0]}:{server[1]}"
    return str(server)


class ReconnectingClient(Client):
    """pymemcache's Client, trying again on a connection found dead, with the
    pipelined calls pymemcache has no public method for. This module is the
    one adapter to pymemcache's internals; the rest of the code calls these."""

    def add_many(self, values: dict[str, bytes], expire: int = 0) -> dict[str, bool]:
        """`add` every value in one round trip: True where it was stored (the
        key was absent)."""
        if not values:
            return {}
        stored = self._store_cmd(b"add", dict(values), expire, False)
        return {key.decode() if isinstance(key, bytes) else key: bool(done) for key, done in stored.items()}

    def pipeline(self, commands: list[bytes], name: bytes) -> list[bytes]:
        """Raw protocol commands (built with `wire_key`) in one round trip; the
        reply line of each. `name` is the command, for pymemcache's errors."""
        replies: list[bytes] = self._misc_cmd(commands, name, False)
        return replies

    def add_then_check(
        self, values: dict[str, bytes], ttl: int, existing: str
    ) -> tuple[dict[str, bool], bool]:
        """The classic protocol's `add` of each value (stored only where absent),
        then whether `existing` exists (an append of nothing), in one round
        trip: key -> stored, and the check."""
        commands = [_add_line(self.wire_key(key), ttl, value) for key, value in values.items()]
        commands.append(_exists_line(self.wire_key(existing)))
        lines = self.pipeline(commands, b"add")
        added = {key: line == b"STORED" for key, line in zip(values, lines, strict=False)}
        return added, lines[-1] == b"STORED"

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
        return health.call(self.address, past_stale_connections, self._meta, commands, errors, quietly)

    def _meta(
        self, commands: list[bytes], errors: bool, quietly: bytes, quiet: list[bytes] | None = None
    ) -> list[MetaReply]:
        if self.sock is None:
            self._connect()
        try:
            trailer = b"" if quiet is None else b"".join(quiet) + b"mn\r\n"
            assert self.sock is not None  # _connect made it, or raised
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
        replies = health.call(self.address, past_stale_connections, self._meta, commands, False, b"", quiet)
        failed: dict[bytes, MetaReply] = {}
        for reply in replies[len(commands) :]:
            token = reply.flags.get(b"O")
            if token is None:
                raise MemcacheServerError(reply.status + b" " + (reply.value or b""))
            failed[token] = reply
        return replies[: len(commands)], failed

    def _fetch_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, past_stale_connections, super()._fetch_cmd, *args, **kwargs)

    def _store_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, past_stale_connections, super()._store_cmd, *args, **kwargs)

    def _misc_cmd(self, *args: Any, **kwargs: Any) -> Any:
        return health.call(self.address, past_stale_connections, super()._misc_cmd, *args, **kwargs)

    @property
    def address(self) -> str:
        """host:port, as webfarm.core.health knows the server."""
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
        sock = self.client.sock
        if sock is None:  # closed by an error meanwhile
            raise MemcacheUnexpectedCloseError()
        data = sock.recv(META_RECV)
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


# The meta flags, spelled here alone: MetaBatch's keywords, and what a caller
# that sends its own pipeline (memo's one `mg`) asks with.


def get_flags(
    *, value: bool = True, cas: bool = False, vivify: int | None = None, recache: int | None = None
) -> tuple[str, ...]:
    """`mg`'s: the value (v), its CAS token (c); a miss makes an empty item
    of `vivify` seconds and wins the right to fill it (N, W); a value with
    less than `recache` seconds left wins it too (R)."""
    return (*_if(value, "v"), *_if(cas, "c"), *_number("N", vivify), *_number("R", recache))


def set_flags(
    *,
    ttl: int | None = None,
    mode: Literal["set", "add"] = "set",
    cas: int | bytes | None = None,
    return_cas: bool = False,
    quiet: bool = False,
) -> tuple[str, ...]:
    """`ms`'s: the lifetime (T), add only where absent (ME), only over a
    version (C), answer the new version (c), answer only a failure (q)."""
    return (
        *_number("T", ttl),
        *_if(mode == "add", "ME"),
        *_number("C", None if cas is None else int(cas)),
        *_if(return_cas, "c"),
        *_if(quiet, "q"),
    )


def arithmetic_flags(
    *,
    delta: int | None = None,
    decrement: bool = False,
    vivify: int | None = None,
    initial: int | None = None,
    value: bool = False,
) -> tuple[str, ...]:
    """`ma`'s: make a missing number with `initial` for `vivify` seconds (N,
    J), by `delta` (D), down (MD), answer the number (v)."""
    return (
        *_number("N", vivify),
        *_number("J", initial),
        *_number("D", delta),
        *_if(decrement, "MD"),
        *_if(value, "v"),
    )


def delete_flags(*, cas: int | bytes | None = None) -> tuple[str, ...]:
    """`md`'s: only that version (C)."""
    return _number("C", None if cas is None else int(cas))


def flags_bytes(flags: tuple[str, ...]) -> bytes:
    """Flags as get_line() and set_line() take them, built once for a batch."""
    return " ".join(flags).encode()


def with_opaque(flags: bytes, opaque: int) -> bytes:
    """A pipeline's command's own flags: the opaque its quiet failure is named by (O)."""
    return b"%s O%d" % (flags, opaque)


def with_cas(flags: bytes, version: int) -> bytes:
    """Only over this version (C), one command's own."""
    return b"C%d %s" % (version, flags)


def _if(wanted: bool, flag: str) -> tuple[str, ...]:
    return (flag,) if wanted else ()


def _number(flag: str, number: int | None) -> tuple[str, ...]:
    return () if number is None else (f"{flag}{number}",)
