"""The memcached queue on a real memcached: order, batches, claims, holes,
resets, redelivery."""

import random
import re
import threading
import time

import pytest

from tests.harness import keyspace, processes
from tests.harness.hostile import HOSTILE
from tests.harness.processes import wait_for
from webfarm.core.client import server_client
from webfarm.queues.exceptions import InvalidQueueName, MessageTooLarge
from webfarm.queues.queue import Queue, thread_queue


@pytest.fixture
def fast(settings):
    settings.QUEUES = {**settings.QUEUES, "HOLE_WAIT": 0.2, "RECOVER_INTERVAL": 0.0, "VISIBILITY_TIMEOUT": 1}


def test_messages_come_out_in_order_once_and_ack_finishes_them():
    queue = Queue("orders")
    indexes = [queue.put(f"m{i}".encode()) for i in range(5)]
    assert indexes == [1, 2, 3, 4, 5]
    got = [queue.claim() for _ in range(5)]
    assert [m.body for m in got] == [f"m{i}".encode() for i in range(5)]
    assert not any(m.redelivered for m in got)
    assert queue.claim() is None
    queue.ack_many([m.receipt for m in got])
    stats = queue.stats()
    assert (stats["in"], stats["out"], stats["acked"], stats["ready"]) == (5, 5, 5, 0)


def test_batches_both_ways():
    queue = Queue("batch")
    bodies = [bytes([i % 256]) * 2048 for i in range(500)]
    assert queue.put_many(bodies) == list(range(1, 501))
    first = queue.claim_many(300)
    rest = queue.claim_many(300)
    assert [m.body for m in first + rest] == bodies
    assert queue.claim_many(10) == []


def test_queues_are_separate_and_names_are_checked():
    Queue("a").put(b"for a")
    assert Queue("b").claim() is None
    assert Queue("a").claim().body == b"for a"
    for bad in [*HOSTILE, "a" * 81, "-leading", "a:b", "a/b"]:
        if bad and bad[0].isalnum() and len(bad) <= 80 and all(c.isalnum() or c in "_.-" for c in bad):
            continue  # a few hostile strings are fine names ("null", "NaN")
        with pytest.raises(InvalidQueueName):
            Queue(bad)


def test_oversized_messages_are_refused_before_anything_is_written(settings):
    settings.QUEUES = {**settings.QUEUES, "MAX_MESSAGE_BYTES": 100}
    queue = Queue("small")
    with pytest.raises(MessageTooLarge):
        queue.put_many([b"ok", b"x" * 101])
    assert queue.stats()["tail"] == 0


def test_an_expired_claim_is_delivered_again_marked_redelivered(fast):
    queue = Queue("vis")
    queue.put(b"job")
    first = queue.claim()
    assert first.body == b"job" and not first.redelivered
    assert queue.claim() is None  # hidden while claimed
    again = wait_for(queue.claim, timeout=10, interval=0.1, what="redelivery")
    assert again.body == b"job" and again.redelivered and again.index == first.index
    queue.ack(again.receipt)
    assert queue.stats()["redelivered"] == 1
    # Once acked it never comes back, and the floor moves past it.
    assert wait_for(lambda: queue.claim() is None and queue.stats()["floor"] == 2, timeout=5, what="floor")


def test_reject_puts_it_back_at_the_tail(fast):
    queue = Queue("rej")
    queue.put_many([b"one", b"two"])
    one = queue.claim()
    assert queue.reject(one.receipt) == 3
    assert [m.body for m in queue.claim_many(5)] == [b"two", b"one"]


