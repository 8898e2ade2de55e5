"""Farm-wide limits in memcached: slots, leases, refusals, and the views that use them."""

import time
from collections.abc import Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.harness import full
from tests.harness.processes import free_port, memcached, wait_for
from tests.harness.together import run_together
from tests.project.shop.jobs import count
from webfarm.core import counters, slots
from webfarm.core.client import get_client, reset_client
from webfarm.core.slots import Lease, LimitReached, SlotsTaken, SlotsUnavailable, acquire
from webfarm.progress import services as progress_services
from webfarm.progress import store
from webfarm.progress.exceptions import ProgressUnavailable
from webfarm.progress.launching.admission import StartRefused, start_job
from webfarm.progress.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.PROGRESS = {**settings.PROGRESS, "JOBS_PER_USER": 2, "JOBS_PER_KIND": 3}
    settings.LIMITS = {**settings.LIMITS, "PAUSE": 0.001}
    counters.forget_known()


# -- slots ----------------------------------------------------------------------------


def test_n_slots_go_to_n_holders_and_the_next_is_refused_with_who_holds_them():
    leases = [acquire([("reports", 2)], f"job{i}", ttl=60) for i in range(2)]
    with pytest.raises(LimitReached) as refused:
        acquire([("reports", 2)], "job2", ttl=60)
    assert sorted(refused.value.holders) == ["job0", "job1"]
    leases[0].release()
    assert acquire([("reports", 2)], "job2", ttl=60).keys


def test_all_scopes_or_none():
    acquire([("kind", 1)], "other", ttl=60)
    with pytest.raises(LimitReached) as refused:
        acquire([("user", 5), ("kind", 1)], "mine", ttl=60)
    assert refused.value.scope == "kind"
    assert slots.holders("user", 5) == []  # the user slot taken first was given back


def test_a_crashed_holder_loses_its_slot_when_the_lease_runs_out():
    acquire([("crash", 1)], "dead", ttl=1)  # never renewed, never released
    wait_for(lambda: slots.holders("crash", 1) == [], timeout=5, what="the lease to run out")
    assert acquire([("crash", 1)], "next", ttl=60).keys


def test_renewing_keeps_the_slot_and_takes_it_back_after_memcached_lost_it():
    lease = acquire([("renew", 1)], "me", ttl=2)
    slots._client(lease.keys[0]).delete(lease.keys[0])  # memcached restarted
    lease.renew()
    assert slots.holders("renew", 1) == ["me"]


def test_release_only_frees_what_is_still_ours():
    lease = acquire([("mine", 1)], "me", ttl=60)
    lease.ours_until[lease.keys[0]] = 0.0  # held past half its lease: it may have run out...
    slots._client(lease.keys[0]).set(lease.keys[0], b"someone-else")  # ...and been retaken
    lease.release()
    assert slots.holders("mine", 1) == ["someone-else"]


@pytest.mark.django_db
def test_a_young_slot_is_released_without_waiting_for_an_answer(settings):
    from tests.harness.roundtrips import counting, measure

    with counting(settings):
        lease = acquire([("young", 1)], "me", ttl=60)
        released = measure(lease.release)
    assert released.round_trips - released.connects == 0 and released.verbs == {"delete": 1}
    assert slots.holders("young", 1) == []


def test_transfer_hands_slots_over_without_a_gap():
    lease = acquire([("hand", 1)], "lost-job", ttl=60)
    again = lease.transfer("retry-job", ttl=60)
    assert slots.holders("hand", 1) == ["retry-job"]
    again.release()
    assert slots.holders("hand", 1) == []


