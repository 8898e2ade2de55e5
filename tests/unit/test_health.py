"""A memcached server that stops answering is marked down after a bounded
number of failed calls, is not tried on every call after that, is tried again
by the process's prober and by no call, and comes back by itself (webfarm.core.health). Against a real
memcached and a real socket that accepts connections and never answers, the
way a host that vanished behind a switch behaves for a connection that was
already open."""

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import suppress

import pytest
from pymemcache.exceptions import MemcacheServerError

from tests.harness import processes
from webfarm.core import health
from webfarm.core.client import get_client, server_address, server_client


class Silent:
    """A TCP server that accepts and reads, and never answers a byte."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.received = 0
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self._conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        while data := _recv(conn):
            self.received += len(data)

    def close(self) -> None:
        # shutdown() wakes the accepting thread; close() alone leaves it listening.
        with suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self._conns:
            conn.close()


def _recv(conn: socket.socket) -> bytes:
    try:
        return conn.recv(65536)
    except OSError:
        return b""


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


@pytest.fixture
def two_servers(settings, memcached_server: str, silent: Silent) -> Iterator[tuple[str, str]]:
    """The ring: the session's memcached and the silent one; short timeouts."""
    settings.MEMCACHED = {
        **settings.MEMCACHED,
        "SERVERS": [memcached_server, silent.address],
        "CONNECT_TIMEOUT": 0.3,
        "TIMEOUT": 0.3,
        "DOWN_AFTER": 2,
        "RETRY_DOWN": 0.5,
    }
    yield memcached_server, silent.address
    health.forget()


def _key_on(server: str, prefix: str) -> str:
    ring = get_client()
    return next(
        f"{prefix}{i}"
        for i in range(1000)
        if server_address(ring._get_client(f"{prefix}{i}").server) == server
    )


def test_a_silent_server_is_down_after_the_failures_allowed_and_then_not_tried(two_servers, silent):
    live, dead = two_servers
    ring = get_client()
    dead_key, live_key = _key_on(dead, "k"), _key_on(live, "k")

    _mark_down(ring, dead_key)
    assert health.is_down(dead)
    tried = silent.received

    # Down: every call fails at once with a clear error, and none reaches it.
    for _ in range(50):
        with pytest.raises(health.ServerDown, match="is down"):
            ring.set(dead_key, b"x")
        with pytest.raises(health.ServerDown):
            server_client(dead_key).meta([b"mn\r\n"])
    assert silent.received == tried
    # The other server's keys carry on.
    ring.set(live_key, b"fine")
    assert ring.get(live_key) == b"fine"


def test_no_call_tries_a_down_server_again_the_prober_does(two_servers, silent):
    """While it is down, every call is refused at once, however long it
    stays down (a request pays one timeout per process, never one per
    RETRY_DOWN); the prober alone tries it, on connections of its own."""
    _, dead = two_servers
    ring = get_client()
    dead_key = _key_on(dead, "k")
    _mark_down(ring, dead_key)
    tried, probes = silent.received, silent.connections
    refused: list[int] = []

    def calls() -> None:
        deadline = time.monotonic() + 4 * 0.5  # four RETRY_DOWN periods
        while time.monotonic() < deadline:
            # ServerDown, not a timeout: refused without trying (a try that
            # failed raises TimeoutError after 0.3 s).
            with pytest.raises(health.ServerDown, match="is down"):
                ring.get(dead_key)
            refused.append(1)
            time.sleep(0.01)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(refused) > 40

    # The prober asked meanwhile, each time on a new connection: a version
    # request, never a call's command.
    def only_probes() -> bool:
        made = silent.connections - probes
        return made >= 2 and silent.received - tried == len(b"version\r\n") * made

    processes.wait_for(only_probes, timeout=5, what="the prober's tries, and nothing else")
    assert health.is_down(dead)


def _refused(ring, key: str) -> bool:
    """True when a call was refused without trying; False when it tried (and failed)."""
    try:
        ring.get(key)
    except health.ServerDown:
        return True
    except OSError:
        return False
    raise AssertionError("the silent server answered")


def _mark_down(ring, key: str) -> None:
    for _ in range(2):  # DOWN_AFTER failures, each a whole timeout
        with pytest.raises(TimeoutError):
            ring.get(key)


def test_a_server_that_comes_back_is_used_again_without_a_restart(two_servers, silent, tmp_path):
    _, dead = two_servers
    ring = get_client()
    dead_key = _key_on(dead, "k")
    _mark_down(ring, dead_key)
    silent.close()  # the host is back, memcached on it is not yet: refused, at once
    processes.wait_for(lambda: not _refused(ring, dead_key), timeout=5, what="a retry")
    server, _ = processes.memcached(tmp_path, port=int(dead.rsplit(":", 1)[1]))
    try:
        processes.wait_for(lambda: ring.set(dead_key, b"back"), timeout=5, what="the server to be used again")
        assert ring.get(dead_key) == b"back"
        assert not health.is_down(dead)
    finally:
        server.stop()


def test_a_refused_connection_is_not_held_against_a_server(settings, tmp_path):
    """Refused costs no time (memcached restarting on a live host): the next
    call tries again, and finds it back at once."""
    port = processes.free_port()
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{port}"], "DOWN_AFTER": 1}
    ring = get_client()
    for _ in range(3):
        with pytest.raises(ConnectionRefusedError):
            ring.set("k", b"1")
    assert not health.is_down(f"127.0.0.1:{port}")
    server, _ = processes.memcached(tmp_path, port=port)
    try:
        ring.set("k", b"at once")
        assert ring.get("k") == b"at once"
    finally:
        server.stop()


def test_a_server_that_answers_with_an_error_is_not_down(settings, memcached_server):
    settings.MEMCACHED = {**settings.MEMCACHED, "DOWN_AFTER": 1}
    ring = get_client()
    with pytest.raises(MemcacheServerError, match="too large"):
        ring.set("big", b"x" * (2 << 20))  # past memcached's item size: it says so
    assert not health.is_down(memcached_server)
    ring.set("small", b"x")
    assert ring.get("small") == b"x"


def test_a_child_forked_while_the_lock_was_held_can_still_mark_a_server_down(two_servers):
    """Celery's prefork pool forks while other threads run: a child must not
    inherit a lock held by a thread it does not have."""
    _, dead = two_servers
    with health._lock:
        pid = os.fork()
        if pid == 0:  # the child: mark the server down, and say whether it could
            try:
                for _ in range(2):  # DOWN_AFTER
                    health._failed(dead)
                os._exit(0 if health.is_down(dead) else 1)
            finally:
                os._exit(2)
    deadline = time.monotonic() + 10
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the child hung on the lock it inherited")
    assert os.waitstatus_to_exitcode(done[1]) == 0
