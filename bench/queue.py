"""The memcached queue beside Redis LPUSH/RPOP (redis-py), same machine, same run.

2 KB messages, one producer then one consumer, in this process. Dequeue on
our side is claim + ack (a reliable read, every message's MAC checked);
Redis's RPOP is a destructive pop. For a like-for-like figure the batch
dequeue is also set beside Redis's own reliable queue (LMOVE into a
processing list, then LREM as the ack, each a pipeline of the batch).
A phase lasts well under a second, so the two sides take turns for ROUNDS
rounds and each row is the median of its rounds.
"""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import timeit
from pathlib import Path

from bench.endpoint import ROUNDS
from tests.harness import processes

N = int(os.environ.get("BENCH_MESSAGES", "20000"))
BATCH = 100
BODY = b"x" * 2048
ORIGINAL = 300  # messages/s reported by the design this grew from


def _rate(fn) -> float:
    start = time.perf_counter()
    fn()
    return N / (time.perf_counter() - start)


def _redis(port: int) -> dict[str, float]:
    import redis

    r = redis.Redis(port=port)
    r.delete("bench", "bench-processing")
    out = {"enqueue 1x1": _rate(lambda: [r.lpush("bench", BODY) for _ in range(N)])}
    out["dequeue 1x1"] = _rate(lambda: [r.rpop("bench") for _ in range(N)])

    def push_batches() -> None:
        for _ in range(N // BATCH):
            r.lpush("bench", *([BODY] * BATCH))

    out["enqueue batch"] = _rate(push_batches)
    out["dequeue batch"] = _rate(lambda: [r.rpop("bench", BATCH) for _ in range(N // BATCH)])
    push_batches()

    def reliable_batches() -> None:
        for _ in range(N // BATCH):
            moves = r.pipeline(transaction=False)
            for _ in range(BATCH):
                moves.lmove("bench", "bench-processing", "RIGHT", "LEFT")
            acks = r.pipeline(transaction=False)
            for body in moves.execute():
                acks.lrem("bench-processing", -1, body)
            acks.execute()

    out["reliable batch"] = _rate(reliable_batches)
    r.close()
    return out


def _ours(round_: int) -> dict[str, float]:
    from webfarm.queues.queue import Queue

    # A producer and a consumer of their own per phase, as separate processes would have.
    one, batches = f"bench1-{round_}", f"bench2-{round_}"
    producer, consumer = Queue(one), Queue(one)
    out = {"enqueue 1x1": _rate(lambda: [producer.put(BODY) for _ in range(N)])}

    def one_by_one() -> None:
        for _ in range(N):
            consumer.ack(consumer.claim().receipt)

    out["dequeue 1x1"] = _rate(one_by_one)
    producer, consumer = Queue(batches), Queue(batches)

    def put_batches() -> None:
        for _ in range(N // BATCH):
            producer.put_many([BODY] * BATCH)

    def take_batches() -> None:
        for _ in range(N // BATCH):
            consumer.ack_many([m.receipt for m in consumer.claim_many(BATCH)])

    out["enqueue batch"] = _rate(put_batches)
    out["dequeue batch"] = _rate(take_batches)
    Queue(one).purge()
    Queue(batches).purge()
    return out


def _floor(address: str, round_: int) -> dict[str, float]:
    """What a message's claim + ack cannot cost less than, in µs: the same
    meta pipelines on a bare socket (no parsing beyond the CAS), decoding an
    entry with its MAC, making a receipt (timeit, in this process)."""
    from webfarm.queues import entries

    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    base = b"floor%d:" % round_

    def exchange(commands: list[bytes]) -> bytes:
        sock.sendall(b"".join(commands) + b"mn\r\n")
        buf = b""
        while not buf.endswith(b"MN\r\n"):  # the bodies are b"x"s: no false end
            buf += sock.recv(262144)
        return buf

    for start in range(0, N, BATCH):
        written = range(start, start + BATCH)
        exchange([b"ms %sm:%d %d q\r\n%s\r\n" % (base, i, len(BODY), BODY) for i in written])
    begin = time.perf_counter()
    for start in range(0, N, BATCH):
        indexes = range(start, start + BATCH)
        claimed = exchange(
            [b"mg %sm:%d v c\r\n" % (base, i) for i in indexes]
            + [b"ms %sc:%d 1 T30 ME q O%d\r\n1\r\n" % (base, i, i) for i in indexes]
        )
        versions = re.findall(rb"VA \d+ c(\d+)\r\n", claimed)
        acks = zip(indexes, versions, strict=True)
        exchange(
            [b"ms %sm:%d 1 C%s T60 q O%d\r\nA\r\n" % (base, i, v, i) for i, v in acks]
            + [b"delete %sc:%d noreply\r\n" % (base, i) for i in indexes]
        )
    wire = (time.perf_counter() - begin) / N * 1e6
    sock.close()
    raw = entries.encode("q:floor", BODY, gen="0" * 8, index=12345)
    decode, receipt = entries.decoder("q:floor"), entries.receipt_maker("q:floor", "0" * 8)
    per = 20_000
    return {
        "wire": wire,
        "decode": timeit.timeit(lambda: decode(raw, "0" * 8, 12345), number=per) / per * 1e6,
        "receipt": timeit.timeit(lambda: receipt(12345, 678901), number=per) / per * 1e6,
    }


def _medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {key: sorted(r[key] for r in rounds)[len(rounds) // 2] for key in rounds[0]}


def run() -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-queue-"))
    mc, address = processes.memcached(workdir, memory_mb=1024)
    port = processes.free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        processes.wait_for(
            lambda: socket.create_connection(("127.0.0.1", port), 0.2).close() or True,
            timeout=10,
            what="redis",
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")
        os.environ["MEMCACHED_SERVERS"] = address
        import django

        django.setup()
        ours, redis, floor = [], [], []
        for round_ in range(ROUNDS):
            ours.append(_ours(round_))
            redis.append(_redis(port))
            floor.append(_floor(address, round_))
        return _medians(ours), _medians(redis), _medians(floor)
    finally:
        redis_server.terminate()
        redis_server.wait(10)
        mc.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def report(results: tuple[dict[str, float], dict[str, float], dict[str, float]]) -> str:
    ours, redis, floor = results
    lines = [
        f"Queue: {N:,} messages of 2 KB, batches of {BATCH}; dequeue = claim + ack vs RPOP; "
        f"the median of {ROUNDS} interleaved rounds",
        f"{'':16} {'memcached':>11} {'redis':>11} {'ratio':>7} {'vs 300/s':>9}",
    ]
    redis_1x1 = redis["dequeue 1x1"]
    ours = {**ours, "reliable batch": ours["dequeue batch"]}  # ours is reliable: the same figure
    for key in ours:
        lines.append(
            f"{key:16} {ours[key]:9.0f}/s {redis[key]:9.0f}/s {ours[key] / redis[key]:7.2f} "
            f"{ours[key] / ORIGINAL:8.0f}x"
        )
    lines.append(
        f"batch dequeue vs Redis one-by-one RPOP: {ours['dequeue batch'] / redis_1x1:.1f}x; "
        f"vs our own one-by-one: {ours['dequeue batch'] / ours['dequeue 1x1']:.1f}x; "
        "reliable batch: ours (claim + ack) beside Redis's LMOVE + LREM"
    )
    ours_us, redis_us = 1e6 / ours["dequeue batch"], 1e6 / redis["dequeue batch"]
    least = floor["wire"] + floor["decode"] + floor["receipt"]
    lines.append(
        f"per message: ours {ours_us:.1f} us, Redis's batch RPOP {redis_us:.1f} us; the least a claim + ack "
        f"can cost: the wire {floor['wire']:.1f} (the same pipelines on a bare socket) + decode with MAC "
        f"{floor['decode']:.1f} + receipt {floor['receipt']:.1f} = {least:.1f} us, "
        f"so at best {redis_us / least:.2f}x Redis with no other Python at all"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(run()))