def test_memcached_down_is_a_clear_error_not_an_unlimited_run(settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    with pytest.raises(SlotsUnavailable):
        acquire([("x", 1)], "me", ttl=60)
    Lease(holder="me", ttl=5, keys=["slot:x:0"]).renew()  # never raises
    Lease(holder="me", ttl=5, keys=["slot:x:0"]).release()


def test_many_processes_racing_for_three_slots_get_exactly_three(
    memcached_server, progress_on_real_memcached
):
    answers = run_together(
        "tests.harness.slot_worker",
        "1",
        count=12,
        servers=memcached_server,
        namespace=progress_on_real_memcached,
    )
    assert sorted(answers) == ["refused"] * 9 + ["took"] * 3
    assert len(slots.holders("race", 3)) == 3


# -- job starts ---------------------------------------------------------------------------


def _params() -> dict:
    return {"steps": 7}


START = {"steps": 7}
JSON = {"HTTP_ACCEPT": "application/json"}


def test_a_user_over_the_limit_is_refused_with_when_to_try_again(alice):
    first = start_job(user=alice, job_type=count, params=_params())
    start_job(user=alice, job_type=count, params=_params())
    record = store.read(first.id)
    record.eta_seconds = 12.3
    store.write(record)
    with pytest.raises(StartRefused) as refused:
        start_job(user=alice, job_type=count, params=_params())
    assert refused.value.reason == "jobs-user"
    assert refused.value.retry_after == 13  # the soonest ETA of the jobs in the way
    assert "You already have 2 counts" in refused.value.message
    assert Job.objects.count() == 2  # nothing recorded for the refused start


def test_a_racer_taking_the_chosen_slot_leaves_nothing_of_the_start_behind(
    alice, monkeypatch, memcached_server, progress_on_real_memcached
):
    """The slots are taken in the same round trip as the job's record. A
    racer that takes the slot this start chose between its look and that
    round trip: the record, its public document and the row are undone, the
    slot taken in the other scope is given back, and the start looks again."""
    from tests.harness import keyspace
    from webfarm.progress.launching import admission as launch

    looks = []
    real_look = launch.look

    def look_then_race(scopes):
        held = real_look(scopes)
        looks.append(held)
        if len(looks) == 1:  # another node takes both of alice's slots right after this look
            user_scope = scopes[0][0]
            for key in slots.slot_keys(user_scope, 2):
                slots._client(key).set(key, b"racer", expire=60)
        return held

    monkeypatch.setattr(launch, "look", look_then_race)
    monkeypatch.setattr(launch, "new_job_id", lambda: "R" * 22)
    with pytest.raises(StartRefused) as refused:
        start_job(user=alice, job_type=count, params=_params())
    assert refused.value.reason == "jobs-user" and len(looks) == 2  # looked again, then refused
    assert not Job.objects.filter(pk="R" * 22).exists()
    assert store.read("R" * 22) is None
    assert not keyspace.items(memcached_server, f"{progress_on_real_memcached}:pub:{'R' * 22}")
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == ["racer", "racer"]
    assert slots.holders("jobs-kind:count", 3) == []  # the kind slot it took was given back


def test_a_start_that_loses_every_race_is_refused_by_the_limit_in_its_way(alice, monkeypatch):
    """Racers take alice's last free slot just before each of this start's
    tries: the refusal names her limit (the one the racers met), not the
    job type's, which has room to spare (a flood once said "already being
    run 50 times" to a user at her own limit)."""
    from webfarm.progress.launching import admission as launch

    start_job(user=alice, job_type=count, params=_params())  # one of her 2 slots held

    def lose_the_race(**kwargs):
        raise SlotsTaken("a racer took the slot first")

    monkeypatch.setattr(launch.services, "create_job", lose_the_race)
    with pytest.raises(StartRefused) as refused:
        start_job(user=alice, job_type=count, params=_params())
    assert refused.value.reason == "jobs-user", refused.value.message
    assert "You already have" in refused.value.message


def test_a_job_type_over_its_farm_limit_is_refused(alice):
    users = [get_user_model().objects.create_user(f"u{i}", password="x") for i in range(4)]
    for user in users[:3]:
        start_job(user=user, job_type=count, params=_params())
    with pytest.raises(StartRefused) as refused:
        start_job(user=users[3], job_type=count, params=_params())
    assert refused.value.reason == "jobs-kind" and "3 times" in refused.value.message


def test_slots_come_back_when_jobs_end_however_they_end(alice):
    cancelled = start_job(user=alice, job_type=count, params=_params())
    progress_services.cancel_job(job=cancelled)  # queued: ends at once
    finished = start_job(user=alice, job_type=count, params=_params())
    with progress_services.track_job(finished):
        pass
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == []
    assert slots.holders("jobs-kind:count", 3) == []


def test_refused_starts_answer_503_json_or_the_form_again_and_are_counted_and_logged(
    alice, caplog, monkeypatch
):
    from webfarm.core import refusals

    monkeypatch.setattr(refusals, "LOG_EVERY", 0.5)
    client = Client()
    client.force_login(alice)
    for _ in range(2):
        assert client.post("/start/count/", START).status_code == 302
    ajax = client.post("/start/count/", START, HTTP_ACCEPT="application/json")
    assert ajax.status_code == 503 and int(ajax["Retry-After"]) >= 1
    assert "You already have 2 counts" in ajax.json()["error"]
    page = client.post("/start/count/", START)
    assert page.status_code == 503 and page["Retry-After"]
    html = page.content.decode()
    assert "You already have 2 counts" in html and 'data-retry-after="' in html and 'value="7"' in html
    # A flood is logged as a line a second per reason, saying how many it stands for.
    time.sleep(0.5)
    assert client.post("/start/count/", START, **JSON).status_code == 503
    refused = [r for r in caplog.records if r.name == "activity" and getattr(r, "event", "") == "refused"]
    assert [(r.reason, r.status, r.also_refused) for r in refused] == [
        ("jobs-user", 503, 0),
        ("jobs-user", 503, 1),
    ]
    counters.flush_soon()  # refusals are tallied in the process, sent once a second
    assert int(get_client().get("c:refused|reason=jobs-user")) == 3


def test_with_memcached_down_a_start_is_refused_clearly(alice, settings):
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    client = Client()
    client.force_login(alice)
    response = client.post("/start/count/", START, HTTP_ACCEPT="application/json")
    assert response.status_code == 503 and "unavailable" in response.json()["error"]
    assert not Job.objects.exists()


# -- any view -------------------------------------------------------------------------------


def _client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_downloads_are_limited_per_user_while_they_stream(alice, settings):
    settings.LIMITS = {**settings.LIMITS, "DOWNLOADS_PER_USER": 1}
    client = _client_of(alice)
    first = client.get("/download/3000000/")
    assert first.status_code == 200
    chunks = iter(first.streaming_content)
    next(chunks, None)  # streaming: the slot is held
    second = client.get("/download/3000000/", HTTP_ACCEPT="application/json")
    assert (
        second.status_code == 503 and second["Retry-After"] and "Too many downloads" in second.json()["error"]
    )
    page = client.get("/download/3000000/")  # a browser: a page that counts down
    assert page.status_code == 503 and b"Busy right now" in page.content
    assert b"data-retry-after" in page.content
    first.close()  # the last byte sent (or the client gone): the slot is free
    assert client.get("/download/3000000/").status_code == 200


def test_a_download_closed_before_its_first_chunk_frees_its_slot(alice, settings):
    """The client went away at once: closing the response gives the slot back."""
    settings.LIMITS = {**settings.LIMITS, "DOWNLOADS_PER_USER": 1}
    client = _client_of(alice)
    first = client.get("/download/100000/")
    assert client.get("/download/100000/").status_code == 503  # held while open
    first.close()  # not one chunk read
    assert client.get("/download/100000/").status_code == 200


def test_a_flood_of_refusals_stops_asking_memcached_and_a_freed_slot_is_taken_soon(alice, settings):
    from tests.harness.roundtrips import counting, measure
    from webfarm.progress.launching.admission import FLOOD_WINDOW

    bob = get_user_model().objects.create_user("bob", password="x")
    held = [start_job(user=user, job_type=count, params=_params()) for user in (bob, bob)]
    held.append(start_job(user=alice, job_type=count, params=_params()))
    carol = get_user_model().objects.create_user("carol", password="x")
    client = Client()
    client.force_login(carol)
    client.cookies["csrftoken"] = "c" * 32

    def start():
        return client.post("/start/count/", START, **JSON, HTTP_X_CSRFTOKEN="c" * 32)

    with counting(settings):
        looked = [measure(start) for _ in range(2)]  # the second refusal within the window: a flood
        flooded = measure(start)
        page = client.post("/start/count/", START, HTTP_X_CSRFTOKEN="c" * 32)
    assert {c.result.status_code for c in [*looked, flooded]} == {503}
    # The session, the user and the look; in the flood the session alone (the user is not read).
    # (A connect is the pool growing while a background thread holds a connection: not the request's.)
    assert looked[1].round_trips - looked[1].connects == 3
    assert flooded.round_trips - flooded.connects == 1 and flooded.queries == 0
    assert "already being run 3 times" in flooded.result.json()["error"]
    assert page.status_code == 503 and b'value="7"' in page.content  # browsers: the form again
    progress_services.cancel_job(job=held[0])  # a slot comes free
    accepted = wait_for(lambda: start().status_code == 202, timeout=FLOOD_WINDOW + 2, what="the freed slot")
    assert accepted


def test_a_user_who_cancels_and_starts_again_at_once_is_never_refused_by_memory(alice):
    """A flood against a user's own limit is looked at every time: the
    user's next start after a cancel goes through at once."""
    jobs = [start_job(user=alice, job_type=count, params=_params()) for _ in range(2)]
    client = Client()
    client.force_login(alice)
    for _ in range(5):
        assert client.post("/start/count/", START, **JSON).status_code == 503
    progress_services.cancel_job(job=jobs[0])
    assert client.post("/start/count/", START, **JSON).status_code == 202


@pytest.fixture
def small_full_memcached(tmp_path, settings) -> Iterator[str]:
    """A memcached of 2 MB run with -M (it refuses what it has no room for),
    as the progress app's."""
    process, address = memcached(tmp_path, memory_mb=2, extra=["-M"])
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [address]}
    reset_client()
    yield address
    process.stop()
    reset_client()


