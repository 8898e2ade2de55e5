"""Ports for the servers the tests start: each pytest worker draws from a
band of its own, below the kernel's ephemeral range, and hands each port out
once.

A port from bind(0) is one the kernel may give again at once: to another
xdist worker's bind(0), or to any outgoing connection, which draw from the
same range. Between our check and the server's own bind, another worker's
server could take it; ours then fails to bind, and the readiness check is
answered by theirs (a memcached "paused" with SIGSTOP that never paused).
A port kept free on purpose, for "nothing listens here", could come alive
under a test. Bands keep the workers apart, and the ephemeral range keeps
every outgoing connection out of them.
"""

import os
import random
import socket
import threading
from pathlib import Path

LOWEST = 10000
BANDS = 16  # up to 15 xdist workers; the last band is for a process that is none
RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

_lock = threading.Lock()
_next: int | None = None


def _ephemeral_low() -> int:
    try:
        return int(RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def band() -> range:
    """This process's ports: its xdist worker's band ("gw2": the third)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) % (BANDS - 1) if worker[2:].isdigit() else BANDS - 1
    size = (_ephemeral_low() - LOWEST) // BANDS
    start = LOWEST + index * size
    return range(start, start + size)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on, not handed out before by this process."""
    global _next
    ports = band()
    if len(ports) < 100:  # an ephemeral range starting low: no room for bands
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    with _lock:
        if _next is None or _next not in ports:
            # A random start: a process this one starts, in the same band,
            # walks from elsewhere.
            _next = random.randrange(ports.start, ports.stop)
        for _ in range(len(ports)):
            port = _next
            _next = _next + 1 if _next + 1 < ports.stop else ports.start
            if _bindable(port):
                return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")