class _StallingClient:
    """A real client whose first message write waits for a signal, as a
    producer paused between taking an index and writing its entry."""

    def __init__(self, client, release: threading.Event) -> None:
        self._client = client
        self._release = release
        self.stalled = threading.Event()

    def __getattr__(self, name):
        return getattr(self._client, name)

    def _stall(self, commands) -> None:
        if not self.stalled.is_set() and any(b":m:" in c for c in commands):
            self.stalled.set()
            self._release.wait(10)

    def pipeline(self, commands, name):
        if name == b"add":
            self._stall(commands)
        return self._client.pipeline(commands, name)

    def meta(self, commands, **kwargs):
        if any(c.startswith(b"ms ") for c in commands):
            self._stall(commands)
        return self._client.meta(commands, **kwargs)


def test_an_index_taken_but_not_written_becomes_a_hole_and_nothing_is_lost(fast):
    consumer = Queue("holes")
    release = threading.Event()
    stalling = _StallingClient(server_client("q:holes"), release)
    slow = Queue("holes", client=stalling)
    result: list[int] = []
    producer = threading.Thread(target=lambda: result.append(slow.put(b"slow")))
    producer.start()
    assert stalling.stalled.wait(5)  # index 1 is taken, its entry not written
    consumer.put(b"fast")  # index 2

    # The consumer waits a moment on index 1, then skips it as a hole.
    got = wait_for(consumer.claim, timeout=5, what="the message after the hole")
    assert got.body == b"fast"
    wait_for(lambda: consumer.stats()["holes"] == 1 or consumer.claim(), timeout=5, what="hole marked")
    release.set()
    producer.join(5)
    # The stalled producer lost the race for index 1 and wrote at index 3 instead.
    assert result == [3]
    late = wait_for(consumer.claim, timeout=5, what="the late message")
    assert late.body == b"slow" and late.index == 3
    assert consumer.stats()["holes"] == 1
    # Two messages in: the put that lost index 1 took back what it counted ahead.
    wait_for(lambda: consumer.stats()["in"] == 2, timeout=5, what="two puts counted")


def test_indexes_a_busy_consumer_took_past_the_tail_are_never_skipped(settings):
    """A busy consumer takes a batch without looking and runs past the tail.
    Those indexes have no producer yet: they must not become holes the floor
    passes, or the message a producer later writes there (after a hole's
    lifetime) would sit below the floor, never delivered and never freed."""
    settings.QUEUES = {
        **settings.QUEUES,
        "HOLE_WAIT": 0.2,
        "RECOVER_INTERVAL": 0.0,
        "HOLE_TTL": 1,
    }
    consumer = Queue("overshoot")
    consumer.put_many([b"a", b"b", b"c"])
    first = consumer.claim_many(2)  # 3 waiting, 2 asked: the next take is blind
    rest = consumer.claim_many(2)  # takes indexes 3 and 4; 4 is past the tail
    consumer.ack_many([m.receipt for m in first + rest])
    assert [m.body for m in first + rest] == [b"a", b"b", b"c"]
    time.sleep(0.3)  # past HOLE_WAIT: a hole would be marked now
    assert consumer.claim_many(5) == [] and consumer.claim_many(5) == []
    assert consumer.stats()["holes"] == 0 and consumer.stats()["floor"] <= 4
    time.sleep(1.2)  # past HOLE_TTL: a hole marked at 4 would be gone by now
    assert Queue("overshoot").put(b"later") == 4
    # A consumer of its own (a periodic drainer lives for one call) gets it.
    late = wait_for(lambda: Queue("overshoot").claim_many(5), timeout=10, what="the later message")
    assert [m.body for m in late] == [b"later"]
    Queue("overshoot").ack_many([m.receipt for m in late])
    wait_for(
        lambda: Queue("overshoot").claim_many(5) == [] and Queue("overshoot").stats()["floor"] == 5,
        timeout=10,
        what="the floor past it",
    )


def test_lost_counters_start_a_new_generation_without_touching_old_entries():
    queue = Queue("reset")
    queue.put_many([b"old1", b"old2"])
    gen = queue.layout.generation()
    client = server_client("q:reset")
    old_entry = client.get(f"q:reset:{gen}:m:1")
    # Eviction or a flush takes the counters but not the entries.
    client.delete_many([f"q:reset:{gen}:tail", f"q:reset:{gen}:head"])
    assert queue.put(b"new") == 1  # index 1 again, in a new key space
    assert queue.layout.generation() != gen
    assert client.get(f"q:reset:{gen}:m:1") == old_entry
    assert Queue("reset").claim().body == b"new"
    assert queue.stats()["resets"] == 1


