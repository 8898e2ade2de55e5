"""Meta commands on keys anywhere on the ring, one pipeline per server."""

from webfarm.core.client.changing import ChangingRing
from webfarm.core.client.changing_meta import derived, run_moving
from webfarm.core.client.clients import client_of, get_client, server_of
from webfarm.core.client.protocol import MetaReply, meta_command
from webfarm.core.client.ring import StableHashClient


class MetaBatch:
    """Meta commands on keys anywhere on the ring, sent as one pipeline per
    server: on one server, the whole batch is one round trip.

        batch = MetaBatch()
        voted = batch.set(marker, "T600", "ME", value=b"1")
        epoch = batch.get(built, "v")
        replies = batch.run()
        replies[voted].done

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

    def get(self, key: str, *flags: str, route: str | None = None) -> int:
        """`mg` (protocol.meta_get's flags)."""
        return self.add(b"mg", key, *flags, route=route)

    def set(self, key: str, *flags: str, value: bytes, route: str | None = None) -> int:
        """`ms` (protocol.meta_set's flags)."""
        return self.add(b"ms", key, *flags, value=value, route=route)

    def arithmetic(self, key: str, *flags: str, route: str | None = None) -> int:
        """`ma` (protocol.meta_arithmetic's flags)."""
        return self.add(b"ma", key, *flags, route=route)

    def delete(self, key: str, *flags: str, route: str | None = None) -> int:
        """`md` (protocol.meta_delete's flags)."""
        return self.add(b"md", key, *flags, route=route)

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
