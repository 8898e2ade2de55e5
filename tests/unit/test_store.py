"""Job records in memcached."""

import json

import pytest

from webfarm.progress import store
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.ids import is_valid_job_id, new_job_id, new_read_token
from webfarm.progress.records import JobRecord


def _record(**kwargs) -> JobRecord:
    return JobRecord(job=new_job_id(), owner=1, kind="demo", **kwargs)


def test_job_ids_are_128_bit_url_safe_and_checked():
    ids = {new_job_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(is_valid_job_id(i) and len(i) == 22 for i in ids)
    for bad in ["", "a" * 21, "a" * 23, "a b" + "c" * 19, "../" + "a" * 19, "é" * 22, None, 5]:
        assert not is_valid_job_id(bad)


def test_record_round_trips_and_create_refuses_a_second_record():
    record = _record(total=10, stage="reading orders")
    store.create(record)
    assert store.read(record.job) == record
    with pytest.raises(ProgressUnavailable):
        store.create(record)


def test_read_of_unknown_job_is_none():
    assert store.read(new_job_id()) is None


def test_update_applies_a_change_atomically_and_can_decline():
    record = _record()
    store.create(record)
    updated = store.update(record.job, lambda r: setattr(r, "current", 5) or True)
    assert updated.current == 5 and store.read(record.job).current == 5
    unchanged = store.update(record.job, lambda r: False)
    assert unchanged.current == 5
    assert store.update(new_job_id(), lambda r: True) is None


def test_cancel_flag():
    job = new_job_id()
    assert not store.is_cancel_requested(job)
    store.request_cancel(job)
    assert store.is_cancel_requested(job)


def test_unreachable_memcached_raises_progress_unavailable(settings):
    from tests.harness.processes import free_port

    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    with pytest.raises(ProgressUnavailable):
        store.read(new_job_id())
    with pytest.raises(ProgressUnavailable):
        store.write(_record())


def test_a_republish_from_an_older_record_never_outlives_the_newer_write():
    """A token poll that found no document puts one back from the record it
    read; a worker writes a newer record at the same moment, and its add of
    the document loses to the poll's. nginx would serve the older document
    (the bar goes back) until the next write: the writer puts its own there.
    Forced: the poll's republish runs between the writer's read and its write."""
    record = _record(state="running", percent=32.5, read_token=new_read_token())
    store.create(record)
    key = store.public_key(record.job, record.read_token)
    store.get_client().delete(key)  # gone: expired, or dark during a pool change
    polled = store.read(record.job)  # what the poll read, a moment before the write
    polled.updated_at -= 1  # (and the writer's record is a later one)

    def advance(current: JobRecord) -> bool:
        store.republish(polled)  # the poll's add lands between the writer's read and write
        current.percent = 34.5
        return True

    store.update(record.job, advance, read_token=record.read_token)
    served = json.loads(store.read_public(record.job, record.read_token))
    assert served["percent"] == 34.5 == store.read(record.job).percent
