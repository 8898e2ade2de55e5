"""Round-trip budgets: what each hot operation may cost in memcached and the
database, measured on the wire (tests/harness/roundtrips.py) against a real
memcached and the test database. A change that adds a round trip to a poll,
a vote or a start fails here; docs/benchmarks.md has the table these keep.
"""

import pytest
from django.test import Client

from tests.harness.roundtrips import counting, runs, steady
from webfarm.core import revocations
from webfarm.progress import services, store
from webfarm.progress.countdown import PartSpec
from webfarm.progress.models import Job
from webfarm.progress.parts.reporter import PartReporter
from webfarm.progress.records import MAX_PARTS

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def counted(settings, monkeypatch):
    # A process reads the revocations table at most once a second
    # (webfarm.core.revocations): a cost per second, not per request, which
    # a slow machine's runs would otherwise catch in one of them.
    monkeypatch.setattr(revocations, "REFRESH", 3600.0)
    with counting(settings):
        yield


@pytest.fixture
def running_job(alice):
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={})
    record = services.begin_job(job)
    record.current, record.total, record.percent, record.stage = 12, 100, 12.0, "reading orders"
    store.write(record)
    return job


def _said(name: str, cost) -> None:
    """One line of the round-trip table bench/roundtrips.py prints (run with -s)."""
    trips = " | ".join(map(runs, cost.trips))
    print(f"\nbudget|{name}|{cost.round_trips}|{cost.commands}|{cost.queries}|{trips}")


def _warm(call) -> None:
    """Once first: a process's first call of anything makes connections and
    registers counters, which no later request pays."""
    call()
    call()


def test_a_read_token_poll_is_one_round_trip_and_no_query(running_job):
    client = Client()
    url = f"/progress/{running_job.id}/{running_job.read_token}/"
    _warm(lambda: client.get(url))
    cost = steady(lambda: client.get(url))
    _said("GET /progress/<job>/<token>/", cost)
    assert cost.result.status_code == 200 and cost.result.json()["percent"] == 12.0
    assert (cost.round_trips, cost.queries) == (1, 0)


def test_a_session_poll_is_two_round_trips_and_no_query(alice_client, running_job):
    url = f"/progress/{running_job.id}/"
    _warm(lambda: alice_client.get(url))
    cost = steady(lambda: alice_client.get(url))
    _said("GET /progress/<job>/ (session)", cost)
    assert cost.result.status_code == 200 and cost.result.json()["stage"] == "reading orders"
    assert cost.round_trips <= 2 and cost.queries == 0


@pytest.fixture
def split_job(alice):
    """A job in the most parts a job may have, every part running."""
    parts = [PartSpec(size=1000) for _ in range(MAX_PARTS)]
    job = services.create_job(owner=alice, kind="demo", title="Split", params={}, parts=parts)
    record = services.begin_job(job)
    reporters = [
        PartReporter(record, index=n, attempt=1, worker=f"celery@worker{n % 8}", share=0.85, flush_interval=0)
        for n in range(MAX_PARTS)
    ]
    for reporter in reporters:
        reporter.stage("reading orders", total=1000)
        reporter.update(500)
    return job, reporters


def test_a_poll_of_a_job_in_the_most_parts_is_one_round_trip(split_job):
    job, _ = split_job
    client = Client()
    url = f"/progress/{job.id}/{job.read_token}/"
    _warm(lambda: client.get(url))
    cost = steady(lambda: client.get(url))
    _said(f"GET /progress/<job>/<token>/ ({MAX_PARTS} parts)", cost)
    document = cost.result.json()
    assert document["parts"]["running"] == MAX_PARTS and document["percent"] == pytest.approx(42.5)
    assert (cost.round_trips, cost.queries) == (1, 0)


def test_a_parts_progress_write_is_two_round_trips_and_no_query(split_job):
    """A part's write: the record, the cancel flag and the public document
    (gets), then the record's cas with the document's. At most one per
    FLUSH_INTERVAL per part."""
    _, reporters = split_job
    reporter = reporters[7]
    cost = steady(reporter.flush)
    _said("a part's progress write", cost)
    assert (cost.round_trips, cost.queries) == (2, 0)


