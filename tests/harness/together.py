"""Start many processes at the same instant, for races on a real memcached.

The test calls run_together(); each process (a `python -m` module) calls
at_start_line() once set up, and prints its answer. The start is a line
written to every process's stdin at once: the processes wait for it
blocked, not polling memcached, so the ones still starting up get the
machine's cores.
"""

import subprocess
import sys

from tests.harness.processes import ROOT, wait_for
from tests.harness.suites import library_env


def run_together(module: str, *args: str, count: int, servers: str, namespace: str) -> list[str]:
    from webfarm.core.client import get_client

    client = get_client()
    client.set("test:ready", b"0")
    env = library_env(servers, namespace)
    argv = [sys.executable, "-m", module, *args]
    children = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    wait_for(lambda: int(client.get("test:ready")) == count, timeout=60, what="all at the start line")
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    return [child.communicate(timeout=60)[0].strip() for child in children]


def at_start_line() -> None:
    """In the child: say ready, then wait for everyone's go."""
    from webfarm.core.client import get_client

    get_client().incr("test:ready", 1)
    sys.stdin.readline()
