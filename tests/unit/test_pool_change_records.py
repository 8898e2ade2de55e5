"""Job records written and read by processes at every stage of a pool
change, on three real memcached servers: each simulated process follows the
plan on a thread of its own, at moments of its own, as webfarm.core.pool's
follower does, while its writers and readers are in the middle of calls."""

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tests.harness.processes import wait_for
from webfarm.core import poolchange
from webfarm.core.client import clients, protocol
from webfarm.core.client.changing import ChangingRing, Phase, clear_tombstones, is_tombstone
from webfarm.core.client.ring import build_client
from webfarm.core.pool import Plan, Stage
from webfarm.progress import store
from webfarm.progress.ids import new_job_id, new_read_token
from webfarm.progress.records import JobRecord
from webfarm.progress.states import State


@dataclass
class Process:
    """A simulated process: the plan its follower last read."""

    plan: Plan
    name: str


@dataclass
class Seen:
    job: str
    began: float
    ended: float
    current: int
    who: str


@dataclass
class World:
    processes: list[Process]
    local: threading.local = field(default_factory=threading.local)
    seen: list[Seen] = field(default_factory=list)
    done: dict[str, int] = field(default_factory=dict)  # job: updates acknowledged
    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: list[str] = field(default_factory=list)
    idle: dict[str, threading.Event] = field(default_factory=dict)  # jobs nobody writes while set

    def error(self, process: Process, what: str) -> None:
        with self.lock:
            self.errors.append(f"{process.name} at {process.plan.stage}: {what}")


@pytest.fixture
def world(three_memcached, settings, monkeypatch):
    """Four processes in threads of this one: get_client() gives each the
    ring of the plan it last read (its own, set by the test as a follower
    would), and every memcached call may be held up to 3 ms first."""
    namespace = f"pr{uuid.uuid4().hex[:8]}"
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": three_memcached, "NAMESPACE": namespace}
    plain = Plan(tuple(three_memcached))
    world = World([Process(plain, f"p{i}") for i in range(4)])
    rings: dict[Plan, object] = {}
    lock = threading.Lock()

    def kept(store_, plan, make):
        with lock:
            if plan not in rings:
                rings[plan] = make(plan)
            return rings[plan], False

    monkeypatch.setattr(clients, "current_plan", lambda: world.local.process.plan)
    monkeypatch.setattr(clients, "_kept", kept)
    # A loaded machine: any call may be preempted before it is sent.
    for name in ("_fetch_cmd", "_store_cmd", "_misc_cmd", "meta"):
        original = getattr(protocol.ReconnectingClient, name)

        def slowed(self, *args, _original=original, **kwargs):
            if random.random() < 0.3:
                time.sleep(random.random() * 0.003)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(protocol.ReconnectingClient, name, slowed)
    return world


def _bump(record: JobRecord) -> bool:
    record.current += 1
    return True


def _writer(world: World, process: Process, jobs: list[str], tokens: dict, stop: threading.Event) -> None:
    world.local.process = process
    rng = random.Random()
    while not stop.is_set():
        job = rng.choice(jobs)
        if job in world.idle and world.idle[job].is_set():
            time.sleep(0.001)
            continue
        try:
            stored = store.update(job, _bump, read_token=tokens[job])
        except Exception as exc:  # every failure is a finding: listed, and the test fails
            world.error(process, f"update: {type(exc).__name__}: {exc}")
            continue
        if stored is None:
            world.error(process, f"update found no record of {job}")
            continue
        with world.lock:
            world.done[job] = world.done.get(job, 0) + 1


def _reader(world: World, process: Process, jobs: list[str], stop: threading.Event) -> None:
    world.local.process = process
    while not stop.is_set():
        for job in jobs:
            began = time.monotonic()
            try:
                record = store.read(job)
            except Exception as exc:
                world.error(process, f"read: {type(exc).__name__}: {exc}")
                continue
            ended = time.monotonic()
            if record is None:
                world.error(process, f"read no record of {job}")
                continue
            with world.lock:
                world.seen.append(
                    Seen(job, began, ended, record.current, f"{process.name}:{process.plan.stage}")
                )