def test_a_producer_never_writes_into_a_generation_memcached_lost(settings):
    # A long HOLE_WAIT keeps the producer's reserved indexes usable after the flush.
    settings.QUEUES = {**settings.QUEUES, "HOLE_WAIT": 30.0, "RECOVER_INTERVAL": 0.0}
    producer, consumer = Queue("lost-gen"), Queue("lost-gen")
    for i in range(4):
        producer.producer._last_put = time.monotonic()  # putting fast: it reserves blocks
        producer.put(f"before{i}".encode())
    old_gen = producer.layout.generation()
    assert producer.producer._reserve and producer.producer._reserve_gen == old_gen
    server_client("q:lost-gen").flush_all(noreply=False)  # what a restart does to the keys
    producer.producer._last_put = time.monotonic()
    producer.put_many([b"after1", b"after2"])
    assert producer.layout.generation() != old_gen
    got = consumer.claim_many(10)
    assert [m.body for m in got] == [b"after1", b"after2"]
    client = server_client("q:lost-gen")
    assert not client.get_many([f"q:lost-gen:{old_gen}:m:{i}" for i in range(1, 40)])
    assert client.get(f"q:lost-gen:{old_gen}:tail") is None  # the check created nothing


def test_purge_empties_the_queue():
    queue = Queue("purge")
    queue.put_many([b"x"] * 50)
    assert queue.purge() >= 50
    assert queue.claim() is None and queue.stats()["ready"] == 0
    queue.put(b"after")
    assert queue.claim().body == b"after"


def test_prefetched_messages_past_half_their_visibility_are_not_handed_out(settings):
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 2, "RECOVER_INTERVAL": 0.0, "PREFETCH": 4}
    queue = Queue("prefetch")
    queue.put_many([b"a", b"b", b"c"])
    first = queue.claim()  # b and c wait in this consumer's buffer
    assert first.body == b"a"
    queue.ack(first.receipt)
    # Age the buffer past half the visibility timeout.
    queue.consumer._buffer = type(queue.consumer._buffer)((t - 1.5, m) for t, m in queue.consumer._buffer)
    other = Queue("prefetch")
    back = wait_for(lambda: other.claim_many(5), timeout=10, interval=0.1, what="expired claims")
    assert sorted(m.body for m in back) == [b"b", b"c"] and all(m.redelivered for m in back)
    assert queue.claim() is None  # the stale ones were dropped, not handed out twice


def test_release_gives_prefetched_messages_back_at_once(settings):
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 60, "RECOVER_INTERVAL": 0.0, "PREFETCH": 4}
    queue = Queue("release")
    queue.put_many([b"a", b"b"])
    assert queue.claim().body == b"a"
    queue.release()
    other = Queue("release")
    got = wait_for(lambda: other.claim_many(5), timeout=5, interval=0.05, what="released message")
    assert [m.body for m in got] == [b"b"]


def test_a_fast_producer_reserves_index_blocks_and_leftovers_are_only_holes(fast):
    producer, consumer = Queue("burst"), Queue("burst")
    # memcached counts a 1 s lifetime from its own clock tick: a claim may lapse
    # at once, and the wait below would see the messages again.
    consumer.visibility_timeout = 30
    for i in range(40):
        producer.producer._last_put = time.monotonic()  # as if the previous put were a moment ago
        producer.put(f"{i}".encode())
    stats = producer.stats()
    assert stats["in"] == 40 and stats["tail"] > 40  # indexes were taken in blocks
    got: list[bytes] = []
    wait_for(
        lambda: (
            got.extend(m.body for m in consumer.claim_many(50))
            or consumer.stats()["holes"] == stats["tail"] - 40
        ),
        timeout=10,
        interval=0.05,
        what="leftover reservations marked as holes",
    )
    assert got == [f"{i}".encode() for i in range(40)]
    # A producer putting slowly takes one index at a time.
    slow = Queue("slow")
    for _ in range(5):
        slow.producer._last_put = time.monotonic() - 1
        slow.put(b"x")
    assert slow.stats()["tail"] == 5


