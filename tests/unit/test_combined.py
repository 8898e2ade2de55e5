"""One bar for a job split in parts: the figures combined from the parts'
entries (pure logic), what a record may hold in them, and parts writing
their entries at once into one record on a real memcached."""

import json
import re
import threading
import time

import pytest
from django.contrib.auth import get_user_model

from tests.harness.roundtrips import counting, steady
from webfarm.core import backoff
from webfarm.core.client import get_client
from webfarm.progress import services, store
from webfarm.progress.countdown import PartSpec, finish_part
from webfarm.progress.exceptions import JobEnded
from webfarm.progress.parts.combined import combine, parts_share
from webfarm.progress.parts.reporter import PartReporter
from webfarm.progress.records import MAX_PARTS, CorruptRecord, JobRecord, PartProgress
from webfarm.progress.templatetags.webfarm_progress import parts_line


def _record(*parts: PartProgress, state: str = "running") -> JobRecord:
    return JobRecord(job="j0123456789abcdefghijk", owner=1, kind="k", state=state, parts=list(parts))


def test_the_bar_weighs_parts_by_size_and_fills_the_first_stages_share():
    record = _record(
        PartProgress(size=3, done=0.5, state="running", worker="w1@a", rate=0.1),
        PartProgress(size=1, state="succeeded", done=1.0),
        PartProgress(size=4, state="queued"),
    )
    combine(record, share=0.8)
    # (3 * 0.5 + 1 * 1 + 4 * 0) / 8 of the parts' 80 %.
    assert record.percent == pytest.approx(25.0)
    # Work left (80 % * (1 - 2.5 / 8) + 20 %) over the running part's rate (80 % * 3 / 8 * 0.1).
    assert record.eta_seconds == pytest.approx((0.8 * (1 - 2.5 / 8) + 0.2) / (0.8 * 3 / 8 * 0.1), abs=0.1)
    assert (record.current, record.total) == (1, 3)
    assert record.public()["parts"] == {"total": 3, "queued": 1, "running": 1, "done": 1, "workers": ["w1@a"]}


def test_parts_without_sizes_weigh_the_same_and_nothing_running_has_no_eta():
    record = _record(PartProgress(size=0, state="succeeded", done=1.0), PartProgress(size=0))
    combine(record, share=1.0)
    assert (record.percent, record.eta_seconds) == (50.0, None)


def test_the_share_is_the_first_stages_weight():
    assert parts_share([("reading", 85), ("aggregating", 5), ("writing", 10)]) == pytest.approx(0.85)
    assert parts_share([("working", 0)]) == 1.0


def test_a_record_with_parts_round_trips_compactly_and_refuses_what_it_did_not_write():
    record = _record(PartProgress(size=2, done=0.25, state="running", worker="w@h", rate=0.5, beat_at=1e9))
    raw = record.to_bytes()
    assert b'"parts":[[2,0.25,"running","w@h",0.5,1000000000.0,1]]' in raw
    assert JobRecord.from_bytes(raw) == record
    bad = [
        [2, 1.5, "running", "w", 0, None, 1],  # more than done
        [2, 0.5, "exploded", "w", 0, None, 1],
        [2, 0.5, "running", "w" * 201, 0, None, 1],
        [-1, 0.5, "running", "w", 0, None, 1],
        [2, 0.5, "running", "w", 0, None, 0],
        {"size": 2},
        [2, 0.5],
    ]
    for part in bad:
        with pytest.raises(CorruptRecord):
            JobRecord.from_bytes(raw.replace(b"[[2,0.25,", b"[" + _json(part) + b",[2,0.25,", 1))
    many = _record(*[PartProgress()] * (MAX_PARTS + 1)).to_bytes()
    with pytest.raises(CorruptRecord):
        JobRecord.from_bytes(many)


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def test_the_parts_line_says_what_runs_waits_and_where():
    record = _record(
        PartProgress(state="succeeded", done=1.0),
        PartProgress(state="running", worker="w2@b"),
        PartProgress(state="running", worker="w1@a"),
        PartProgress(state="queued"),
    )
    assert parts_line(record) == "Parts: 1 of 4 done, 2 running, 1 waiting for a worker · on w1@a, w2@b"
    assert parts_line(_record(PartProgress(state="succeeded"), state="succeeded")) == "Ran in 1 part."
    assert (
        parts_line(_record(PartProgress(state="running"), state="cancelled")) == "0 of 1 parts had finished."
    )
    assert parts_line(_record()) == "" and parts_line(None) == ""


