"""What a change of the memcached pool costs a request (docs/farm.md,
"Changing the servers of a running farm"): round trips of polls and starts,
measured on the wire (tests/harness/roundtrips.py) with Django's test client
against three real memcached servers, the pool grown from two to three by
PoolChange rows the process follows, stage by stage. Counts only: the same
on every machine. `python -m bench.poolcost` runs this with POOL_COST_TIMED
set, and each phase's requests are timed as well (figures, never asserted),
against a run with POOL_COST_CONTROL set: the same requests, no change.

A moving key read through the change costs at most one more round trip (a
tombstone on its old server sends the reader to the new one); a key made
at LEAD, one more (the tombstone that claims it on the old server)."""

import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.harness.roundtrips import counting, measure
from webfarm.core import pool, revocations
from webfarm.core.client import build_client
from webfarm.core.client.changing import ChangingRing, Phase, migrate
from webfarm.core.models import PoolChange
from webfarm.progress import services, store

pytestmark = pytest.mark.django_db(transaction=True)

JSON = {"HTTP_ACCEPT": "application/json"}
START = {"steps": 7}
JOBS = 16
PHASES = ("before", "follow", "lead", "walked", "new")
TIMED = bool(os.environ.get("POOL_COST_TIMED"))
# bench.poolcost's baseline: the same requests in the same order, the pool never changed.
CONTROL = bool(os.environ.get("POOL_COST_CONTROL"))


@pytest.fixture
def pool_of_two(settings, three_memcached, memcached_broker, monkeypatch) -> Iterator[list[str]]:
    # As tests/unit/test_budgets.py: the revocations table read once a second is not a request's cost.
    monkeypatch.setattr(revocations, "REFRESH", 3600.0)
    settings.MEMCACHED = {
        **settings.MEMCACHED,
        "SERVERS": three_memcached[:2],
        "NAMESPACE": f"pk{uuid.uuid4().hex[:8]}",
        "POOL_FOLLOW": True,
        # The plan read when the test moves a stage (pool.refresh()), not
        # meanwhile: the test database is SQLite, whose shared cache refuses
        # a request's write while the follower reads ("table is locked").
        "POOL_REFRESH": 3600,
        "POOL_STALE": 3600,
    }
    settings.PROGRESS = {**settings.PROGRESS, "JOBS_PER_KIND": 1000, "JOBS_PER_USER": 1000}
    with counting(settings):
        yield three_memcached
    # The follower ends before the test's database is emptied.
    settings.MEMCACHED = {**settings.MEMCACHED, "POOL_FOLLOW": False}
    pool.stop()


def _stage(servers: list[str], phase: str, namespace: str) -> None:
    """The process on `phase` of growing from servers[:2] to servers."""
    if phase == "before" or CONTROL:
        return
    old, new = ",".join(servers[:2]), ",".join(servers)
    stage = {"follow": pool.Stage.FOLLOW, "lead": pool.Stage.LEAD, "walked": pool.Stage.LEAD}.get(
        phase, pool.Stage.NEW
    )
    if not PoolChange.objects.update(stage=stage):
        PoolChange.objects.create(old=old, new=new, stage=stage)
    pool.refresh()
    if phase == "walked":  # the command's walk at LEAD: the old servers hold tombstones only
        migrate(
            ChangingRing(build_client(servers[:2], namespace), build_client(servers, namespace), Phase.LEAD)
        )


def _mean_trips(calls: list[Callable[[], object]], ok: Callable[[object], bool]) -> float:
    """Round trips per call on warm connections (a handshake is not a request's cost)."""
    trips = []
    for call in calls:
        cost = measure(call)
        assert ok(cost.result), cost.result
        trips.append(cost.round_trips - cost.connects)
        if os.environ.get("POOL_COST_DEBUG"):
            print(cost)
    return statistics.fmean(trips)


def start(client: Client) -> object:
    return client.post("/start/count/", START, **JSON, HTTP_X_CSRFTOKEN="c" * 32)


def _timed(call: Callable[[], object], seconds: float = 1.5) -> float:
    """Calls per second over `seconds` (bench.poolcost only)."""
    n, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        call()
        n += 1
    return n / (time.perf_counter() - began)


def test_a_change_adds_at_most_a_round_trip_to_a_poll_or_a_start(pool_of_two, settings, starters):
    namespace = settings.MEMCACHED["NAMESPACE"]
    alice = get_user_model().objects.create_user("alice", password="x")
    viewer = Client()
    viewer.force_login(alice)
    jobs = []
    for n in range(JOBS):
        job = services.create_job(owner=alice, kind="demo", title=f"Demo {n}", params={})
        record = services.begin_job(job)
        record.current, record.total, record.percent = 12, 100, 12.0
        store.write(record)
        jobs.append(job)
    token_urls = [f"/progress/{job.id}/{job.read_token}/" for job in jobs]
    session_urls = [f"/progress/{job.id}/" for job in jobs]
    ok = lambda response: response.status_code == 200  # noqa: E731
    started = lambda response: response.status_code == 202  # noqa: E731
    costs: dict[str, dict[str, float]] = {}
    rates: dict[str, dict[str, float]] = {}
    # The same users start in every phase: their sessions' servers stay, only the jobs are new.
    for phase in PHASES:
        _stage(pool_of_two, phase, namespace)
        Client().get(token_urls[0])  # warm: this phase's connections
        viewer.get(session_urls[0])
        assert started(start(starters[0]))  # warm
        costs[phase] = {
            # A phase's first poll of a job may find its document gone (dark,
            # or not yet on its new server) and put it back; the next is steady.
            "first token poll": _mean_trips([lambda u=u: Client().get(u) for u in token_urls], ok),
            "token poll": _mean_trips([lambda u=u: Client().get(u) for u in token_urls], ok),
            "session poll": _mean_trips([lambda u=u: viewer.get(u) for u in session_urls], ok),
            "start": _mean_trips([lambda c=c: start(c) for c in starters], started),
        }
        if TIMED:
            anonymous = Client()
            rates[phase] = {
                "token poll": _timed(lambda: [anonymous.get(u) for u in token_urls]) * JOBS,  # noqa: B023
                "session poll": _timed(lambda: [viewer.get(u) for u in session_urls]) * JOBS,
                # Each starter once a round: a start is a job row, a record and a send.
                "start": _timed(lambda: [start(c) for c in starters]) * len(starters),
            }
        print(f"\npoolcost|{phase}|" + "|".join(f"{op}={trips:.2f}" for op, trips in costs[phase].items()))
        if TIMED:
            print(f"pooltime|{phase}|" + "|".join(f"{op}={rate:.0f}" for op, rate in rates[phase].items()))
    before = costs["before"]
    for phase in PHASES[1:]:
        for op, trips in costs[phase].items():
            assert trips <= before[op] + BUDGET.get(op, 1), (phase, op, trips, before[op])


# Round trips a phase may add to an operation's mean: one per read step that
# may follow a tombstone after the walk (a token poll reads one key that can
# move, its record; a session poll three: its session, its user and the
# record, which a changing ring reads one by one) or per batch of keys
# claimed (a start: its checks, its record, its counters); a job's first
# token poll in a phase, two (its document missing: the record read, the
# document put back).
BUDGET = {"first token poll": 2, "session poll": 3, "start": 3}