def _start(client: Client, kind: str = "count", **params: int):
    return client.post(f"/start/{kind}/", {"steps": 7, **params}, **JSON, HTTP_X_CSRFTOKEN="c" * 32)


def test_an_accepted_start_is_at_most_six_round_trips(starters, settings):
    settings.PROGRESS = {**settings.PROGRESS, "JOBS_PER_KIND": 100}
    assert _start(starters[0]).status_code == 202 and _start(starters[1]).status_code == 202  # warm
    fresh = iter(starters[2:])
    cost = steady(lambda: _start(next(fresh)))
    _said("a job start, accepted", cost)
    assert cost.result.status_code == 202
    assert cost.round_trips <= 6


def test_a_refused_start_costs_less_than_an_accepted_one(starters, settings):
    settings.PROGRESS = {**settings.PROGRESS, "JOBS_PER_KIND": 2}
    assert _start(starters[0]).status_code == 202 and _start(starters[1]).status_code == 202
    assert _start(starters[2]).status_code == 503  # warm
    fresh = iter(starters[3:])
    cost = steady(lambda: _start(next(fresh)))
    _said("a job start, refused (503)", cost)
    assert cost.result.status_code == 503 and cost.result["Retry-After"]
    assert cost.round_trips <= 3 and cost.queries == 0


SPLIT = 4


def test_a_split_start_costs_a_whole_start_and_a_send_per_part(starters, settings):
    """A job in parts sends one task per part; the rest of its start costs
    what a whole job's does."""
    settings.PROGRESS = {**settings.PROGRESS, "JOBS_PER_KIND": 100}
    fresh = iter(starters)
    assert _start(next(fresh), "count-parts", parts=SPLIT).status_code == 202
    assert _start(next(fresh)).status_code == 202
    split = steady(lambda: _start(next(fresh), "count-parts", parts=SPLIT))
    _said(f"a job start in {SPLIT} parts, accepted", split)
    whole = steady(lambda: _start(next(fresh)))
    _said("a whole job's start", whole)
    assert split.result.status_code == 202 and whole.result.status_code == 202
    assert Job.objects.get(pk=split.result.json()["job"]).part_count == SPLIT
    sends = [sum(runs(trip) == "ms ma mg incr" for trip in cost.trips) for cost in (split, whole)]
    assert sends == [SPLIT, 1]
    # A send whose queue index the producer has not reserved yet takes one
    # first, an incr of its own: sends more than BURST_GAP apart (a loaded
    # machine) each do. At most one per send, and the counters' flush.
    reservations = [sum(runs(trip) == "incr" for trip in cost.trips) for cost in (split, whole)]
    assert reservations[0] <= SPLIT + 1
    # The rest the same, give or take the counters' sender's flush (a thread's, once a second).
    assert split.round_trips - reservations[0] - SPLIT <= whole.round_trips - reservations[1] - 1 + 1
    # The parts need a transaction (a savepoint and its release inside the
    # test's), the ids' bounds, the parts in one insert and their sends noted
    # after: a whole job's row is one insert that notes its send.
    assert whole.queries == 1 and split.queries <= whole.queries + 5


def test_a_batch_of_a_hundred_is_claimed_in_two_round_trips_and_acknowledged_in_one():
    from webfarm.queues.queue import Queue

    producer, consumer = Queue("budget"), Queue("budget")
    for _ in range(5):
        producer.put_many([b"x" * 2048] * 100)
    consumer.ack_many([m.receipt for m in consumer.claim_many(100)])  # warm: the queue is busy
    claim = steady(lambda: consumer.claim_many(100))
    _said("queue: claim a batch of 100", claim)
    assert len(claim.result) == 100 and claim.round_trips == 2 and claim.queries == 0
    receipts = [m.receipt for m in consumer.claim_many(100)]
    ack = steady(lambda: consumer.ack_many(receipts), runs=1)
    _said("queue: acknowledge a batch of 100", ack)
    assert ack.result == [] and ack.round_trips == 1
