"""Round-trip budgets: what each hot operation may cost in memcached and the
database, measured on the wire (tests/roundtrips.py) against a real
memcached and the test database. A change that adds a round trip to a poll,
a vote or a start fails here; docs/benchmarks.md has the table these keep.
"""

import pytest
from django.test import Client

from progress import services, store
from tests.roundtrips import counting, measure

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def counted(settings):
    with counting(settings):
        yield


@pytest.fixture
def running_job(alice):
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={})
    record = services.begin_job(job.id)
    record.current, record.total, record.percent, record.stage = 12, 100, 12.0, "reading orders"
    store.write(record)
    return job


def _warm(call) -> None:
    """Once first: a process's first call of anything makes connections and
    registers counters, which no later request pays."""
    call()
    call()


def test_a_read_token_poll_is_one_round_trip_and_no_query(running_job):
    client = Client()
    url = f"/progress/{running_job.id}/{running_job.read_token}/"
    _warm(lambda: client.get(url))
    cost = measure(lambda: client.get(url))
    print("token poll:", cost)
    assert cost.result.status_code == 200 and cost.result.json()["percent"] == 12.0
    assert (cost.round_trips, cost.queries) == (1, 0)


def test_a_session_poll_is_two_round_trips_and_no_query(alice_client, running_job):
    url = f"/progress/{running_job.id}/"
    _warm(lambda: alice_client.get(url))
    cost = measure(lambda: alice_client.get(url))
    print("session poll:", cost)
    assert cost.result.status_code == 200 and cost.result.json()["stage"] == "reading orders"
    assert cost.round_trips <= 2 and cost.queries == 0
