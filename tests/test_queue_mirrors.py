"""Two memcached servers as mirrors: kill either one mid-run, repair the one
that comes back, and no accepted message is lost."""

import signal
from io import StringIO

import pytest
from django.core.management import call_command

from queues.core import Queue
from tests import processes


@pytest.fixture
def pair(tmp_path, settings):
    a, a_address = processes.memcached(tmp_path)
    b, b_address = processes.memcached(tmp_path)
    settings.QUEUES = {
        **settings.QUEUES,
        "MIRRORS": [a_address, b_address],
        "HOLE_WAIT": 0.2,
        "RECOVER_INTERVAL": 0.0,
    }
    servers = {"a": [a, a_address], "b": [b, b_address]}
    yield servers
    for process, _ in servers.values():
        process.stop()


def _drain(queue: Queue) -> list[bytes]:
    got: list[bytes] = []
    empty = 0
    while empty < 30:  # holes are waited on for HOLE_WAIT; keep polling a little
        messages = queue.claim_many(50)
        queue.ack_many([m.receipt for m in messages])
        got += [m.body for m in messages]
        empty = 0 if messages else empty + 1
        if not messages:
            import time

            time.sleep(0.02)
    return got


def test_killing_either_mirror_loses_nothing_and_repair_brings_it_back(pair, tmp_path):
    producer, consumer = Queue("mirrored"), Queue("mirrored")
    accepted = []
    for i in range(150):
        producer.put(f"m{i}".encode())
        accepted.append(f"m{i}".encode())
    # Half consumed before anything goes wrong.
    first = _drain_some(consumer, 50)

    pair["a"][0].stop(signal.SIGKILL)  # the sequencer dies mid-run
    for i in range(150, 250):
        producer.put(f"m{i}".encode())
        accepted.append(f"m{i}".encode())
    assert Queue("mirrored").stats()["in"] >= 100  # still working, on b

    # a comes back empty; until repaired it is neither read nor trusted.
    restarted, _ = processes.memcached(tmp_path, port=int(pair["a"][1].split(":")[1]))
    pair["a"][0] = restarted
    out = StringIO()
    call_command("repair_mirrors", stdout=out)
    assert "now in sync" in out.getvalue()

    pair["b"][0].stop(signal.SIGKILL)  # now the other one dies
    for i in range(250, 300):
        producer.put(f"m{i}".encode())
        accepted.append(f"m{i}".encode())
    rest = _drain(Queue("mirrored"))
    delivered = first + rest
    assert set(delivered) == set(accepted), sorted(set(accepted) - set(delivered))[:10]


def _drain_some(queue: Queue, n: int) -> list[bytes]:
    got = []
    while len(got) < n:
        messages = queue.claim_many(n - len(got))
        queue.ack_many([m.receipt for m in messages])
        got += [m.body for m in messages]
    return got
