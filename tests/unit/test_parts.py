"""A job's parts counted down to its merge (webfarm.progress.countdown), against a real
memcached and the test database: the merge is sent once, by the last part,
whatever is delivered twice, whatever memcached loses or is made to say."""

import threading

import pytest
from django.contrib.auth import get_user_model

from tests.harness.processes import free_port
from webfarm.core.client import get_client
from webfarm.progress import services
from webfarm.progress.countdown import PartSpec, create_parts, finish_part, left_key, parts_left, start_part
from webfarm.progress.models import Job, JobPart

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


def test_a_merge_the_broker_refused_is_sent_by_the_reapers_next_pass(job, monkeypatch):
    """Found by the chaos run (a full memcached, the broker): the merge's send
    failed after its claim, and the reaper took it for sent and waiting, so
    the job waited RESEND_AFTER (two minutes) for a merge nobody had sent."""
    import time

    from celery import current_app

    from webfarm.progress.parts.reaper import PartSender, reap_parts
    from webfarm.progress.registry import get_job_type
    from webfarm.progress.sending import send_merge
    from webfarm.queues.exceptions import QueueFull

    for n in range(PARTS - 1):
        finish_part(job.id, n)
    assert finish_part(job.id, PARTS - 1) is True  # this finisher claimed the merge

    def full(*args, **kwargs):
        raise QueueFull("memcached is full: message not stored")

    monkeypatch.setattr(current_app, "send_task", full)
    send_merge(job, get_job_type(job.kind))
    sent: list[str] = []
    sender = PartSender(part=lambda j, i: None, queued=lambda j: None, merge=lambda j: sent.append(j.id))
    job.refresh_from_db()
    assert reap_parts(job, None, now=time.time(), silence=60.0, send=sender) is True
    assert sent == [job.id]
    assert Job.objects.get(pk=job.id).merge_sent_at is not None  # claimed again, by the reaper


def _refused(monkeypatch, times: int = 1) -> None:
    """memcached (-M, full) refuses the next record writes; then has room again."""
    from webfarm.progress import store
    from webfarm.progress.exceptions import ProgressUnavailable

    real, refusals = store.update, [times]

    def refuse(job_id, change, **kwargs):
        refusals[0] -= 1
        if not refusals[0]:
            monkeypatch.setattr(store, "update", real)
        raise ProgressUnavailable("memcached cas failed: b'out of memory storing object'")

    monkeypatch.setattr(store, "update", refuse)


def test_a_job_whose_start_memcached_refused_runs_on_and_shows_it(db, monkeypatch):
    """Found by the chaos run (a full memcached): the record stayed queued
    where the start could not be written, and the run's first progress took
    `queued` for an end made elsewhere and stopped; the job came back lost."""
    from webfarm.progress import store
    from webfarm.progress.reporter import ProgressReporter

    owner = get_user_model().objects.create_user("whole")
    job = services.create_job(owner=owner, kind="top-customers", title="whole", params={})
    _refused(monkeypatch)
    record = services.begin_job(job)  # runs without live progress
    assert store.read(job.id).state == "queued"
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.stage("work", total=10)
    reporter.update(5)
    reporter.check_cancelled()  # neither JobEnded nor JobCancelled
    shown = store.read(job.id)
    assert (shown.state, shown.current) == ("running", 5)


def test_parts_start_when_memcached_refused_the_first_parts_start(job, monkeypatch):
    from webfarm.progress import store
    from webfarm.progress.parts.reporter import PartReporter
    from webfarm.progress.parts.running import begin_part

    _refused(monkeypatch, times=2)  # full for both parts' starts
    begin_part(job, 0, worker="w1@a")
    assert store.read(job.id).state == "queued"  # the start never reached memcached
    record, part = begin_part(Job.objects.get(pk=job.id), 1, worker="w2@b")
    assert (record.state, part.index) == ("running", 1)
    reporter = PartReporter(record, index=1, attempt=part.attempt, worker="w2@b", share=0.9, flush_interval=0)
    reporter.stage("work", total=10)
    reporter.update(5)
    reporter.check_cancelled()
    assert store.read(job.id).state == "running"


def test_a_part_that_sees_the_cancel_before_it_starts_never_starts(job):
    """Found by the chaos run: a part delivered after its job's cancel was
    taken started, and the job ended only at that part's first write."""
    from webfarm.progress.exceptions import JobNotRunnable
    from webfarm.progress.parts.running import begin_part

    begin_part(job, 0, worker="w1@a")
    services.cancel_job(job=Job.objects.get(pk=job.id))
    with pytest.raises(JobNotRunnable, match="cancelled"):
        begin_part(Job.objects.get(pk=job.id), 1, worker="w2@b")
    part = JobPart.objects.get(job=job, index=1)
    assert (part.state, part.started_at) == ("cancelled", None)
    assert Job.objects.get(pk=job.id).state == "cancelled"


def test_a_merge_sent_before_memcached_restarted_is_sent_again_at_once(job):
    """Found by the chaos run: memcached, the broker, restarted after the
    merge was sent; the reaper waited RESEND_AFTER (two minutes) for it."""
    import time

    from webfarm.progress.parts.reaper import PartSender, reap_parts

    for n in range(PARTS):
        finish_part(job.id, n)  # the last one claimed and (say) sent the merge
    job.refresh_from_db()
    sent: list[str] = []
    sender = PartSender(part=lambda j, i: None, queued=lambda j: None, merge=lambda j: sent.append(j.id))
    from webfarm.progress import store

    now = time.time()
    assert reap_parts(job, store.read(job.id), now=now, silence=60.0, send=sender) is False  # just sent
    assert reap_parts(job, None, now=now, silence=60.0, send=sender) is True  # the record is gone
    assert sent == [job.id]
