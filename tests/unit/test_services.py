"""Job lifecycle across memcached and the database."""

import time

import pytest
from django.contrib.auth import get_user_model

from tests.harness.processes import free_port
from webfarm.core.client import get_client
from webfarm.progress import selectors, services, store
from webfarm.progress.exceptions import JobFailed, JobNotRunnable, ProgressUnavailable
from webfarm.progress.models import Job
from webfarm.progress.outcome import JobResult

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def _job(user) -> Job:
    return services.create_job(owner=user, kind="demo", title="Demo", params={"a": 1})


def test_create_records_a_queued_job_in_both_places(alice):
    job = _job(alice)
    assert Job.objects.get(pk=job.id).state == "queued"
    record = store.read(job.id)
    assert (record.state, record.owner, record.percent) == ("queued", alice.pk, 0.0)


def test_create_with_memcached_down_records_nothing(alice, settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    with pytest.raises(ProgressUnavailable):
        _job(alice)
    assert not Job.objects.exists()


def test_tracked_job_ends_succeeded_with_its_result(alice):
    job = _job(alice)
    with services.track_job(job) as tracker:
        assert store.read(job.id).state == "running"
        assert Job.objects.get(pk=job.id).state == "running"
        tracker.reporter.stage("work", total=2)
        tracker.reporter.update(2)
        tracker.result = JobResult(url="/result", summary="12 rows written")
    record = store.read(job.id)
    assert (record.state, record.percent, record.result_url) == ("succeeded", 100.0, "/result")
    assert record.message == "12 rows written"  # what the finished bar says
    row = Job.objects.get(pk=job.id)
    assert (row.state, row.result_url) == ("succeeded", "/result") and row.finished_at


def test_job_failed_shows_its_message(alice):
    job = _job(alice)
    with services.track_job(job):
        raise JobFailed("No orders in range.")
    assert store.read(job.id).error == "No orders in range."
    assert Job.objects.get(pk=job.id).state == "failed"


def test_a_crash_is_failed_with_a_reference_not_a_traceback(alice):
    job = _job(alice)
    with pytest.raises(ZeroDivisionError), services.track_job(job):
        1 / 0  # noqa: B018
    record = store.read(job.id)
    assert record.state == "failed"
    assert job.id in record.error and "ZeroDivision" not in record.error


def test_cancelled_queued_job_never_starts(alice):
    job = _job(alice)
    record = services.cancel_job(job=job)
    assert record.state == "cancelled"
    assert Job.objects.get(pk=job.id).state == "cancelled"
    with pytest.raises(JobNotRunnable):
        services.begin_job(job)
    assert Job.objects.get(pk=job.id).started_at is None


def test_cancel_of_a_running_job_only_raises_the_flag(alice):
    job = _job(alice)
    services.begin_job(job)
    record = services.cancel_job(job=job)
    assert record.state == "running" and record.cancel_requested
    assert store.is_cancel_requested(job.id)


def test_a_planted_cancel_flag_cancels_nothing(alice):
    """Anyone who can reach memcached can list job ids and write `cancel:<job>`:
    a flag that is not sealed for this job stops neither its start nor its run."""
    other = _job(alice)
    services.cancel_job(job=other)  # a real flag, sealed for another job
    real = get_client().get(store.cancel_key(other.id))
    for planted in (b"1", real):
        job = _job(alice)
        get_client().set(store.cancel_key(job.id), planted, expire=60)
        record = services.begin_job(job)
        assert record.state == "running" and not record.cancel_requested
        assert not store.is_cancel_requested(job.id)
        updated = store.update(job.id, lambda r: setattr(r, "current", 3) or True)
        assert updated.current == 3 and not updated.cancel_requested
        assert Job.objects.get(pk=job.id).state == "running"


def test_ended_jobs_cannot_be_cancelled_or_restarted(alice):
    job = _job(alice)
    with services.track_job(job):
        pass
    job.refresh_from_db()
    assert services.cancel_job(job=job).state == "succeeded"
    with pytest.raises(JobNotRunnable):
        services.begin_job(job)


def test_progress_falls_back_to_the_database_when_the_record_is_gone(alice):
    job = _job(alice)
    with services.track_job(job):
        pass
    assert get_client().delete(store.record_key(job.id))
    record = selectors.job_record(job_id=job.id, owner_id=alice.pk)
    assert record.state == "succeeded"


def test_a_silent_running_record_defers_to_a_final_database_row(alice, settings):
    job = _job(alice)
    services.begin_job(job)
    stale = store.read(job.id)
    stale.heartbeat_at = stale.updated_at = time.time() - 3600
    store.write(stale)
    Job.objects.filter(pk=job.id).update(state="failed", error="worker gone")
    record = selectors.job_record(job_id=job.id, owner_id=alice.pk)
    assert (record.state, record.error) == ("failed", "worker gone")


def test_final_state_is_served_from_the_database_when_memcached_is_down(alice, settings):
    job = _job(alice)
    with services.track_job(job):
        pass
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    assert selectors.job_record(job_id=job.id, owner_id=alice.pk).state == "succeeded"
    running = Job.objects.create(owner=alice, kind="demo", state="running")
    with pytest.raises(ProgressUnavailable):
        selectors.job_record(job_id=running.id, owner_id=alice.pk)


def test_a_heartbeat_takes_a_vanished_slot_again_only_while_its_job_runs(alice):
    """A job split in parts beats in every part: a part still beating must
    not take back the slots that another part's end released a moment ago."""
    from webfarm.core.client import server_client
    from webfarm.core.slots import Lease
    from webfarm.progress.states import State

    key = "slot:beat-test:0"
    job = services.create_job(owner=alice, kind="demo", title="Demo", params={}, slots=[key])
    record = services.begin_job(job)
    renew = services.slots_renewer(Lease(holder=job.id, ttl=30, keys=[key]))
    slot = server_client("slot:beat-test")
    slot.delete(key)  # memcached restarted under a running job
    renew()
    assert slot.get(key) == job.id.encode()
    assert services.finish_job(record, State.FAILED, ending=State.RUNNING, error="Part 2 failed.")
    assert slot.get(key) is None
    renew()  # a part's heartbeat that has not yet seen the end
    assert slot.get(key) is None


def test_a_state_change_moves_a_row_only_from_the_state_it_comes_from(alice):
    """Job.objects.move: one conditional UPDATE; the row decides a race."""
    job = Job.objects.create(owner=alice, kind="demo", state="running")
    jobs = Job.objects.filter(pk=job.id)
    assert jobs.move(source="queued", target="running") == 0  # a second delivery starts nothing
    assert jobs.move(source="running", target="lost", error="silent") == 1
    assert jobs.move(source=("queued", "running"), target="succeeded") == 0  # the reaper's lost stands
    job.refresh_from_db()
    assert (job.state, job.error) == ("lost", "silent")
    assert jobs.beat() == 0  # only a running row takes a heartbeat
    running = Job.objects.create(owner=alice, kind="demo", state="running")
    assert Job.objects.filter(pk=running.id).beat() == 1
    running.refresh_from_db()
    assert running.beat_at is not None
