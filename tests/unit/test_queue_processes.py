"""The queue with real processes: many producers and consumers, a consumer
killed holding messages, and memcached full under -M."""

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter

from tests.harness import processes
from tests.harness.processes import ROOT, wait_for
from tests.harness.suites import library_env
from webfarm.core.client import server_client
from webfarm.queues.exceptions import QueueFull
from webfarm.queues.queue import Queue


def _env(memcached: str, namespace: str, visibility: int) -> dict:
    return library_env(memcached, namespace, QUEUES={"VISIBILITY_TIMEOUT": visibility})


def _worker(env: dict, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.harness.queue_worker", *args], cwd=ROOT, env=env, **kwargs
    )


def test_many_producers_and_consumers_deliver_every_message_exactly_once(
    memcached_server, progress_on_real_memcached, tmp_path
):
    env = _env(memcached_server, progress_on_real_memcached, visibility=60)
    producers, per_producer = 4, 6000
    consumers = [
        _worker(env, "consume", "--queue", "stress", "--out", str(tmp_path / f"c{n}.txt"), "--seed", str(n))
        for n in range(3)
    ]
    makers = [
        _worker(
            env,
            "produce",
            "--queue",
            "stress",
            "--first",
            str(n * per_producer),
            "--count",
            str(per_producer),
            "--seed",
            str(100 + n),
        )
        for n in range(producers)
    ]
    for maker in makers:
        assert maker.wait(timeout=240) == 0
    server_client("q:stress").set("test:stress:done", b"1")
    for consumer in consumers:
        assert consumer.wait(timeout=240) == 0

    delivered = Counter()
    for n in range(3):
        delivered.update(int(line) for line in (tmp_path / f"c{n}.txt").read_text().split())
    expected = set(range(producers * per_producer))
    assert set(delivered) == expected, f"missing {len(expected - set(delivered))}"
    assert [i for i, times in delivered.items() if times > 1] == []
    stats = Queue("stress").stats()
    assert stats["in"] == stats["out"] == stats["acked"] == len(expected)


def test_messages_held_by_a_killed_consumer_are_redelivered(
    memcached_server, progress_on_real_memcached, settings
):
    settings.QUEUES = {**settings.QUEUES, "RECOVER_INTERVAL": 0.0}
    queue = Queue("killed")
    queue.put_many([str(i).encode() for i in range(10)])
    env = _env(memcached_server, progress_on_real_memcached, visibility=2)
    holder = _worker(env, "hold", "--queue", "killed", "--count", "6", stdout=subprocess.PIPE, text=True)
    held = holder.stdout.readline().split()
    assert held == [str(i) for i in range(6)]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=10)
    holder.stdout.close()

    # The other four are there at once; the six come back once their claims expire.
    fresh = queue.claim_many(10)
    assert [m.body for m in fresh] == [str(i).encode() for i in range(6, 10)]
    back = []
    wait_for(
        lambda: back.extend(queue.claim_many(10)) or len(back) >= 6,
        timeout=15,
        interval=0.2,
        what="redelivery of the killed consumer's messages",
    )
    assert sorted(m.body for m in back) == sorted(h.encode() for h in held)
    assert all(m.redelivered for m in back)


def test_a_full_memcached_refuses_clearly_and_keeps_what_it_accepted(tmp_path, settings):
    process, address = processes.memcached(tmp_path, memory_mb=2, extra=["-M"])
    try:
        settings.MEMCACHED = {
            **settings.MEMCACHED,
            "SERVERS": [address],
            "NAMESPACE": "full" + uuid.uuid4().hex[:6],
        }
        queue = Queue("full")
        accepted: dict[int, bytes] = {}
        refused = 0
        for n in range(400):
            body = bytes([n % 251]) * 60_000
            try:
                accepted[queue.put(body)] = body
            except QueueFull as exc:
                refused += 1
                assert exc.stored == []
                if refused >= 3:
                    break
        assert accepted and refused == 3, (len(accepted), refused)
        assert queue.stats()["full"] >= 3
        # Every message that was accepted comes out whole.
        got = {}
        while message := queue.claim():
            got[message.index] = message.body
        assert got == accepted
    finally:
        process.stop()