def test_interleaved_producers_and_consumers_deliver_everything_once(fast, settings):
    # Every claim is acknowledged at once: a claim lapsing while a loaded
    # machine holds this process back is a redelivery, not what is tested here.
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 60}
    rng = random.Random(11)
    producers = [Queue("mixed") for _ in range(2)]
    consumers = [Queue("mixed") for _ in range(2)]
    sent, seen = 0, []
    for _ in range(3000):
        if rng.random() < 0.5:
            batch = [str(sent + n).encode() for n in range(rng.choice([1, 1, 3, 20]))]
            rng.choice(producers).put_many(batch)
            sent += len(batch)
        else:
            consumer = rng.choice(consumers)
            messages = (
                consumer.claim_many(rng.choice([1, 4, 16]))
                if rng.random() < 0.5
                else [m for m in [consumer.claim()] if m]
            )
            seen.extend(int(m.body) for m in messages)
            consumer.ack_many([m.receipt for m in messages])

    def drained() -> bool:
        for consumer in consumers:
            messages = consumer.claim_many(100)
            seen.extend(int(m.body) for m in messages)
            consumer.ack_many([m.receipt for m in messages])
        return len(seen) >= sent

    wait_for(drained, timeout=20, interval=0.05, what="the queue to drain")
    assert sorted(seen) == list(range(sent))


def test_what_a_vanished_consumer_took_is_recovered_by_new_short_lived_ones(fast):
    gone = Queue("short")
    gone.consumer._busy = True  # as on a busy queue: take indexes without looking first
    assert gone.claim_many(5) == []  # indexes 1-5 taken, nothing there yet; then it goes away
    del gone
    Queue("short").put(b"late")  # lands at index 1, which the vanished consumer had taken
    # Every attempt is a brand-new consumer (like a periodic drain task).
    got = wait_for(lambda: Queue("short").claim_many(5), timeout=10, interval=0.1, what="the late message")
    assert [m.body for m in got] == [b"late"]
    Queue("short").ack_many([m.receipt for m in got])
    # 2-5 have no producer yet: not holes; the floor waits at 2 for the next one.
    wait_for(
        lambda: Queue("short").claim_many(5) == [] and Queue("short").stats()["floor"] == 2,
        timeout=10,
        interval=0.1,
        what="the floor at 2",
    )
    assert Queue("short").put(b"next") == 2
    got = wait_for(lambda: Queue("short").claim_many(5), timeout=10, interval=0.1, what="the next message")
    assert [m.body for m in got] == [b"next"] and Queue("short").stats()["holes"] == 0


def test_a_thread_keeps_its_producer_until_the_settings_change(settings):
    first = thread_queue("kept")
    first.put(b"one")
    assert thread_queue("kept") is first and thread_queue("other") is not first
    elsewhere: list[Queue] = []
    thread = threading.Thread(target=lambda: elsewhere.append(thread_queue("kept")))
    thread.start()
    thread.join()
    assert elsewhere[0] is not first  # a Queue is not shared between threads
    settings.QUEUES = {**settings.QUEUES, "HOLE_WAIT": 0.5}
    assert thread_queue("kept") is not first and thread_queue("kept").layout.hole_wait == 0.5
    assert Queue("kept").claim().body == b"one"


