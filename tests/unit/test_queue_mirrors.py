"""Two memcached servers as mirrors: kill either one mid-run, repair the one
that comes back, and no accepted message is lost."""

import os
import signal
from io import StringIO

import pytest
from django.core.management import call_command
from pymemcache.client.base import Client

from tests.harness import keyspace, processes
from tests.harness.processes import wait_for
from webfarm.core import health
from webfarm.queues.mirror import MEMBER, STALE, down_key, mirrored_client
from webfarm.queues.queue import Queue


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


def test_a_mirror_that_comes_back_without_a_restart_is_repaired_before_it_serves(pair, settings):
    """Paused (SIGSTOP), as a hung or cut-off server: it keeps its old data and
    its "in-sync" marker. It must not serve again, even once the server that
    flagged it dies, until a repair has brought it up to date."""
    settings.MEMCACHED = {**settings.MEMCACHED, "TIMEOUT": 0.5, "CONNECT_TIMEOUT": 0.5}
    settings.QUEUES = {**settings.QUEUES, "FINISHED_TTL": 900, "HOLE_TTL": 300}
    producer, consumer = Queue("paused"), Queue("paused")
    accepted = [f"m{i}".encode() for i in range(40)]
    producer.put_many(accepted[:20])
    delivered = _drain_some(consumer, 10)  # acked on both

    b, b_address = pair["b"]
    os.kill(b.proc.pid, signal.SIGSTOP)
    try:
        producer.put_many(accepted[20:40])  # b times out: flagged down on a
        delivered += _drain_some(consumer, 10)  # acked on a only
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    namespace = settings.MEMCACHED["NAMESPACE"]
    raw_b = Client(tuple_address(b_address), key_prefix=f"{namespace}:".encode())
    # Processes look again (each at most once a second): b answers, with old
    # data, and is marked out on its own account.
    try:
        wait_for(lambda: Queue("paused").stats() and raw_b.get(MEMBER) == STALE, timeout=10, what="b stale")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: {_seen(settings, pair)}") from exc

    out = StringIO()
    call_command("repair_mirrors", stdout=out)
    assert "now in sync" in out.getvalue()
    # Markers copied to b expire as on a; messages do not.
    for item in keyspace.items(b_address, f"{namespace}:q:paused:"):
        if ":m:" in item.key:
            value = raw_b.get(item.key.removeprefix(f"{namespace}:"))
            if value[:1] in (b"A", b"H"):
                # memcached's clock ticks by the second: allow its slack.
                assert 0 < item.ttl() <= 900 + keyspace.CLOCK_SLACK, (item, value)
            else:
                assert item.expires == -1, item

    pair["a"][0].stop(signal.SIGKILL)  # now only the repaired b is left
    rest = _drain(Queue("paused"))
    assert sorted(delivered + rest) == sorted(accepted)
    assert not set(delivered) & set(rest)  # the acked ones did not come back from b's old copy
    raw_b.close()


def _seen(settings, pair) -> str:
    """What the mirrors hold and what this process makes of them."""
    prefix = f"{settings.MEMCACHED['NAMESPACE']}:".encode()
    raw = {name: Client(tuple_address(address), key_prefix=prefix) for name, (_, address) in pair.items()}
    client = mirrored_client(settings.QUEUES["MIRRORS"])
    return (
        f"markers {[raw[name].get(MEMBER) for name in ('a', 'b')]}, "
        f"a flags b down: {raw['a'].get(down_key(1)) is not None}, "
        f"this process reads {client._readable} and writes {client._writable}, "
        f"down for it: {[health.is_down(server) for server in settings.QUEUES['MIRRORS']]}"
    )


def tuple_address(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)
