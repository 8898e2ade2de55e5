"""Tasks written the way Django's Tasks API says (`@task`), for
tests/farm/test_django_tasks.py: the workers import them by path, from the
job's row, when they run one."""

import ctypes
import time

from webfarm.djangotasks.compat import task

# How long a waiting task waits at most (a test that forgets to cancel it).
MAX_WAIT = 60.0


@task(takes_context=True)
def count_to(context, n: int, label: str = "counted") -> dict:
    """Counts to n with a bar and metadata; returns what it counted."""
    context.progress.stage("counting", total=n)
    for i in range(1, n + 1):
        context.progress.update(i)
        context.metadata["counted"] = i
        context.save_metadata()
    return {label: n, "attempt": context.attempt}


@task(takes_context=True)
def wait_until_cancelled(context, beats: float = 0.05) -> None:
    """Beats with its metadata until it is cancelled (or MAX_WAIT is over)."""
    context.progress.stage("waiting")
    started = time.monotonic()
    context.metadata["beats"] = 0
    while time.monotonic() - started < MAX_WAIT:
        context.metadata["beats"] += 1
        context.save_metadata()  # raises JobCancelled once cancelled
        time.sleep(beats)


@task
def divide(a: int, b: int) -> float:
    return a / b


@task
async def add_later(a: int, b: int) -> int:
    return a + b


@task
def hold_the_gil(seconds: int) -> str:
    """Sleeps in a C call that keeps the GIL (ctypes.PyDLL does not let it
    go): no other thread of its process runs meanwhile, its heartbeat's
    neither, as in a long sort or a library's native code."""
    ctypes.PyDLL(None).sleep(seconds)
    return "held"