def test_a_drained_queue_keeps_only_its_counters(fast, memcached_server, progress_on_real_memcached):
    queue = Queue("drained")
    queue.visibility_timeout = 30  # claims outlive the test's reads by far
    queue.put_many([b"x" * 100] * 500)
    prefix = f"{progress_on_real_memcached}:q:drained:"
    claimed = queue.claim_many(100)
    claims = [item for item in keyspace.items(memcached_server, prefix) if ":c:" in item.key]
    limit = queue.visibility_timeout + keyspace.CLOCK_SLACK
    assert len(claims) == 100 and all(0 < item.ttl() <= limit for item in claims)
    queue.ack_many([m.receipt for m in claimed])
    markers = [item for item in keyspace.items(memcached_server, prefix) if ":m:" in item.key]
    acked = [item for item in markers if item.expires > 0]
    # Acked: a marker that expires (FINISHED_TTL) in place of a message that does not; claims gone.
    finished = queue.layout.finished_ttl + keyspace.CLOCK_SLACK
    assert len(acked) == 100 and all(item.ttl() <= finished for item in acked)
    assert not [item for item in keyspace.items(memcached_server, prefix) if ":c:" in item.key]
    while messages := queue.claim_many(100):
        queue.ack_many([m.receipt for m in messages])
    # The next pass moves the floor past them all and deletes what it passed.
    wait_for(lambda: queue.claim_many(1) == [] and queue.stats()["floor"] == 501, timeout=5, what="floor")
    left = sorted(item.key.removeprefix(prefix) for item in keyspace.items(memcached_server, prefix))
    assert not [key for key in left if ":m:" in key or ":c:" in key], left
    assert all(
        item.expires > 0 for item in keyspace.items(memcached_server, prefix) if item.key.endswith(":scan")
    )


def test_holes_expire_and_a_late_producer_still_loses_its_race(
    fast, memcached_server, progress_on_real_memcached
):
    queue = Queue("holey")
    for i in range(20):
        queue.producer._last_put = (
            time.monotonic()
        )  # putting fast: indexes reserved in blocks, leftovers become holes
        queue.put(f"{i}".encode())
    consumer = Queue("holey")
    got: list[bytes] = []

    def take() -> bool:
        messages = consumer.claim_many(50)
        consumer.ack_many([m.receipt for m in messages])
        got.extend(m.body for m in messages)
        return len(got) == 20 and consumer.stats()["holes"] > 0

    wait_for(take, timeout=10, interval=0.05, what="holes")
    assert got == [f"{i}".encode() for i in range(20)]
    prefix, namespace = f"{progress_on_real_memcached}:q:holey:", f"{progress_on_real_memcached}:"
    client = server_client("q:holey")
    entries = [item for item in keyspace.items(memcached_server, prefix) if ":m:" in item.key]
    holes = [item for item in entries if client.get(item.key.removeprefix(namespace)) == b"H"]
    assert len(holes) == consumer.stats()["holes"] > 0
    assert all(0 < item.ttl() <= queue.layout.hole_ttl + keyspace.CLOCK_SLACK for item in holes)
    # An index marked a hole stays one until it expires: a slow producer must not write there.
    gen = consumer.layout.generation()
    hole_index = int(holes[0].key.rsplit(":", 1)[1])
    assert not client.add(f"q:holey:{gen}:m:{hole_index}", b"late", noreply=False)


def test_one_recovery_scan_marks_a_whole_run_of_abandoned_indexes(fast):
    """Producers that took indexes and died, taken by a consumer that died
    too: one scan marks every empty index a hole, not one per scan, or holes
    expiring as fast as they are marked would hold the floor forever."""
    gone = Queue("run")
    gen = gone.layout.generation()
    gone.client.incr(gone.layout.key(gen, "tail"), 10)  # ten producers took an index and vanished
    assert gone.claim_many(10) == []  # a consumer took them all, found nothing, vanished
    gone.put(b"after the run")
    consumer = Queue("run")
    got = consumer.claim_many(1)
    assert [m.body for m in got] == [b"after the run"]
    consumer.ack_many([m.receipt for m in got])
    # Each claim of one may scan; the first scan past the horizon marks them all.
    wait_for(lambda: consumer.claim_many(1) == [] and consumer.stats()["holes"] > 0, timeout=5, what="holes")
    assert consumer.stats()["holes"] == 10

    def past_the_run() -> bool:
        return consumer.claim_many(1) == [] and consumer.stats()["floor"] == 12

    wait_for(past_the_run, timeout=5, what="the floor past the run")


