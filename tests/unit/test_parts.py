"""A job's parts counted down to its merge (progress.countdown), against a real
memcached and the test database: the merge is sent once, by the last part,
whatever is delivered twice, whatever memcached loses or is made to say."""

import threading

import pytest
from django.contrib.auth import get_user_model

from progress import services
from progress.countdown import PartSpec, create_parts, finish_part, left_key, parts_left, start_part
from progress.models import Job, JobPart
from tests.harness.processes import free_port
from webfarm.core.client import get_client

PARTS = 16


@pytest.fixture
def job(db) -> Job:
    owner = get_user_model().objects.create_user("splitter")
    return services.create_job(
        owner=owner,
        kind="sales-by-region",
        title="split",
        params={},
        parts=[PartSpec(size=100 + n, params={"n": n}) for n in range(PARTS)],
    )


def test_the_last_part_to_finish_and_only_it_sends_the_merge(job):
    sends = [finish_part(job.id, n, result={"n": n}) for n in range(PARTS)]
    assert sends == [False] * (PARTS - 1) + [True]
    assert Job.objects.get(pk=job.id).merge_sent_at is not None
    assert [p.result for p in JobPart.objects.filter(job=job)] == [{"n": n} for n in range(PARTS)]


def test_a_part_delivered_twice_runs_once_and_counts_once(job):
    assert start_part(job.id, 0, worker="w1@a") is not None
    assert start_part(job.id, 0, worker="w2@b") is None  # the second delivery does not run it
    assert finish_part(job.id, 0) is False
    assert finish_part(job.id, 0) is False  # finished again: not counted again
    assert get_client().get(left_key(job.id)) == str(PARTS - 1).encode()
    sends = [finish_part(job.id, n) for n in range(1, PARTS)]
    assert sends.count(True) == 1 and sends[-1] is True
    assert JobPart.objects.get(job=job, index=0).worker == "w1@a"


def test_parts_finishing_at_once_on_many_workers_send_one_merge(transactional_db):
    owner = get_user_model().objects.create_user("racer")
    job = services.create_job(
        owner=owner, kind="sales-by-region", title="race", params={}, parts=[PartSpec()] * PARTS
    )
    barrier, sends = threading.Barrier(PARTS), []

    def finish(n: int) -> None:
        barrier.wait(10)
        sends.append(finish_part(job.id, n))

    threads = [threading.Thread(target=finish, args=(n,)) for n in range(PARTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(sends) == [False] * (PARTS - 1) + [True]


def test_a_count_memcached_lost_is_taken_from_the_rows(job):
    for n in range(5):
        assert finish_part(job.id, n) is False
    get_client().delete(left_key(job.id))  # memcached restarted
    recounts: list[int] = []
    sends = [finish_part(job.id, n, on_recount=lambda n=n: recounts.append(n)) for n in range(5, PARTS)]
    assert sends == [False] * (PARTS - 6) + [True]
    # Every finish with parts left says so: a memcached broker lost their tasks too.
    assert recounts == list(range(5, PARTS - 1))


@pytest.mark.parametrize("planted", [b"0", b"1", b"not a number"])
def test_a_count_planted_in_memcached_cannot_merge_a_job_early(job, planted):
    for n in range(3):
        finish_part(job.id, n)
    get_client().set(left_key(job.id), planted)
    sends = [finish_part(job.id, n) for n in range(3, PARTS)]
    assert sends == [False] * (PARTS - 4) + [True]
    assert parts_left(job.id) == 0


def test_with_memcached_unreachable_the_rows_count(job, settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    sends = [finish_part(job.id, n) for n in range(PARTS)]
    assert sends == [False] * (PARTS - 1) + [True]


def test_a_job_needs_a_part(job):
    with pytest.raises(ValueError, match="at least one part"):
        create_parts(job, [])
