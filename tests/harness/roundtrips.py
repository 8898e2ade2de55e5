"""What an operation costs in memcached and the database: commands, round
trips and queries, measured on the wire rather than estimated.

Every pymemcache client the farm makes (webfarm.core.client's ring and per-server
clients, Django's cache) accepts a `socket_module`; this one hands out
sockets that note, per thread, each command sent and each round trip (a
read after a send: a batch of pipelined or noreply commands followed by one
read is one round trip, a noreply command nobody waits for is none; a new
connection's handshake is one more). The
budget test and `bench.roundtrips` use it around Django's test client, in
one thread, against a real memcached and a real database:

    with counting(settings):
        cost = steady(lambda: client.get(url))
    cost.round_trips, cost.commands, cost.queries
"""

import socket
import threading
import types
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

# Classic storage commands carry a data block of the size in their 5th token.
_STORAGE = {b"set", b"add", b"replace", b"append", b"prepend", b"cas"}


def verbs_in(data: bytes) -> list[bytes]:
    """The commands in bytes a client sent (text and meta protocol)."""
    verbs, pos = [], 0
    while pos < len(data):
        end = data.find(b"\r\n", pos)
        if end < 0:
            break
        parts = data[pos:end].split()
        pos = end + 2
        if not parts:
            continue
        verb = parts[0]
        if verb in _STORAGE and len(parts) >= 5:
            pos += int(parts[4]) + 2
        elif verb == b"ms" and len(parts) >= 3:
            pos += int(parts[2]) + 2
        verbs.append(verb)
    return verbs


@dataclass
class Tally:
    round_trips: int = 0
    connects: int = 0
    verbs: Counter = field(default_factory=Counter)
    # The commands each round trip carried, in order ("connect" for a handshake).
    trips: list[list[str]] = field(default_factory=list)

    @property
    def commands(self) -> int:
        return sum(self.verbs.values())


_lock = threading.Lock()
_tallies: dict[int, Tally] = {}


def _tally() -> Tally:
    ident = threading.get_ident()
    with _lock:
        return _tallies.setdefault(ident, Tally())


class CountingSocket:
    """A real socket that counts what crosses it for the thread using it."""

    def __init__(self, real: socket.socket) -> None:
        self._real = real
        self._awaiting = False  # sent something since the last read
        self._sent: list[str] = []

    def connect(self, address: Any) -> None:
        # A TCP handshake is a round trip before the first command.
        self._real.connect(address)
        tally = _tally()
        tally.connects += 1
        tally.round_trips += 1
        tally.trips.append(["connect"])

    def sendall(self, data: bytes, *args: Any) -> None:
        self._real.sendall(data, *args)
        tally = _tally()
        verbs = verbs_in(bytes(data))
        tally.verbs.update(verbs)
        self._sent += [verb.decode() for verb in verbs]
        self._awaiting = True

    def recv(self, size: int, *args: Any) -> bytes:
        data = self._real.recv(size, *args)
        if self._awaiting:
            tally = _tally()
            tally.round_trips += 1
            tally.trips.append(self._sent)
            self._sent, self._awaiting = [], False
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _counting_socket(*args: Any, **kwargs: Any) -> CountingSocket:
    return CountingSocket(socket.socket(*args, **kwargs))


# The socket module, with sockets that count.
counting_socket_module = types.SimpleNamespace(
    **{name: getattr(socket, name) for name in dir(socket) if not name.startswith("__")}
)
counting_socket_module.socket = _counting_socket


@contextmanager
def counting(settings: Any) -> Iterator[None]:
    """Make every memcached client of this process count (pytest-django's
    `settings`, or any object whose MEMCACHED and CACHES can be set)."""
    settings.MEMCACHED = {
        **settings.MEMCACHED,
        "OPTIONS": {**settings.MEMCACHED.get("OPTIONS", {}), "socket_module": counting_socket_module},
    }
    cache = settings.CACHES["default"]
    settings.CACHES = {
        **settings.CACHES,
        "default": {
            **cache,
            "OPTIONS": {**cache.get("OPTIONS", {}), "socket_module": counting_socket_module},
        },
    }
    yield


@dataclass(frozen=True)
class Cost:
    round_trips: int  # connects included
    connects: int
    commands: int
    queries: int
    verbs: dict[str, int]
    trips: list[list[str]] = field(default_factory=list)
    result: Any = None

    def __str__(self) -> str:
        verbs = " ".join(f"{v}x{n}" for v, n in sorted(self.verbs.items()))
        trips = " | ".join(runs(trip) for trip in self.trips)
        return (
            f"{self.round_trips} round trips ({self.connects} connects), "
            f"{self.commands} commands ({verbs}), {self.queries} queries; trips: {trips}"
        )


def runs(verbs: list[str]) -> str:
    """["mg", "mg", "ms"] -> "mg*2 ms": a batch's trip in a few words."""
    runs: list[list] = []
    for verb in verbs:
        if runs and runs[-1][0] == verb:
            runs[-1][1] += 1
        else:
            runs.append([verb, 1])
    return " ".join(verb if n == 1 else f"{verb}*{n}" for verb, n in runs)


def measure(operation: Callable[[], Any]) -> Cost:
    """Run `operation` in this thread; what it cost. Work other threads do
    meanwhile (the log shipper, say) is not counted: it is not on the
    caller's path."""
    ident = threading.get_ident()
    with _lock:
        _tallies[ident] = Tally()
    with CaptureQueriesContext(connection) as queries:
        result = operation()
    with _lock:
        tally = _tallies.pop(ident)
    return Cost(
        round_trips=tally.round_trips,
        connects=tally.connects,
        commands=tally.commands,
        queries=len(queries.captured_queries),
        verbs={verb.decode(): n for verb, n in tally.verbs.items()},
        trips=tally.trips,
        result=result,
    )


def steady(operation: Callable[[], Any], runs: int = 3) -> Cost:
    """What the operation costs once connections are made: the dearest of a
    few runs that opened none. A pool grows a connection when a background
    thread (the counters' sender) holds one at that moment, which happens
    once, not per request; a connection opened by every run is a cost of the
    operation, and then that is what is returned."""
    costs = [measure(operation) for _ in range(runs)]
    warm = [cost for cost in costs if not cost.connects]
    return max(warm or costs, key=lambda cost: cost.round_trips)