def test_every_claim_past_the_horizon_redelivers_not_one_per_hole_wait(settings):
    """A worker died holding ten claims. A consumer that claims one at a time
    (the broker's, kombu prefetching for it) gets one on every claim once
    the horizon is past them: the pass that renews the horizon leaves the
    next ones one to judge by. (With one sighting kept, only the pass that
    found it aged redelivered: one message per HOLE_WAIT, farm-wide.)"""
    settings.QUEUES = {**settings.QUEUES, "HOLE_WAIT": 3.0, "RECOVER_INTERVAL": 0.0, "VISIBILITY_TIMEOUT": 1}
    Queue("abandoned").put_many([b"%d" % i for i in range(10)])
    assert len(Queue("abandoned").claim_many(10)) == 10  # then its worker died
    # The consumer's own claims outlast its ten claims, however slowly a loaded
    # machine runs them: one of its claims lapsing would deliver a message twice.
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 60}
    consumer = Queue("abandoned")
    consumer.prefetch = 1
    first = wait_for(consumer.claim, timeout=15, interval=0.05, what="the first redelivery")
    rest = [consumer.claim() for _ in range(9)]  # well within HOLE_WAIT
    assert all(m is not None and m.redelivered for m in [first, *rest]), rest
    assert sorted(m.body for m in [first, *rest]) == sorted(b"%d" % i for i in range(10))


def test_a_planted_horizon_is_refused_and_recovery_goes_on(fast, settings):
    """A scan key planted with a time to come (or not a number) would never
    age: it is refused and replaced, and what lost its claim is delivered."""
    queue = Queue("planted-scan")
    queue.put(b"lost claim")
    assert queue.claim() is not None  # its consumer died
    gen = queue.layout.generation()
    for planted in (b"99:9999999999.000", b"99:nan", b"x:y"):
        queue.client.set(queue.layout.key(gen, "scan"), planted)
        again = wait_for(Queue("planted-scan").claim, timeout=10, interval=0.05, what="the redelivery")
        assert again.body == b"lost claim" and again.redelivered, planted
        Queue("planted-scan").release([again])


def test_indexes_taken_when_their_claims_failed_come_at_the_next_claim(fast, monkeypatch):
    """memcached full (-M) between the two trips of a claim: the head moved,
    the claims were not written. The indexes stay the consumer's; its next
    claim takes them, not a recovery scan after the horizon passes them."""
    from pymemcache.exceptions import MemcacheServerError

    from webfarm.queues.exceptions import QueueFull

    Queue("burnt").put_many([b"a", b"b"])
    queue = Queue("burnt")
    consumer = queue.consumer
    deliver = consumer._deliver_claimed if queue.layout.speaks_meta else consumer._deliver

    def full_once(*args, **kwargs):
        monkeypatch.undo()
        raise MemcacheServerError(b"out of memory storing object")

    monkeypatch.setattr(consumer, deliver.__name__, full_once)
    with pytest.raises(QueueFull):
        queue.claim_many(2)
    assert queue.stats()["head"] == 2  # taken, not delivered
    assert [m.body for m in queue.claim_many(2)] == [b"a", b"b"]


