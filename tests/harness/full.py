"""A memcached run with -M made full, and emptied again: filler items in
every slab class the farm's keys use, which the -M server then refuses to
store anything beside (it evicts nothing)."""

import contextlib
import math
import random
import time

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheServerError

PREFIX = "filler:"
# Sizes spread over the slab classes the farm's own keys use, so that deleting
# the filler frees room for those keys (memcached does not move a freed page
# to another class).
SIZES = (16, 64 * 1024)
BANDS = 24
BATCH = 20
# Batches of one band refused in a row before the next band is filled.
REFUSED_IN_A_ROW = 8


def _client(address: str) -> Client:
    host, port = address.rsplit(":", 1)
    return Client((host, int(port)), connect_timeout=1, timeout=5)


def fill(address: str, *, seed: int = 0, expire: int = 60, within: float = 20.0) -> list[str]:
    """Fill the -M memcached at `address` until it refuses every size band;
    returns the filler's keys (they expire after `expire` seconds anyway)."""
    rng = random.Random(seed)
    low, high = (math.log(size) for size in SIZES)
    bands = [math.exp(low + (high - low) * i / BANDS) for i in range(BANDS + 1)]
    client = _client(address)
    keys: list[str] = []
    deadline = time.monotonic() + within
    try:
        # Band by band, largest first, each until memcached refuses it. In
        # batches of one round trip: a batch refused stops at its first
        # refusal, and its keys are deleted with the rest.
        for top, bottom in zip(reversed(bands[1:]), reversed(bands[:-1]), strict=True):
            refused_in_a_row = 0
            while refused_in_a_row < REFUSED_IN_A_ROW and time.monotonic() < deadline:
                sizes = [int(rng.uniform(bottom, top)) for _ in range(BATCH)]
                batch = {f"{PREFIX}{seed}:{len(keys) + i}": b"f" * size for i, size in enumerate(sizes)}
                keys += batch
                try:
                    client.set_many(batch, expire=expire, noreply=False)
                    refused_in_a_row = 0
                except MemcacheServerError:
                    refused_in_a_row += 1
    finally:
        client.close()
    return keys


def empty(address: str, keys: list[str]) -> None:
    client = _client(address)
    try:
        for at in range(0, len(keys), 500):
            client.delete_many(keys[at : at + 500], noreply=False)
    finally:
        client.close()


def fill_sizes(address: str, sizes: range) -> list[str]:
    """Fill the slab classes of these value sizes only, one size after the
    other until memcached refuses it; returns the first key of each size
    (deleting those leaves room for one item in each class)."""
    client = _client(address)
    n, first_of_size = 0, []
    try:
        for size in sizes:
            first_of_size.append(f"{PREFIX}{n + 1}")
            with contextlib.suppress(MemcacheServerError):
                while True:
                    n += 1
                    client.set(f"{PREFIX}{n}", b"x" * size, noreply=False)
    finally:
        client.close()
    return first_of_size
