"""The pool a process uses (webfarm/core/pool.py): the newest PoolChange row
says it, every process follows the row without a restart, says where it
stands, and stops using memcached when it cannot tell. On a real database
and real memcached servers; the follower reads on a connection of its own,
so the rows are committed (transaction=True)."""

import io
import json
import os
import threading
import time
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import OperationalError, connection
from django.test import Client

from tests.harness import keyspace, processes
from webfarm.core import pool
from webfarm.core.client import MetaBatch, build_client, get_client, leftover_ring, server_of
from webfarm.core.client.changing import ChangingRing, Phase, tombstone
from webfarm.core.client.ring import StableHashClient
from webfarm.core.conf import get_config
from webfarm.core.models import PoolChange, PoolMember
from webfarm.progress import services, store
from webfarm.queues.queue import Queue

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def following(settings, three_memcached):
    settings.MEMCACHED = {
        **settings.MEMCACHED,
        "SERVERS": three_memcached[:2],
        "NAMESPACE": f"pp{uuid.uuid4().hex[:8]}",
        "POOL_FOLLOW": True,
        "POOL_REFRESH": 0.1,
    }
    yield three_memcached
    # Its thread ends before the test's database is emptied (SQLite locks
    # the table a reader is on).
    settings.MEMCACHED = {**settings.MEMCACHED, "POOL_FOLLOW": False}
    pool.stop()


def _servers(ring: StableHashClient) -> list[str]:
    return sorted(ring.hasher.nodes)


def test_without_a_change_a_process_uses_the_settings_list(following):
    ring = get_client()
    assert isinstance(ring, StableHashClient)
    assert _servers(ring) == sorted(following[:2])
    assert pool.current_plan() == pool.Plan(tuple(following[:2]))


def test_a_process_follows_each_stage_of_a_change_without_a_restart(following):
    old, new = ",".join(following[:2]), ",".join(following)
    get_client().set("before", b"kept")
    change = PoolChange.objects.create(old=old, new=new, stage=pool.Stage.FOLLOW)
    pool.refresh()
    ring = get_client()
    assert isinstance(ring, ChangingRing) and ring.phase is Phase.FOLLOW
    assert (_servers(ring.old), _servers(ring.new)) == (sorted(following[:2]), sorted(following))
    assert ring.get("before") == b"kept"

    PoolChange.objects.filter(pk=change.pk).update(stage=pool.Stage.LEAD)
    pool.refresh()
    assert get_client().phase is Phase.LEAD
    assert get_client().get("before") == b"kept"

    PoolChange.objects.filter(pk=change.pk).update(stage=pool.Stage.NEW)
    pool.refresh()
    ring = get_client()
    assert isinstance(ring, StableHashClient) and _servers(ring) == sorted(following)
    assert pool.current_plan() == pool.Plan(tuple(following), tuple(following[:2]), pool.Stage.NEW, change.pk)
    assert pool.current_plan().leftovers == tuple(following[:2])
    assert leftover_ring() is not None and _servers(leftover_ring()) == sorted(following[:2])

    PoolChange.objects.filter(pk=change.pk).update(stage=pool.Stage.DONE)
    pool.refresh()
    assert pool.current_plan() == pool.Plan(tuple(following), (), pool.Stage.DONE, change.pk)
    assert leftover_ring() is None


def test_the_follower_finds_a_change_by_itself_within_its_refresh(following):
    get_client()
    PoolChange.objects.create(old=",".join(following[:2]), new=",".join(following), stage=pool.Stage.FOLLOW)
    processes.wait_for(
        lambda: isinstance(get_client(), ChangingRing), timeout=5, what="the process to follow the change"
    )


def test_each_process_says_which_stage_it_has_read(following):
    change = PoolChange.objects.create(
        old=",".join(following[:2]), new=",".join(following), stage=pool.Stage.LEAD
    )
    pool.refresh()
    member = PoolMember.objects.get(name=pool.member_name())
    assert (member.change, member.stage) == (change.pk, "lead")
    # A forked child is a member of its own, under its own name, with a
    # follower of its own (the parent's thread is not forked). The unit
    # tests' database is in memory: the child reads its own copy.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            pool.refresh()
            said = dict(PoolMember.objects.values_list("name", "stage")).get(pool.member_name())
            os.write(write, f"{pool.member_name()} {said}".encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 200).decode()
    os.waitpid(pid, 0)
    assert child == f"{pool.member_name().rsplit(':', 1)[0]}:{pid} lead"


