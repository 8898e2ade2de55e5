"""Jobs whose worker died: lost after the heartbeat's silence, run again once."""

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from tests.harness.processes import free_port, wait_for
from tests.project.shop.jobs import count, count_part
from webfarm.core import slots
from webfarm.core.client import get_client
from webfarm.progress import liveness, selectors, services, store
from webfarm.progress.exceptions import JobNotRunnable
from webfarm.progress.launching.admission import start_job
from webfarm.progress.launching.reaper import reap
from webfarm.progress.launching.running import reap_lost_jobs
from webfarm.progress.models import Job
from webfarm.progress.reporter import ProgressReporter

pytestmark = pytest.mark.django_db

PARAMS = {"steps": 9}


@pytest.fixture(autouse=True)
def quick_beats(settings):
    settings.PROGRESS = {**settings.PROGRESS, "HEARTBEAT_INTERVAL": 1.0, "LOST_AFTER_BEATS": 3}


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def _running(user, *, silent_for: float = 10.0) -> Job:
    """A started job whose worker has been silent for `silent_for` seconds."""
    job = start_job(user=user, job_type=count, params=PARAMS)
    record = services.begin_job(job)
    record.percent = 40.0
    record.heartbeat_at = record.updated_at = time.time() - silent_for
    store.write(record)
    Job.objects.filter(pk=job.id).update(started_at=datetime.now(UTC) - timedelta(seconds=silent_for))
    return job


def test_a_silent_job_is_lost_and_run_again_once_in_its_own_slots(alice, django_capture_on_commit_callbacks):
    job = _running(alice)
    with django_capture_on_commit_callbacks() as sent:
        assert reap_lost_jobs() == [job.id]
    assert len(sent) == 1  # the retry's task goes out once the transaction is committed
    lost = Job.objects.get(pk=job.id)
    assert lost.state == "lost" and "stopped (no heartbeat for 3 s) at 40 %" in lost.error
    again = Job.objects.get(retry_of=job.id)
    assert (lost.retried_as, again.state, again.attempt) == (again.id, "queued", 2)
    # The widget follows the retry by swapping the job id in its token URL.
    assert again.read_token == lost.read_token and store.read(again.id).read_token == lost.read_token
    public = store.read(job.id).public()
    assert public["state"] == "lost" and public["retried_as"] == again.id and public["final"]
    # The retry holds the slots the lost job held; nobody could take them in between.
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == [again.id]
    assert reap_lost_jobs() == []  # nothing twice


def test_a_retry_that_is_lost_too_stays_lost(alice):
    job = _running(alice)
    reap_lost_jobs()
    again = Job.objects.get(retry_of=job.id)
    record = services.begin_job(again)
    record.heartbeat_at = time.time() - 10
    store.write(record)
    Job.objects.filter(pk=again.id).update(started_at=datetime.now(UTC) - timedelta(seconds=10))
    assert reap_lost_jobs() == [again.id]
    assert not Job.objects.filter(retry_of=again.id).exists()
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == []  # released: no one takes over


def test_job_types_that_must_not_run_twice_are_not_retried(alice, monkeypatch):
    monkeypatch.setattr(type(count), "retry_on_lost", False)
    job = _running(alice)
    assert reap_lost_jobs() == [job.id]
    assert not Job.objects.filter(retry_of=job.id).exists()
    assert "run again" not in Job.objects.get(pk=job.id).error


def test_a_beating_job_is_left_alone(alice):
    job = _running(alice, silent_for=0.5)
    Job.objects.filter(pk=job.id).update(started_at=datetime.now(UTC) - timedelta(seconds=60))
    assert reap() == []
    assert Job.objects.get(pk=job.id).state == "running"


def test_a_job_whose_worker_lost_memcached_beats_in_its_row_and_is_left_alone(
    alice, settings, transactional_db
):
    """Its worker cannot reach memcached (cut off from it): memcached holds a
    heartbeat that stopped, the reporter beats in the job's row, and the
    reaper, which still reads memcached, leaves the job running."""
    job = _running(alice)
    record = store.read(job.id)
    reporter = ProgressReporter(record, flush_interval=0, heartbeat_interval=0.2)
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    reporter.start_heartbeat()
    try:
        wait_for(lambda: Job.objects.get(pk=job.id).beat_at, timeout=5, what="a heartbeat in the row")
    finally:
        reporter.stop_heartbeat()
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [settings.CACHES["default"]["LOCATION"][0]]}
    assert store.read(job.id).heartbeat_at < time.time() - 5  # memcached's says it stopped
    assert reap() == []
    assert Job.objects.get(pk=job.id).state == "running"
    # Without the row's beat, the same job is lost.
    Job.objects.filter(pk=job.id).update(beat_at=None)
    assert reap() == [job.id]


def test_with_memcached_down_nobody_is_declared_lost(alice, settings):
    job = _running(alice)
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    assert reap() == []
    assert Job.objects.get(pk=job.id).state == "running"


