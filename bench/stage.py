"""What the benchmarks set up the same way: a scratch folder, a memcached of
their own, the bench site's environment, Django in this process, and wrk.

    with stage.in_process("bench-publish") as address:   # memcached + django.setup()
        ...
    with stage.farm("bench-endpoint") as (workdir, started, address):
        env = stage.site_env(address, DATABASE_URL=...)
"""

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.harness import processes

# Rounds of the throughput benchmarks, interleaved; the median is what a row costs.
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))


def need_wrk() -> None:
    if not shutil.which("wrk"):
        sys.exit("wrk is missing: `make bench` installs it")


@contextmanager
def in_process(prefix: str, **memcached: Any) -> Iterator[str]:
    """A memcached of the benchmark's own, and the demo site set up in this
    process on it; its address. Both go when the block ends."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    mc, address = processes.memcached(workdir, **memcached)
    try:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
        os.environ["MEMCACHED_SERVERS"] = address
        import django

        django.setup()
        yield address
    finally:
        mc.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def farm(prefix: str, **memcached: Any) -> Iterator[tuple[Path, list[processes.Process], str]]:
    """A scratch folder, the processes started in it (stopped when the block
    ends: append each) and a memcached of its own, already among them."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
    with processes.stopped_after(workdir) as started:
        mc, address = processes.memcached(workdir, **memcached)
        started.append(mc)
        yield workdir, started, address


def site_env(address: str, **variables: str) -> dict[str, str]:
    """The bench site's environment (bench/settings.py) on that memcached."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "MEMCACHED_SERVERS": address,
        "MEMCACHED_NAMESPACE": "bench",
        "DJANGO_SECRET_KEY": uuid.uuid4().hex,
        "LOG_LEVEL": "WARNING",
        **variables,
    }


def median(runs: list[dict[str, float]], by: str) -> dict[str, float]:
    """The run in the middle, by one figure."""
    return sorted(runs, key=lambda run: run[by])[len(runs) // 2]