def test_a_process_that_cannot_read_the_pool_stops_using_memcached(following, settings, monkeypatch):
    settings.MEMCACHED = {**settings.MEMCACHED, "POOL_STALE": 0.5}
    get_client().set("k", b"v")

    def away() -> pool.Plan:
        raise OperationalError("the database is away")

    monkeypatch.setattr(pool, "read_plan", away)
    deadline = time.monotonic() + 10
    while True:  # the plan known is used for POOL_STALE seconds, then refused
        try:
            get_client().get("k")
        except pool.PoolUnknown as exc:
            assert "has not been read" in str(exc)
            break
        assert time.monotonic() < deadline, "a process used a pool it could not read for 10 s"
        time.sleep(0.05)
    monkeypatch.undo()
    processes.wait_for(lambda: _answers(), timeout=5, what="memcached again once the pool is read")


def _answers() -> bool:
    try:
        return get_client().get("k") == b"v"
    except pool.PoolUnknown:
        return False


def test_many_threads_asking_at_once_wait_for_one_read(following):
    pool.forget()
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(pool.current_plan())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [pool.Plan(tuple(following[:2]))] * 8


def _stage(change: PoolChange, stage: pool.Stage) -> None:
    PoolChange.objects.filter(pk=change.pk).update(stage=stage)
    pool.refresh()


@pytest.fixture
def on_old(following):
    """A ring over the old list (the first two servers), closed afterwards."""
    ring = build_client(following[:2], get_client_namespace())
    yield ring
    ring.close()


def test_a_queue_that_moved_is_drained_on_its_old_server_before_its_new_one(following, on_old):
    old, new = following[:2], following
    name = _moving_queue("moving", old, new)
    change = PoolChange.objects.create(old=",".join(old), new=",".join(new), stage=pool.Stage.FOLLOW)
    pool.refresh()
    Queue(name).put_many([b"put while following", b"a second"])
    _stage(change, pool.Stage.LEAD)
    Queue(name).put(b"put while leading")  # a queue stays on its old server until NEW
    _stage(change, pool.Stage.NEW)
    queue = Queue(name)
    queue.put(b"put at NEW")  # on its new server
    assert Queue(name, ring=on_old).stats()["ready"] == 3

    claimed = queue.claim_many(2)
    assert [m.body for m in claimed] == [b"put while following", b"a second"]  # the old server's first
    rest = [queue.claim(), queue.claim()]
    assert [m.body for m in rest] == [b"put while leading", b"put at NEW"]
    # A receipt goes back to the queue that issued it, whoever holds it
    # (another process's Queue: the HTTP front acks on any node).
    assert Queue(name).ack_many([m.receipt for m in claimed]) == []
    for message in rest:
        Queue(name).ack(message.receipt)
    assert queue.claim() is None
    assert Queue(name, ring=on_old).holds_nothing()
    assert Queue(name).holds_nothing()


def test_looking_for_a_queues_leftovers_starts_no_queue_on_the_old_server(following, on_old):
    old, new = following[:2], following
    name = _moving_queue("fresh", old, new)
    PoolChange.objects.create(old=",".join(old), new=",".join(new), stage=pool.Stage.NEW)
    pool.refresh()
    queue = Queue(name)
    queue.put(b"only on the new server")
    message = queue.claim()
    assert message is not None and message.body == b"only on the new server"
    queue.ack(message.receipt)
    assert not Queue(name, ring=on_old).exists()


def get_client_namespace() -> str:
    return get_config()["NAMESPACE"]


def _moving_queue(prefix: str, old: list[str], new: list[str]) -> str:
    """A queue name whose server is not the same on the two lists."""
    before, after = build_client(old, "x"), build_client(new, "x")
    moves = (f"{prefix}{i}" for i in range(200))
    return next(name for name in moves if server_of(f"q:{name}", before) != server_of(f"q:{name}", after))


def test_a_reader_in_another_thread_never_fails_a_stage_write():
    """The follower reads the table in a thread of its own while the command
    writes it: the write waits for nothing and fails for nothing, as in the
    site's WAL file (in the tests' in-memory database an open read used to
    fail the write at once, tests/harness/farm_settings.py)."""
    change = PoolChange.objects.create(old="a:1", new="a:1,b:2", stage=pool.Stage.FOLLOW)
    PoolChange.objects.create(old="a:1,b:2", new="a:1", stage=pool.Stage.FOLLOW)
    reading, written = threading.Event(), threading.Event()

    def read() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT id FROM webfarm_core_poolchange ORDER BY id")
                cursor.fetchone()  # the statement stays open, its table read
                reading.set()
                written.wait(10)
        finally:
            connection.close()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert reading.wait(10)
        PoolChange.objects.filter(pk=change.pk).update(stage=pool.Stage.LEAD)
    finally:
        written.set()
        reader.join(10)
    change.refresh_from_db()
    assert change.stage == pool.Stage.LEAD