PARTS = 8


@pytest.fixture
def split_job(transactional_db):
    owner = get_user_model().objects.create_user("splitter")
    job = services.create_job(
        owner=owner,
        kind="split",
        title="split",
        params={},
        parts=[PartSpec(size=n + 1) for n in range(PARTS)],
    )
    return job, services.begin_job(job)


def test_parts_writing_at_once_lose_no_update_and_cost_two_round_trips_each(split_job, settings):
    """Every part flushes often, all at once: memcached's cas keeps every
    part's latest figure in the one record."""
    job, record = split_job
    barrier = threading.Barrier(PARTS)
    errors: list[BaseException] = []

    def part(index: int) -> None:
        try:
            reporter = PartReporter(
                record, index=index, attempt=1, worker=f"w{index}@h", share=0.9, flush_interval=0
            )
            reporter.plan([("working", 1)])
            reporter.stage("working", total=100, message="counting")
            barrier.wait(10)
            for done in range(1, 101):
                reporter.update(done if index % 2 else done // 2)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=part, args=(n,)) for n in range(PARTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    stored = store.read(job.id)
    assert [p.done for p in stored.parts] == [0.5 if n % 2 == 0 else 1.0 for n in range(PARTS)]
    assert [p.worker for p in stored.parts] == [f"w{n}@h" for n in range(PARTS)]
    # The message line: what the part that wrote last does (the parts line counts them).
    assert re.fullmatch(rf"Part [1-{PARTS}] of {PARTS}: counting", stored.message), stored.message
    sizes = [n + 1 for n in range(PARTS)]
    expected = 0.9 * sum(s * (0.5 if n % 2 == 0 else 1.0) for n, s in enumerate(sizes)) / sum(sizes) * 100
    assert stored.percent == pytest.approx(expected, abs=0.1)
    # One update, uncontended: gets (record, cancel flag, public document), then both cas.
    with counting(settings):
        reporter = PartReporter(record, index=0, attempt=1, worker="w0@h", share=0.9, flush_interval=0)
        cost = steady(reporter.flush)
    assert (cost.round_trips, cost.queries) == (2, 0), cost


def test_a_run_given_up_for_lost_stops_at_its_next_write(split_job):
    job, record = split_job
    old = PartReporter(record, index=3, attempt=1, worker="w@old", share=1.0, flush_interval=0)
    old.stage("working", total=10)
    old.update(1)

    def again(stored: JobRecord) -> bool:  # what the reaper does to a lost part's entry
        stored.parts[3].attempt, stored.parts[3].state = 2, "queued"
        return True

    store.update(job.id, again)
    old.flush()
    with pytest.raises(JobEnded):
        old.update(2)
    assert store.read(job.id).parts[3].attempt == 2 and store.read(job.id).parts[3].state == "queued"


def test_a_part_puts_back_a_record_memcached_lost_with_the_parts_from_the_rows(split_job):
    job, record = split_job
    finish_part(job.id, 0)
    _forget(job.id)  # memcached restarted, or evicted it
    reporter = PartReporter(record, index=1, attempt=1, worker="w@h", share=1.0, flush_interval=0)
    reporter.stage("working", total=4)
    reporter.update(2)
    rebuilt = store.read(job.id)
    assert rebuilt is not None and rebuilt.state == "running"
    assert [p.state for p in rebuilt.parts[:3]] == ["succeeded", "running", "queued"]
    assert rebuilt.parts[1].done == 0.5 and time.time() - rebuilt.parts[1].beat_at < 5


def _forget(job_id: str) -> None:
    get_client().delete(store.record_key(job_id))


def test_a_lost_race_pauses_at_random_below_a_bound_that_doubles_up_to_50_ms(monkeypatch):
    bounds: list[float] = []
    monkeypatch.setattr(backoff.random, "uniform", lambda low, high: bounds.append(high) or low)
    for losses in range(1, 10):
        backoff.after_lost_race(losses)
    assert bounds == [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.05, 0.05, 0.05]


def test_an_update_that_wins_at_once_never_pauses(split_job, monkeypatch):
    job, _ = split_job
    monkeypatch.setattr(backoff, "after_lost_race", lambda losses: pytest.fail("paused"))
    assert store.update(job.id, lambda record: True).job == job.id