@pytest.mark.parametrize("first", ["late", "early"])
@pytest.mark.parametrize("damage", ["evicted", "overwritten", "replaced"])
def test_everyone_follows_when_the_generation_key_changes_under_them(fast, damage, first):
    # Processes keep the generation they read; one that starts later reads the key. The key
    # evicted alone, overwritten by another writer, or moved on to another generation: what
    # producers old and new put, and what the old generation held, all reach a consumer that
    # was there before.
    consumer, early = Queue("moved"), Queue("moved")
    early.put(b"old")
    gen = consumer.layout.generation()
    client = server_client("q:moved")
    if damage == "evicted":
        client.delete("q:moved:gen")
    elif damage == "overwritten":
        client.set("q:moved:gen", b"\x80\x04not a generation")
    else:
        client.set("q:moved:gen", b"0badc0de")
    late = Queue("moved")
    for putter in (late, early) if first == "late" else (early, late):
        putter.put(b"from the late producer" if putter is late else b"from the early producer")
    if first == "early" and damage != "replaced":
        # The first to see the key gone or planted while its generation lives puts it back.
        assert client.get("q:moved:gen") == gen.encode()
    got = []

    def take() -> bool:
        messages = consumer.claim_many(10)
        consumer.ack_many([m.receipt for m in messages])
        got.extend(m.body for m in messages)
        return len(got) >= 3

    wait_for(take, timeout=10, what="every message, old and new")
    assert sorted(got) == sorted([b"old", b"from the late producer", b"from the early producer"])
    # Nothing twice: a few rounds of recovery scans over both generations bring nothing more.
    deadline = time.monotonic() + 5 * 0.2
    while time.monotonic() < deadline:
        assert consumer.claim_many(10) == []
    assert consumer.stats()["in"] == 3
    if client.get("q:moved:gen") != gen.encode():  # moved on: the old generation, finished, is gone
        assert client.get_many([f"q:moved:{gen}:{k}" for k in ("tail", "head", "floor")]) == {}


def test_acks_hold_when_memcached_moves_entries_to_another_page(settings, tmp_path):
    # memcached gives an item a new CAS when it moves the item's slab page (its automover does,
    # on its own, as the sizes of what a farm stores change). A receipt names the CAS it was
    # delivered at: the ack, reject and bury of that same delivery must still hold.
    process, address = processes.memcached(tmp_path)
    try:
        settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [address]}
        queue = Queue("paged")
        queue.put_many([b"p" * 20_000] * 3)  # first in their slab class's first page
        acked, rejected, buried = queue.claim_many(3)
        # memcached moves a page of a class that has another; what the page holds goes into
        # free chunks of the class elsewhere.
        fillers = {f"filler:{i}": b"f" * 20_000 for i in range(60)}
        queue.client.set_many(fillers)
        queue.client.delete_many(list(fillers))
        slab = _slab_of(address, 20_000)
        keys = [queue.layout.key(m.generation, "m", m.index) for m in (acked, rejected, buried)]
        before = queue.client.gets_many(keys)
        assert keyspace.command(address, b"slabs reassign %d 0\r\n" % slab, b"\r\n") == b"OK\r\n"

        def moved() -> bool:
            now = queue.client.gets_many(keys)
            assert [now[k][0] for k in keys] == [before[k][0] for k in keys]  # moved, not evicted
            return all(now[k][1] != before[k][1] for k in keys)

        wait_for(moved, timeout=10, what="memcached moved the page")
        queue.ack(acked.receipt)
        assert queue.reject(rejected.receipt) is not None
        queue.bury(buried, "cannot process it")
        stats = queue.stats()
        assert (stats["acked"], stats["dead_letters"]) == (1, 1)
        assert [m.body[:1] for m in queue.claim_many(3)] == [b"p"]  # the rejected one, once
    finally:
        process.stop()


def _slab_of(address: str, size: int) -> int:
    """The slab class that holds the items of about `size` bytes."""
    reply = keyspace.command(address, b"stats slabs\r\n", b"END\r\n").decode()
    sizes = {int(m[1]): int(m[2]) for m in re.finditer(r"STAT (\d+):chunk_size (\d+)", reply)}
    used = {int(m[1]) for m in re.finditer(r"STAT (\d+):used_chunks [1-9]", reply)}
    return min(c for c in used if sizes[c] >= size)