def test_a_missing_record_gets_one_silence_of_grace(alice):
    job = _running(alice)
    get_client().delete(store.record_key(job.id))  # evicted, or memcached restarted
    now = time.time()
    assert reap(now=now) == []  # memcached restarted? a live job writes it again
    assert reap(now=now + 4) == [job.id]
    assert Job.objects.get(pk=job.id).state == "lost"


def _queued(user, *, age: float, sent: bool = True, sends: int = 1) -> Job:
    """A queued job created `age` seconds ago, its task sent (or not)."""
    job = start_job(user=user, job_type=count_part, params=PARAMS)
    then = datetime.now(UTC) - timedelta(seconds=age)
    Job.objects.filter(pk=job.id).update(
        created_at=then, sent_at=then if sent else None, sends=sends if sent else 0
    )
    return Job.objects.get(pk=job.id)


def test_a_queued_job_whose_task_never_left_is_sent_by_the_reaper(alice, settings):
    settings.PROGRESS = {**settings.PROGRESS, "SEND_GRACE": 5.0}
    fresh = _queued(alice, age=1, sent=False)  # its web process may still be sending it
    stuck = _queued(alice, age=10, sent=False)  # the web process died before sending
    assert reap_lost_jobs() == [stuck.id]
    stuck.refresh_from_db()
    assert stuck.sent_at is not None and stuck.sends == 1 and stuck.state == "queued"
    assert Job.objects.get(pk=fresh.id).sends == 0
    assert reap_lost_jobs() == []  # sent a moment ago: it waits its turn


def test_a_queued_job_memcached_forgot_is_sent_again_at_once(alice, settings):
    settings.PROGRESS = {**settings.PROGRESS, "SEND_GRACE": 5.0, "RESEND_AFTER": 600.0}
    job = _queued(alice, age=10)
    get_client().flush_all()  # memcached restarted: a memcached broker lost the task with the record
    assert reap_lost_jobs() == [job.id]
    job.refresh_from_db()
    assert job.sends == 2 and store.read(job.id).state == "queued"  # its page shows it queued again
    get_client().flush_all()  # and again: it was sent twice already, it is not sent a third time
    assert reap_lost_jobs() == []


def test_a_job_still_queued_long_after_its_task_was_sent_twice_is_lost(alice, settings):
    settings.PROGRESS = {
        **settings.PROGRESS,
        "SEND_GRACE": 1.0,
        "RESEND_AFTER": 5.0,
        "QUEUED_LOST_AFTER": 20.0,
    }
    job = _queued(alice, age=10)
    assert reap_lost_jobs() == [job.id]  # still queued 10 s after its send: sent again
    Job.objects.filter(pk=job.id).update(sent_at=datetime.now(UTC) - timedelta(seconds=30))
    assert reap_lost_jobs() == [job.id]
    lost = Job.objects.get(pk=job.id)
    assert lost.state == "lost" and "never started" in lost.error
    public = store.read(job.id).public()
    assert public["state"] == "lost" and "never started" in public["error"] and public["final"]
    assert public["message"] == "the job queue lost it"  # not a worker that stopped: none started it
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == []  # its slots are free again
    assert reap_lost_jobs() == []


def test_a_task_sent_twice_starts_its_job_once(alice):
    job = _queued(alice, age=0)
    services.begin_job(job)
    with pytest.raises(JobNotRunnable, match="running"):
        services.begin_job(job)  # the second delivery, while the first run is alive
    get_client().delete(store.record_key(job.id))  # memcached lost the record: the row decides
    with pytest.raises(JobNotRunnable, match="running"):
        services.begin_job(job)


def test_a_split_job_whose_part_is_lost_twice_runs_again_as_a_new_job(
    alice, django_capture_on_commit_callbacks
):
    """A job type that allows a retry when lost (retry_on_lost): a split job lost
    because one of its parts was lost twice gets it too, as a whole job does."""
    from webfarm.progress.models import JobPart
    from webfarm.progress.parts.running import begin_part

    job = start_job(user=alice, job_type=count_part, params=PARAMS)
    assert job.part_count >= 1
    begin_part(job, 0, worker="w1@a")
    long_ago = datetime.now(UTC) - timedelta(seconds=60)
    Job.objects.filter(pk=job.id).update(started_at=long_ago)
    JobPart.objects.filter(job=job, index=0).update(attempt=2, started_at=long_ago, beat_at=long_ago)
    with django_capture_on_commit_callbacks() as sent:
        assert job.id in reap_lost_jobs()
    lost = Job.objects.get(pk=job.id)
    again = Job.objects.get(retry_of=job.id)
    assert (lost.state, lost.retried_as) == ("lost", again.id)
    assert "run again automatically" in lost.error
    assert (again.state, again.part_count, again.attempt) == ("queued", job.part_count, 2)
    assert len(sent) == 1
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == [again.id]


