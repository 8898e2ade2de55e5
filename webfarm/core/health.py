"""Which memcached servers this process has found unreachable.

A server whose host vanishes without a reset (its link down, a cable pulled)
costs every call a whole timeout: a web node that kept trying it on every
request would hold each request for seconds. So a server that failed
MEMCACHED["DOWN_AFTER"] times in a row is down for this process: calls to it
raise ServerDown at once, without touching the network. A request pays for
a vanished server once per process, when it finds it gone, never again
while it stays gone: the process's prober, a thread of its own, asks a down
server for its version every MEMCACHED["RETRY_DOWN"] seconds, on a
connection of its own, and the first answer brings it back. (A request
that made the tries itself would pay a whole timeout for each: a login that
asks memcached five times over a few seconds of password hashing waited
five timeouts.) Keys never move to another server while one is down
(webfarm.core.client.StableHashClient): callers see the error they would
have seen, only sooner.

Only a failure that cost time counts: a call that timed out, or a host
found unreachable. A refused or reset connection costs one round trip (the
host is there, memcached is not, or just restarted), so it is not held
against the server; nor is an answer, even an error such as out of memory.
"""

import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from webfarm.core.conf import get_config

log = logging.getLogger(__name__)

T = TypeVar("T")

_UNREACHABLE = frozenset((errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN))


class ServerDown(MemcacheError):
    """A call refused without trying: the server failed just now and is not
    due for another try yet."""


class _Failing:
    __slots__ = ("failures", "retry_at")

    def __init__(self) -> None:
        self.failures = 0
        self.retry_at = 0.0  # 0: not down yet


_lock = threading.Lock()


def _fresh_lock_in_child() -> None:
    # A child forked while another thread held the lock (Celery's prefork
    # pool, gunicorn's workers) would wait on it forever; and it has no
    # prober, whatever its parent had (threads are not forked).
    global _lock, _prober
    _lock = threading.Lock()
    _prober = None


os.register_at_fork(after_in_child=_fresh_lock_in_child)

# Servers ("host:port") that failed lately; a healthy server is not in it,
# so a call to one costs one dict lookup.
_failing: dict[str, _Failing] = {}
_prober: threading.Thread | None = None


def call(server: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs), a call to `server`, unless the server is down;
    its connection failures are counted."""
    state = _failing.get(server)
    if state is not None and state.retry_at:
        _ensure_prober()
        raise ServerDown(f"memcached {server} is down: it stopped answering just now")
    try:
        result = fn(*args, **kwargs)
    except OSError as exc:
        if isinstance(exc, TimeoutError) or exc.errno in _UNREACHABLE:
            _failed(server)
        raise
    if state is not None:
        _answered(server)
    return result


def is_down(server: str) -> bool:
    state = _failing.get(server)
    return state is not None and bool(state.retry_at)


def _failed(server: str) -> None:
    config = get_config()
    with _lock:
        state = _failing.setdefault(server, _Failing())
        state.failures += 1
        if state.failures >= config["DOWN_AFTER"]:
            if not state.retry_at:
                log.info("memcached %s is down after %d failed calls", server, state.failures)
            state.retry_at = time.monotonic() + config["RETRY_DOWN"]
            down = True
        else:
            down = False
    if down:
        _ensure_prober()


def _answered(server: str) -> None:
    with _lock:
        state = _failing.pop(server, None)
    if state is not None and state.retry_at:
        log.info("memcached %s is back", server)


def _ensure_prober() -> None:
    global _prober
    if _prober is not None and _prober.is_alive():
        return
    with _lock:
        if _prober is None or not _prober.is_alive():
            _prober = threading.Thread(target=_probe_while_down, name="memcached-prober", daemon=True)
            _prober.start()


def _probe_while_down() -> None:
    """Tries each down server when due; ends once none is down."""
    global _prober
    while True:
        with _lock:
            down = {server: state.retry_at for server, state in _failing.items() if state.retry_at}
            if not down:
                _prober = None
                return
        config = get_config()
        due = [server for server, at in down.items() if at <= time.monotonic()]
        for server in due:
            if _answers(server, config["CONNECT_TIMEOUT"], config["TIMEOUT"]):
                _answered(server)
            else:
                with _lock:
                    state = _failing.get(server)
                    if state is not None and state.retry_at:
                        state.retry_at = time.monotonic() + config["RETRY_DOWN"]
        if not due:
            time.sleep(max(0.01, min(down.values()) - time.monotonic()))


def _answers(server: str, connect_timeout: float, timeout: float) -> bool:
    """Whether memcached at `server` answers a version request on a new
    connection. A refused connection counts as an answer: the host is
    there and a call would cost one round trip (memcached restarting)."""
    host, sep, port = server.rpartition(":")
    address: Any = (host.strip("[]"), int(port)) if sep and port.isdigit() else server
    client = Client(address, connect_timeout=connect_timeout, timeout=timeout)
    try:
        client.version()
    except ConnectionRefusedError:
        return True
    except (OSError, MemcacheError):
        return False
    finally:
        with contextlib.suppress(Exception):
            client.close()
    return True


def forget() -> None:
    """Every server is up again (settings changed, or a test starts afresh)."""
    with _lock:
        _failing.clear()


get_config.when_changed(forget)
