"""Start many processes at the same instant, for races on a real memcached.

The test calls run_together(); each process (a `python -m` module) calls
at_start_line() once set up, and prints its answer.
"""

import os
import subprocess
import sys
import time

from tests.harness.processes import ROOT, wait_for


def run_together(module: str, *args: str, count: int, servers: str, namespace: str) -> list[str]:
    from webfarm.core.client import get_client

    client = get_client()
    client.set("test:ready", b"0")
    env = {**os.environ, "MEMCACHED_SERVERS": servers, "MEMCACHED_NAMESPACE": namespace}
    argv = [sys.executable, "-m", module, *args]
    children = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for _ in range(count)
    ]
    wait_for(lambda: int(client.get("test:ready")) == count, timeout=60, what="all at the start line")
    client.set("test:go", b"1")
    return [child.communicate(timeout=60)[0].strip() for child in children]


def at_start_line() -> None:
    """In the child: say ready, then wait for everyone's go."""
    from webfarm.core.client import get_client

    client = get_client()
    client.incr("test:ready", 1)
    while not client.get("test:go"):
        time.sleep(0.001)