def _value_on_old(ring: ChangingRing, job: str) -> bool:
    found = ring.old.get(store.record_key(job))
    return found is not None and not is_tombstone(found)


def _advance(world: World, plan: Plan, rng: random.Random) -> None:
    """Every process reads the plan, each at a moment of its own, within 40 ms
    (webfarm.core.pool's followers), while its threads are mid-call."""
    order = list(world.processes)
    rng.shuffle(order)
    for process in order:
        time.sleep(rng.uniform(0, 0.01))
        process.plan = plan


def _updates(world: World, more: int) -> None:
    """Until `more` updates were acknowledged from now: a stage's length."""
    with world.lock:
        target = sum(world.done.values()) + more
    wait_for(lambda: sum(world.done.values()) >= target, timeout=30, what=f"{more} more updates")


def test_records_never_go_back_nor_lose_an_update_through_a_change(world, three_memcached, settings):
    """Writers (read, change, cas with the public document) and readers on
    four processes through a shrink, half the jobs left alone while the
    walk moves them: no update is lost, and no read sees less than a read
    that ended before it began."""
    rng = random.Random()
    old, new = tuple(three_memcached), tuple(three_memcached[:2])
    namespace = settings.MEMCACHED["NAMESPACE"]
    world.local.process = Process(world.processes[0].plan, "setup")
    lead = ChangingRing(build_client(old, namespace), build_client(new, namespace), Phase.LEAD)
    # Six jobs whose record moves and six whose record stays, half of each
    # left alone from LEAD on (ids drawn at random left none moving now and then).
    by_moving: dict[bool, list[str]] = {True: [], False: []}
    while min(len(ids) for ids in by_moving.values()) < 6:
        job = new_job_id()
        ids = by_moving[lead.moving(store.record_key(job))]
        if len(ids) < 6:
            ids.append(job)
    jobs = [job for pair in zip(by_moving[True], by_moving[False], strict=True) for job in pair]
    tokens = {job: new_read_token() for job in jobs}
    for job in jobs:
        store.create(JobRecord(job=job, owner=1, kind="demo", state=State.RUNNING, read_token=tokens[job]))
    for job in jobs[:6]:
        world.idle[job] = threading.Event()
    stop = threading.Event()
    threads = []
    for process in world.processes:
        threads.append(threading.Thread(target=_writer, args=(world, process, jobs, tokens, stop)))
        threads.append(threading.Thread(target=_reader, args=(world, process, jobs, stop)))
    for thread in threads:
        thread.start()
    try:
        _updates(world, 50)
        _advance(world, Plan(new, old, Stage.FOLLOW, 1), rng)
        _updates(world, 50)
        for event in world.idle.values():
            event.set()
        _advance(world, Plan(new, old, Stage.LEAD, 1), rng)
        _updates(world, 20)
        # The change's own walks (webfarm.core.poolchange): until one finds nothing to move.
        walks: list[str] = []
        poolchange._migrate(lead, say=walks.append)
        # What every process reads at NEW is on the new servers: no value is left behind.
        left = [job for job in jobs if lead.moving(store.record_key(job)) and _value_on_old(lead, job)]
        assert not left, (left, walks)
        for event in world.idle.values():
            event.clear()
        _updates(world, 20)
        _advance(world, Plan(new, old, Stage.NEW, 1), rng)
        _updates(world, 50)
        _advance(world, Plan(new, (), Stage.DONE, 1), rng)
        clear_tombstones(build_client(old, namespace))
        _updates(world, 50)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert "values moved" in walks[0] and not walks[0].startswith("walk 1: 0 values moved, 0 already"), walks
    world.local.process = Process(Plan(new, (), Stage.DONE, 1), "check")
    problems = list(world.errors[:20])
    for job in jobs:
        record = store.read(job)
        if record is None or record.current != world.done.get(job, 0):
            problems.append(
                f"{job}: stored {record and record.current}, acknowledged {world.done.get(job, 0)}"
            )
    by_job: dict[str, list[Seen]] = {}
    for seen in world.seen:
        by_job.setdefault(seen.job, []).append(seen)
    for job, seen in by_job.items():
        seen.sort(key=lambda s: s.began)
        highest: Seen | None = None
        for s in seen:
            if highest is not None and highest.ended < s.began and s.current < highest.current:
                problems.append(f"{job}: {s.who} read {s.current} after {highest.who} read {highest.current}")
                break
            if highest is None or s.current > highest.current:
                highest = s
    assert not problems, "\n".join(problems[:30])


