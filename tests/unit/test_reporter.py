"""The publishing API task code calls: coalescing, stages, ETA, heartbeat, cancel."""

import pytest

from tests.harness.processes import free_port, wait_for
from webfarm.progress import store
from webfarm.progress.exceptions import JobCancelled
from webfarm.progress.ids import new_job_id
from webfarm.progress.records import JobRecord
from webfarm.progress.reporter import ProgressReporter


@pytest.fixture
def record() -> JobRecord:
    record = JobRecord(job=new_job_id(), owner=1, kind="demo", state="running")
    store.create(record)
    return record


def test_a_tight_loop_of_updates_writes_rarely(record):
    reporter = ProgressReporter(record, flush_interval=0.05)
    reporter.stage("counting", total=300_000)
    for i in range(1, 300_001):
        reporter.update(i)
    reporter.flush()
    # Far fewer writes than calls; the last one carries the final number.
    assert reporter.flushes < 300
    stored = store.read(record.job)
    assert stored.current == 300_000 and stored.percent == 100.0


def test_percent_spans_planned_stages(record):
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.plan([("read", 80), ("write", 20)])
    reporter.stage("read", total=100)
    reporter.update(50)
    assert store.read(record.job).percent == 40.0
    reporter.update(100)
    reporter.stage("write", total=10)
    reporter.update(5)
    stored = store.read(record.job)
    assert (stored.stage, stored.current, stored.total, stored.percent) == ("write", 5, 10, 90.0)


def test_a_stage_the_plan_does_not_name_is_a_mistake_said_at_once(record):
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.plan([("read", 80), ("write", 20)])
    with pytest.raises(ValueError, match="'wirte' is not in the plan"):
        reporter.stage("wirte", total=10)
    ProgressReporter(record, flush_interval=0).stage(
        "anything", total=1
    )  # no plan: any stage is the whole job


def test_eta_comes_from_the_observed_rate(record):
    reporter = ProgressReporter(record, flush_interval=0.02)
    reporter.stage("work", total=1000)
    # Progress that advances with the clock: 1 unit per flush attempt.
    done = 0

    def step():
        nonlocal done
        done += 10
        reporter.update(done)
        return done >= 300

    wait_for(step, timeout=30, interval=0.02, what="300 units")
    reporter.flush()
    eta = store.read(record.job).eta_seconds
    assert eta is not None and eta > 0


def test_heartbeat_writes_while_the_task_is_busy_elsewhere(record):
    reporter = ProgressReporter(record, flush_interval=0.05, heartbeat_interval=0.2)
    reporter.stage("long step", total=None)
    first = store.read(record.job).heartbeat_at
    reporter.start_heartbeat()
    try:
        wait_for(lambda: store.read(record.job).heartbeat_at > first, timeout=5, what="a heartbeat")
    finally:
        reporter.stop_heartbeat()


def test_cancel_flag_stops_the_task_at_its_next_write(record):
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.stage("work", total=10)
    reporter.update(1)
    store.request_cancel(record.job)
    with pytest.raises(JobCancelled):
        reporter.update(2)
    assert store.read(record.job).cancel_requested


def test_heartbeat_notices_a_cancel_and_the_next_update_raises(record):
    reporter = ProgressReporter(record, flush_interval=3600, heartbeat_interval=0.1)
    reporter.stage("work", total=10)
    reporter.start_heartbeat()
    try:
        store.request_cancel(record.job)
        # The flag is in memcached at once; what matters is that the heartbeat
        # (not an update: flush_interval is an hour) brings it to the task.
        wait_for(lambda: reporter.cancel_seen, timeout=5, what="the heartbeat seeing the cancel")
        with pytest.raises(JobCancelled):
            reporter.update(3)
    finally:
        reporter.stop_heartbeat()


def test_memcached_going_away_does_not_break_the_task(record, settings):
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.stage("work", total=10)
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    for i in range(10):
        reporter.update(i)  # writes fail, the loop goes on
    assert reporter.flushes == 1


def test_a_run_the_reaper_took_for_lost_never_writes_over_it(record):
    from webfarm.progress.exceptions import JobEnded

    reporter = ProgressReporter(record, flush_interval=0)
    reporter.stage("work", total=10)
    reporter.update(1)

    def lose(stored: JobRecord) -> bool:
        stored.state, stored.error = "lost", "The worker running this job stopped"
        return True

    store.update(record.job, lose)  # the reaper, while this worker was stalled
    with pytest.raises(JobEnded):
        reporter.update(2)  # the stalled worker wakes up and writes its progress
    stored = store.read(record.job)
    assert stored.state == "lost" and stored.current == 1  # its write did not land
    reporter.flush()  # nor does its heartbeat's
    assert store.read(record.job).state == "lost" and reporter.ended_elsewhere


@pytest.mark.django_db
def test_a_record_memcached_lost_is_written_back_only_while_the_job_runs(record):
    from django.contrib.auth import get_user_model

    from webfarm.progress.exceptions import JobEnded
    from webfarm.progress.models import Job

    owner = get_user_model().objects.create_user("owner", password="x")
    Job.objects.create(id=record.job, owner=owner, kind="demo", state="running")
    reporter = ProgressReporter(record, flush_interval=0)
    reporter.stage("work", total=10)
    store.get_client().delete(store.record_key(record.job))  # memcached restarted
    reporter.update(3)
    assert store.read(record.job).current == 3  # still running: written back
    Job.objects.filter(pk=record.job).update(state="lost")
    store.get_client().delete(store.record_key(record.job))
    with pytest.raises(JobEnded):
        reporter.update(4)  # the run stops, and puts nothing back
    assert reporter.ended_elsewhere and store.read(record.job) is None