def test_a_full_memcached_refusing_the_record_leaves_no_slot_taken(alice, small_full_memcached):
    """Found by the chaos run (bench/chaos, a full memcached): the slots were
    stored in the record's round trip and the record refused (-M), and the
    slots stayed held for QUEUED_LEASE, refusing the user's next starts for
    ten minutes."""
    get_client().set("small", b"s" * 40)  # a slot's slab class keeps room: it has a page of its own
    # Every class a record or its public document could use, full.
    full.fill_sizes(small_full_memcached, range(250, 8000, 50))
    with pytest.raises(ProgressUnavailable):
        start_job(user=alice, job_type=count, params=_params())
    assert slots.holders(f"jobs-user:{alice.pk}", 2) == []
    assert slots.holders("jobs-kind:count", 3) == []
    assert not Job.objects.exists()


def test_a_full_memcached_refusing_a_slot_says_so_and_holds_none(small_full_memcached):
    first_of_size = full.fill_sizes(small_full_memcached, range(1, 200, 8))  # the class of a slot, full
    with pytest.raises(SlotsUnavailable, match="memcached full"):
        acquire([("a", 2), ("b", 2)], "me", ttl=60)
    # Room for one item in each class: one slot is taken, the other refused,
    # and the one taken is given back with the refusal.
    full.empty(small_full_memcached, first_of_size)
    with pytest.raises(SlotsUnavailable, match="memcached full"):
        acquire([("a", 2), ("b", 2)], "me", ttl=60)
    assert slots.holders("a", 2) == [] and slots.holders("b", 2) == []
    assert acquire([("a", 2)], "me", ttl=60).keys  # the room it gave back