def test_an_end_memcached_missed_is_written_there_once_it_answers(alice, settings, monkeypatch):
    """A job failed to queue while memcached was away: the row says failed,
    memcached still says queued (what readers believe). The reaper's next
    pass with memcached back writes the end; none before."""
    monkeypatch.setattr(services, "FINAL_WRITE_PAUSE", 0)
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={})
    reachable = settings.MEMCACHED
    settings.MEMCACHED = {**reachable, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    services.fail_to_queue(job=job, reason="The job queue is unavailable; please try again.")
    assert Job.objects.get(pk=job.id).end_unpublished
    assert reap_lost_jobs() == []  # memcached still away: nothing to write it to
    settings.MEMCACHED = reachable
    assert store.read(job.id).state == "queued"  # the stale record a poll would serve

    assert job.id in reap_lost_jobs()
    shown = selectors.job_record(job_id=job.id, owner_id=alice.pk)
    assert (shown.state, shown.error) == ("failed", "The job queue is unavailable; please try again.")
    assert json.loads(store.read_public(job.id, shown.read_token))["state"] == "failed"  # nginx serves it
    assert not Job.objects.get(pk=job.id).end_unpublished
    assert job.id not in reap_lost_jobs()  # written once


@pytest.fixture
def child():
    """A process of this one's, as a worker's pool child is its main process's."""
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def test_a_silent_job_whose_process_lives_is_waited_for(alice, child):
    """Its heartbeat thread is silent (starved of CPU, or a C call holds the
    GIL), but the worker's main process says the process lives: not lost.
    Once that process stops or dies, the job is lost at the next pass."""
    job = _running(alice)
    Job.objects.filter(pk=job.id).update(worker=f"celery@box#{child.pid}")
    beacon = liveness.Beacon("celery@box")
    beacon.beat()
    assert reap() == []
    assert Job.objects.get(pk=job.id).state == "running"
    os.kill(child.pid, signal.SIGSTOP)  # paused past the bound: taken for lost
    try:
        beacon.beat()
        assert reap() == [job.id]
    finally:
        os.kill(child.pid, signal.SIGCONT)


def test_a_silent_merge_whose_process_lives_is_waited_for(alice, child):
    """A split job's merge names its process on the job's row, as a whole
    job's run does: silent while its process lives (the pool change test saw
    a merge starved for three beats taken for lost), it is waited for; once
    that process is gone, it is lost."""
    from webfarm.progress.parts.running import begin_merge

    job = _running(alice)
    Job.objects.filter(pk=job.id).update(part_count=2)
    worker = f"celery@box#{child.pid}"
    begin_merge(Job.objects.get(pk=job.id), worker=worker)
    assert Job.objects.get(pk=job.id).worker == worker
    beacon = liveness.Beacon("celery@box")
    beacon.beat()
    assert reap() == []
    child.kill()
    child.wait()
    beacon.beat()
    assert reap() == [job.id]


def test_a_job_past_its_time_limit_is_lost_though_its_process_lives(alice, child):
    """Celery kills a task at its hard time limit: a job still claimed by a
    live process after that (a liveness key replayed, a worker's bug) is lost."""
    job = _running(alice, silent_for=3 * 3600)
    Job.objects.filter(pk=job.id).update(worker=f"celery@box#{child.pid}")
    liveness.Beacon("celery@box").beat()
    assert reap() == [job.id]


def test_a_worker_lists_its_running_children_only(child):
    assert child.pid in liveness.running_processes(os.getpid())
    os.kill(child.pid, signal.SIGSTOP)
    try:
        wait_for(lambda: child.pid not in liveness.running_processes(os.getpid()), timeout=5, what="stopped")
    finally:
        os.kill(child.pid, signal.SIGCONT)
    child.kill()
    child.wait()
    assert child.pid not in liveness.running_processes(os.getpid())


def test_a_planted_liveness_key_keeps_no_job_from_being_lost(alice, child):
    job = _running(alice)
    worker = f"celery@box#{child.pid}"
    Job.objects.filter(pk=job.id).update(worker=worker)
    get_client().set(liveness.alive_key(worker), b"1", expire=60)
    assert liveness.alive([worker]) == set()
    assert reap() == [job.id]


def test_a_silent_part_whose_process_lives_is_waited_for(alice, child):
    """The same for a part of a split job: its process lives, so the part is
    not sent again; once the process is gone, it is."""
    from webfarm.progress.models import JobPart
    from webfarm.progress.parts.running import begin_part

    job = start_job(user=alice, job_type=count_part, params=PARAMS)
    begin_part(job, 0, worker=f"celery@box#{child.pid}")
    long_ago = datetime.now(UTC) - timedelta(seconds=60)
    Job.objects.filter(pk=job.id).update(started_at=long_ago)
    JobPart.objects.filter(job=job, index=0).update(started_at=long_ago, beat_at=long_ago)
    beacon = liveness.Beacon("celery@box")
    beacon.beat()
    assert reap_lost_jobs() == []
    assert JobPart.objects.get(job=job, index=0).state == "running"
    child.kill()
    child.wait()
    beacon.beat()  # its next beat unlists the process
    assert reap_lost_jobs() == [job.id]
    assert JobPart.objects.get(job=job, index=0).attempt == 2
