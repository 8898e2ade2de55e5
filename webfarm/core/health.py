"""Which memcached servers this process has found unreachable.

A server whose host vanishes without a reset (its link down, a cable pulled)
costs every call a whole timeout: a web node that kept trying it on every
request would hold each request for seconds. So a server that failed
MEMCACHED["DOWN_AFTER"] times in a row is down for this process: calls to it
raise ServerDown at once, without touching the network. Every
MEMCACHED["RETRY_DOWN"] seconds one call (one at a time) tries it again, and
the first that gets an answer brings it back. Keys never move to another
server while one is down (webfarm.core.client.StableHashClient): callers see the
error they would have seen, only sooner.

Only a failure that cost time counts: a call that timed out, or a host
found unreachable. A refused or reset connection costs one round trip (the
host is there, memcached is not, or just restarted), so it is not held
against the server; nor is an answer, even an error such as out of memory.
"""

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

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
    # pool, gunicorn's workers) would wait on it forever.
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)

# Servers ("host:port") that failed lately; a healthy server is not in it,
# so a call to one costs one dict lookup.
_failing: dict[str, _Failing] = {}


def call(server: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """fn(*args, **kwargs), a call to `server`, unless the server is down;
    its connection failures are counted."""
    state = _failing.get(server)
    if state is not None and state.retry_at:
        _claim_retry(server, state)
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


def _claim_retry(server: str, state: _Failing) -> None:
    with _lock:
        now = time.monotonic()
        if now < state.retry_at:
            raise ServerDown(f"memcached {server} is down: it stopped answering just now")
        # This call is the one try: the others fail at once until it is over.
        state.retry_at = now + get_config()["RETRY_DOWN"]


def _failed(server: str) -> None:
    config = get_config()
    with _lock:
        state = _failing.setdefault(server, _Failing())
        state.failures += 1
        if state.failures >= config["DOWN_AFTER"]:
            if not state.retry_at:
                log.info("memcached %s is down after %d failed calls", server, state.failures)
            state.retry_at = time.monotonic() + config["RETRY_DOWN"]


def _answered(server: str) -> None:
    with _lock:
        state = _failing.pop(server, None)
    if state is not None and state.retry_at:
        log.info("memcached %s is back", server)


def forget() -> None:
    """Every server is up again (settings changed, or a test starts afresh)."""
    with _lock:
        _failing.clear()


get_config.when_changed(forget)