def test_the_command_grows_the_pool_and_shrinks_it_back_losing_nothing(following, settings):
    """memcached_pool --to, 2 -> 3 -> 2 servers, with this process as the
    farm (a member that follows each stage) and a consumer at work: values,
    counts and queued messages all come through, and the server removed at
    the end holds nothing of the farm's."""
    # One member, reading every 0.1 s: a stage lasts 1.5 s.
    settings.MEMCACHED = {**settings.MEMCACHED, "POOL_STALE": 0.5}
    two, three = following[:2], following
    name = _moving_queue("work", two, three)
    ring = get_client()
    keys = [f"rec:{i}" for i in range(60)]
    for key in keys:
        ring.set(key, key.encode(), expire=300)
    batch = MetaBatch()
    for i in range(20):
        batch.arithmetic(f"count:{i}", vivify=300, initial=5, value=True)
    batch.run()
    Queue(name).put_many([f"m{i}".encode() for i in range(30)])

    got: list[bytes] = []
    stop = threading.Event()

    def consume() -> None:
        queue = Queue(name)
        while not stop.is_set():
            message = queue.claim()
            if message is None:
                time.sleep(0.02)
                continue
            got.append(message.body)
            queue.ack(message.receipt)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    try:
        for servers in (three, two):
            out = io.StringIO()
            call_command("memcached_pool", "--to", ",".join(servers), "--wait", "60", stdout=out)
            assert "done: the farm uses" in out.getvalue(), out.getvalue()
            Queue(name).put(f"after {len(servers)}".encode())
            ring = get_client()
            assert isinstance(ring, StableHashClient) and _servers(ring) == sorted(servers)
            assert {key: ring.get(key) for key in keys} == {key: key.encode() for key in keys}
            bump = MetaBatch()
            for i in range(20):
                bump.arithmetic(f"count:{i}", value=True)
            assert [reply.number() for reply in bump.run()] == [6 if len(servers) == 3 else 7] * 20
        processes.wait_for(lambda: len(got) == 32, timeout=10, what="every message")
    finally:
        stop.set()
        consumer.join(5)
    assert sorted(got) == sorted([f"m{i}".encode() for i in range(30)] + [b"after 3", b"after 2"])
    namespace = get_client_namespace()
    left = [item.key for item in keyspace.items(following[2], f"{namespace}:")]
    assert left == [], "\n".join(left)

    # A straggler's write landing later (its path healed): the command, run
    # again with the same list, empties the removed server again.
    late = build_client([following[2]], namespace)
    late.set("late", b"from a host cut off meanwhile", expire=60)
    late.close()
    out = io.StringIO()
    call_command("memcached_pool", "--to", ",".join(two), "--wait", "60", stdout=out)
    assert "emptying what change" in out.getvalue() and "deleted the farm's 1 keys" in out.getvalue(), (
        out.getvalue()
    )
    assert not keyspace.items(following[2], f"{namespace}:")


def test_a_forged_record_carried_by_a_planted_tombstone_is_refused(following, on_old, settings):
    """Someone with memcached's port plants, on a moving job record's old
    server, a fresh tombstone carrying a forged record, and deletes the real
    one from its new server: the reader puts the carried value there (as for
    a move between its two writes), and the record's seal refuses it. The
    poll answers without it, never a 500 and never the forged state."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    alice = get_user_model().objects.create_user("alice", password="x")
    viewer = Client()
    viewer.force_login(alice)
    change = PoolChange.objects.create(
        old=",".join(following[:2]), new=",".join(following), stage=pool.Stage.FOLLOW
    )
    _stage(change, pool.Stage.LEAD)
    ring = get_client()
    for n in range(60):
        job = services.create_job(owner=alice, kind="demo", title=f"Demo {n}", params={})
        if ring.moving(store.record_key(job.id)):
            break
    else:
        pytest.fail("no job's record moves")
    record = services.begin_job(job)
    record.current, record.total, record.percent = 12, 100, 12.0
    store.write(record)
    assert viewer.get(f"/progress/{job.id}/").json()["percent"] == 12.0

    key = store.record_key(job.id)
    forged = json.dumps({"job": job.id, "state": "succeeded", "percent": 100, "final": True}).encode()
    on_old.set(key, tombstone(forged, 600), expire=600)
    ring.new.delete(key)
    answer = viewer.get(f"/progress/{job.id}/")
    assert ring.new.get(key) == forged  # the carried value was put back, as for a move under way
    assert answer.status_code < 500, answer.content
    if answer.status_code == 200:
        body = answer.json()
        assert body["state"] != "succeeded" and body["percent"] != 100, body
    else:
        assert "Traceback" not in answer.content.decode(errors="replace")
