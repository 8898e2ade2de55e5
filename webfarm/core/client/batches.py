"""Meta commands on keys anywhere on the ring, one pipeline per server."""

from typing import Literal

from webfarm.core.client.changing import ChangingRing
from webfarm.core.client.changing_meta import derived, run_moving
from webfarm.core.client.clients import client_of, get_client, server_of
from webfarm.core.client.protocol import (
    MetaReply,
    arithmetic_flags,
    delete_flags,
    get_flags,
    meta_command,
    set_flags,
)
from webfarm.core.client.ring import StableHashClient


class MetaBatch:
    """Meta commands on keys anywhere on the ring, sent as one pipeline per
    server: on one server, the whole batch is one round trip.

        batch = MetaBatch()
        voted = batch.set(marker, value=b"1", ttl=600, mode="add")
        epoch = batch.get(built)
        replies = batch.run()
        replies[voted].done

    The keywords are memcached's meta flags, spelled here alone; add()
    takes them raw.

    A key goes to the server it hashes to, or to its `route`'s (the keys a
    queue or a limit keeps together on one server). Raises what pymemcache
    raises for a server that cannot be reached; the batch may then have run
    on the other servers.

    While the pool changes (a ChangingRing), a key that moves is read and
    written as changing_meta says, outside the pipelines; a routed group
    stays on its old server for now.
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

    def get(
        self,
        key: str,
        *,
        value: bool = True,
        cas: bool = False,
        vivify: int | None = None,
        recache: int | None = None,
        route: str | None = None,
    ) -> int:
        """`mg`: the value (and its CAS token, `cas`). `vivify`: a miss makes
        an empty item of that lifetime and wins the right to fill it (W);
        `recache`: a value with less than that many seconds left wins it too."""
        return self.add(
            b"mg", key, *get_flags(value=value, cas=cas, vivify=vivify, recache=recache), route=route
        )

    def set(
        self,
        key: str,
        *,
        value: bytes,
        ttl: int | None = None,
        mode: Literal["set", "add"] = "set",
        cas: int | bytes | None = None,
        return_cas: bool = False,
        route: str | None = None,
    ) -> int:
        """`ms`: stored for `ttl` seconds; mode="add" only where the key is
        absent; `cas` only over that version; `return_cas` answers the new one."""
        flags = set_flags(ttl=ttl, mode=mode, cas=cas, return_cas=return_cas)
        return self.add(b"ms", key, *flags, value=value, route=route)

    def arithmetic(
        self,
        key: str,
        *,
        delta: int | None = None,
        decrement: bool = False,
        vivify: int | None = None,
        initial: int | None = None,
        value: bool = False,
        route: str | None = None,
    ) -> int:
        """`ma`: add `delta` (1 if None), or take it away (`decrement`); a
        missing number is made with `initial` for `vivify` seconds, or the
        command misses (NF); `value` answers the number."""
        flags = arithmetic_flags(
            delta=delta, decrement=decrement, vivify=vivify, initial=initial, value=value
        )
        return self.add(b"ma", key, *flags, route=route)

    def delete(self, key: str, *, cas: int | bytes | None = None, route: str | None = None) -> int:
        """`md`: only that version, with `cas`."""
        return self.add(b"md", key, *delete_flags(cas=cas), route=route)

    def __len__(self) -> int:
        return len(self._commands)

    def run(self, *, errors: bool = False) -> list[MetaReply]:
        """The replies, in the order the commands were added. errors=True: a
        command memcached refused (SERVER_ERROR out of memory under -M) is a
        reply with that status, and the commands after it still run, so the
        caller learns what was stored; by default the first refusal raises."""
        replies: list[MetaReply | None] = [None] * len(self._commands)
        by_server: dict[tuple[str, StableHashClient], list[int]] = {}
        if isinstance(self.ring, ChangingRing):
            self._moving_first(self.ring, replies, by_server, errors)
        else:
            for index, (route, *_) in enumerate(self._commands):
                by_server.setdefault((server_of(route, self.ring), self.ring), []).append(index)
        for (server, ring), indexes in by_server.items():
            client = client_of(server, ring)
            commands = []
            for index in indexes:
                _, verb, key, flags, value = self._commands[index]
                commands.append(meta_command(verb, client.wire_key(key), *flags, value=value))
            for index, reply in zip(indexes, client.meta(commands, errors=errors), strict=True):
                replies[index] = reply
        self._commands = []
        return replies  # type: ignore[return-value]

    def _moving_first(
        self,
        ring: ChangingRing,
        replies: list[MetaReply | None],
        by_server: dict[tuple[str, StableHashClient], list[int]],
        errors: bool,
    ) -> None:
        """While the pool changes: each command on a moving key run now, as
        changing_meta does it; the others grouped by server as usual."""
        for index, (route, verb, key, flags, value) in enumerate(self._commands):
            if route == key and not derived(verb, flags) and ring.moving(key):
                replies[index] = run_moving(ring, verb, key, flags, value, errors=errors)
                continue
            by_server.setdefault((server_of(route, ring), ring), []).append(index)  # type: ignore[arg-type]