@pytest.mark.parametrize(
    "before, after",
    [("plain", Stage.FOLLOW), (Stage.FOLLOW, Stage.LEAD), (Stage.LEAD, Stage.NEW)],
    ids=["to-follow", "to-lead", "to-new"],
)
def test_an_update_whose_process_moves_on_between_its_read_and_its_write_is_stored(
    world, three_memcached, settings, before, after
):
    """The read's CAS token is its ring's: the write goes on that ring, not
    on the one the process reads from the database meanwhile."""
    old, new = tuple(three_memcached), tuple(three_memcached[:2])
    ns = settings.MEMCACHED["NAMESPACE"]
    plans = {stage: Plan(new, old, stage, 1) for stage in (Stage.FOLLOW, Stage.LEAD, Stage.NEW)}
    plans["plain"] = Plan(old)
    process = world.processes[0]
    process.plan = plans["plain"]
    world.local.process = process
    probe = ChangingRing(build_client(old, ns), build_client(new, ns), Phase.LEAD)
    job = next(j for j in iter(new_job_id, None) if probe.moving(f"job:{j}"))
    token = new_read_token()
    store.create(JobRecord(job=job, owner=1, kind="demo", state=State.RUNNING, read_token=token))
    process.plan = plans[before]
    ring = clients.get_client()
    read = type(ring).gets_many

    def read_then_move_on(self, keys, *args, **kwargs):
        found = read(self, keys, *args, **kwargs)
        process.plan = plans[after]  # the follower read the next stage meanwhile
        return found

    ring.gets_many = read_then_move_on.__get__(ring)

    def bump(record: JobRecord) -> bool:
        record.current += 1
        return True

    stored = store.update(job, bump, read_token=token)
    assert stored is not None and stored.current == 1
    assert store.read(job).current == 1


@pytest.mark.parametrize(
    "earlier, later",
    [("plain", Stage.FOLLOW), (Stage.NEW, Stage.LEAD)],
    ids=["plain-then-follow", "new-then-lead"],
)
def test_a_document_one_process_published_is_not_left_behind_by_another_that_keeps_it_dark(
    world, three_memcached, settings, earlier, later
):
    """Where two stages meet, a process that publishes a job's document (on
    the plain ring) and one that keeps it dark (a moving document, on a
    ChangingRing) both write the record. The document the first published
    must not outlive the record's next write by the second: nginx, or a web
    node at NEW, would serve the older progress until the document lapsed."""
    old, new = tuple(three_memcached), tuple(three_memcached[:2])
    ns = settings.MEMCACHED["NAMESPACE"]
    plans = {stage: Plan(new, old, stage, 1) for stage in (Stage.FOLLOW, Stage.LEAD, Stage.NEW)}
    plans["plain"] = Plan(old)
    probe = ChangingRing(build_client(old, ns), build_client(new, ns), Phase.LEAD)
    token = new_read_token()
    job = next(j for j in iter(new_job_id, None) if probe.dark(store.public_key(j, token)))
    publisher, darkener = world.processes[:2]
    publisher.plan, darkener.plan = plans[earlier], plans[later]
    world.local.process = publisher
    store.create(JobRecord(job=job, owner=1, kind="demo", state=State.RUNNING, read_token=token))

    def to(percent: float) -> Callable[[JobRecord], bool]:
        def change(record: JobRecord) -> bool:
            record.percent = percent
            return True

        return change

    assert store.update(job, to(10.0), read_token=token) is not None
    assert json.loads(store.read_public(job, token))["percent"] == 10.0
    world.local.process = darkener
    assert store.update(job, to(20.0), read_token=token) is not None
    world.local.process = publisher
    # What the publisher's readers (nginx's ring, a web node's) find: the
    # newer progress, or no document (then the record answers).
    document = store.read_public(job, token)
    assert document is None or json.loads(document)["percent"] == 20.0, document
