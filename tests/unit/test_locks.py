"""A farm-wide lock (the site-log drainer's, the vote flusher's): held while
its holder renews it, freed within one lifetime when the holder is killed."""

import signal
import subprocess
import sys
import time

import pytest

from tests.harness.processes import ROOT, wait_for
from tests.harness.suites import library_env
from webfarm.core.locks import Busy, lock

# memcached counts lifetimes in whole seconds: a key stored for 3 s may lapse
# after 2, which is how long a holder starved by a loaded machine may go unrenewed.
TTL = 3
HOLDER = """
import sys, time, django
django.setup()
from webfarm.core.locks import lock
with lock("test:lock", int(sys.argv[1])) as renew:
    print("held", flush=True)
    while True:
        renew()
        time.sleep(0.2)
"""


def _try() -> bool:
    try:
        with lock("test:lock", TTL):
            return True
    except Busy:
        return False


def test_a_lock_is_held_while_renewed_and_freed_soon_after_its_holder_is_killed(
    settings, progress_on_real_memcached
):
    env = library_env(",".join(settings.MEMCACHED["SERVERS"]), progress_on_real_memcached)
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(TTL)], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout.readline().strip() == "held"
            # Past two of its lifetimes, the holder's renewals keep it.
            held_until = time.monotonic() + 2 * TTL + 1
            while time.monotonic() < held_until:
                assert not _try(), f"a renewed lock was taken (holder exit code: {holder.poll()})"
                time.sleep(0.25)
        finally:
            holder.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(_try, timeout=TTL + 5, what="the dead holder's lock to lapse")
    assert time.monotonic() - killed_at <= TTL + 1.5
    assert _try()  # released on leaving the block


def test_a_lock_is_released_when_the_block_raises():
    with pytest.raises(RuntimeError), lock("test:lock", 60):
        raise RuntimeError("the work failed")
    assert _try()
