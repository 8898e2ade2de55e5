"""Polls on a real memcached: votes through the queue, exactly once into the
database, a database fallback, and what makes voting twice hard."""

import json
import time
from dataclasses import replace

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from demofarm.polls import services, snapshot, totals
from demofarm.polls.models import Poll, Vote
from tests.harness.processes import free_port
from webfarm.core.client import get_client
from webfarm.core.memo import forget
from webfarm.queues.queue import Queue

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def quick_queue(settings):
    settings.QUEUES = {**settings.QUEUES, "VISIBILITY_TIMEOUT": 1, "RECOVER_INTERVAL": 0.0}


@pytest.fixture
def poll() -> Poll:
    poll = Poll.objects.create(question="Tabs or spaces?")
    for position, text in enumerate(["Tabs", "Spaces", "Both"]):
        poll.choices.create(text=text, position=position)
    return poll


def _user_client(name: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user(name, password="x"))
    return client


def _choice(poll: Poll, n: int) -> int:
    return list(poll.choices.all())[n].id


def _db_totals(poll: Poll) -> list[int]:
    return list(totals.db_totals(poll.id).values())


def test_a_vote_goes_through_memcached_and_lands_in_the_database_once(poll):
    alice = _user_client("alice")
    response = alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON)
    assert response.status_code == 200 and response.json() == {"accepted": True, "via": "queue"}
    assert not Vote.objects.exists()  # the request path did not write the database
    again = alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    assert again.status_code == 409 and "already voted" in again.json()["error"]
    assert services.flush_all()["stored"] == 1
    assert services.flush_all()["stored"] == 0
    assert _db_totals(poll) == [0, 1, 0]
    results = alice.get(f"/polls/{poll.id}/results.json").json()
    assert results["live"] and [c["votes"] for c in results["choices"]] == [0, 1, 0]


def test_a_flush_interrupted_between_writing_and_acknowledging_stores_nothing_twice(poll, monkeypatch):
    for i in range(30):
        _user_client(f"v{i}").post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, i % 3)}, **JSON)

    def killed(self, receipts):
        raise RuntimeError("flusher killed after writing, before acknowledging")

    monkeypatch.setattr(Queue, "ack_many", killed)
    with pytest.raises(RuntimeError):
        services.flush()
    assert Vote.objects.count() == 30
    monkeypatch.undo()
    # The votes come back once their claims expire; written again, stored once.
    deadline = time.monotonic() + 10  # poll with a deadline: redelivery after the 1 s visibility
    while Queue(services.get_config()["QUEUE"]).stats()["acked"] < 30 and time.monotonic() < deadline:
        services.flush()
    assert Vote.objects.count() == 30 and _db_totals(poll) == [10, 10, 10]


def test_with_memcached_away_votes_go_straight_to_the_database(poll, settings, memcached_server):
    alice = _user_client("alice")
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    response = alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 2)}, **JSON)
    assert response.status_code == 200 and response.json()["via"] == "direct"
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 409
    results = alice.get(f"/polls/{poll.id}/results.json").json()
    assert not results["live"] and results["votes"] == 1  # from the database meanwhile
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [memcached_server]}
    done = services.flush_all()
    assert done["rebuilt"] == 1  # the running totals come from the database
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 409
    assert _db_totals(poll) == [0, 0, 1]
    assert [c["votes"] for c in alice.get(f"/polls/{poll.id}/results.json").json()["choices"]] == [0, 0, 1]


def test_running_totals_rebuild_from_the_database_after_memcached_loses_them(poll):
    for i in range(6):
        _user_client(f"v{i}").post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, i % 2)}, **JSON)
    services.flush_all()
    client = get_client()
    epoch = client.get(totals.built_key(poll.id)).decode()
    for choice in poll.choices.all():
        client.delete(totals.total_key(poll.id, epoch, choice.id))
    client.delete(totals.built_key(poll.id))  # as a restart would
    assert Client().get(f"/polls/{poll.id}/results.json").json()["live"] is False
    assert services.flush_all()["rebuilt"] == 1
    results = Client().get(f"/polls/{poll.id}/results.json").json()
    assert results["live"] and [c["votes"] for c in results["choices"]] == [3, 3, 0]


def test_a_vote_cast_while_totals_are_rebuilt_is_counted_once(poll):
    for i in range(4):
        _user_client(f"v{i}").post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    services.flush_all()
    client = get_client()
    client.delete(totals.built_key(poll.id))  # the totals are lost...
    late = _user_client("late").post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    assert late.status_code == 200  # ...and this vote, still queued, counted nowhere
    services.rebuild_totals(poll)  # counts the database: 4
    fresh = _user_client("early").post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON)
    assert fresh.status_code == 200  # counted in the new totals as it was cast
    done = services.flush_all()
    assert done == {"stored": 2, "counted": 1, "rebuilt": 0}
    results = Client().get(f"/polls/{poll.id}/results.json").json()
    assert results["live"] and [c["votes"] for c in results["choices"]] == [5, 1, 0] == _db_totals(poll)
    assert services.flush_all() == {"stored": 0, "counted": 0, "rebuilt": 0}


def test_a_voter_whose_marker_memcached_lost_still_cannot_vote_twice(poll):
    alice = _user_client("alice")
    alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    services.flush_all()
    get_client().flush_all()  # memcached restarted: markers and totals gone
    again = alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON)
    assert again.status_code == 409  # the database knew, until the markers are rebuilt
    assert services.flush_all()["rebuilt"] == 1
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON).status_code == 409
    assert _db_totals(poll) == [1, 0, 0]


def test_anonymous_voters_are_known_by_a_signed_cookie_and_limited_per_address(poll, settings):
    settings.POLLS = {**settings.POLLS, "ANONYMOUS_PER_ADDRESS": 4}  # attempts, refused ones too
    visitor = Client()
    first = visitor.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    assert first.status_code == 200 and "poll_voter" in first.cookies
    # The browser's own record of its vote answers at once, without memcached (no attempt counted)...
    assert visitor.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 409
    # ...and without it, the voter's marker in memcached does (an attempt).
    del visitor.cookies["poll_voted"]
    assert visitor.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 409
    forged = Client()
    forged.cookies["poll_voter"] = "someone-else"  # unsigned: ignored, a new voter id
    assert forged.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON).status_code == 200
    assert Client().post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON).status_code == 200
    over = Client().post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON)
    assert over.status_code == 429 and "Too many votes" in over.json()["error"]


def test_closed_polls_foreign_choices_and_bad_ids_are_clear_4xx(poll):
    alice = _user_client("alice")
    other = Poll.objects.create(question="Other")
    foreign = other.choices.create(text="x").id
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": foreign}, **JSON).status_code == 400
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": "x" * 5000}, **JSON).status_code == 400
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": "9" * 40}, **JSON).status_code == 400
    assert alice.get("/polls/99999999999999999999999/").status_code == 404
    assert alice.post("/polls/99999999999999999999999/vote/", {"choice": 1}, **JSON).status_code == 404
    poll.ends_at = timezone.now()
    poll.save()  # as the admin does: every node forgets the poll it had cached
    closed = alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    assert closed.status_code == 403 and "closed" in closed.json()["error"]


def test_a_poll_another_node_closed_refuses_votes_here_at_once(poll):
    """A vote starts from this process's memory of the poll, and its own
    checks read the poll again: a poll closed on another node (whose signal
    forgot the farm's copy, not this process's memory) refuses the next
    vote here, undoes the voter's marker and counts nothing."""
    services.flush_all()
    alice, bob = _user_client("alice"), _user_client("bob")
    choice = _choice(poll, 0)
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON).status_code == 200
    # Another node closes it: the row and the farm's copy change, this process's memory does not.
    Poll.objects.filter(pk=poll.id).update(ends_at=timezone.now())
    forget(f"polls:{poll.id}:info")
    assert snapshot.remembered(poll.id).accepts_votes()
    closed = bob.post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON)
    assert closed.status_code == 403 and "closed" in closed.json()["error"]
    assert not snapshot.remembered(poll.id).accepts_votes()  # the read put it right
    # Reopened: bob's refused vote left no marker behind, and counted nowhere.
    Poll.objects.filter(pk=poll.id).update(ends_at=None)
    forget(f"polls:{poll.id}:info")
    again = bob.post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON)
    assert again.status_code == 200
    assert services.flush_all()["stored"] == 2 and _db_totals(poll) == [2, 0, 0]
    live = bob.get(f"/polls/{poll.id}/results.json").json()
    assert [c["votes"] for c in live["choices"]] == [2, 0, 0]
    # Deleted elsewhere: a 404, and nothing kept of it.
    Poll.objects.filter(pk=poll.id).delete()
    forget(f"polls:{poll.id}:info")
    gone = _user_client("carol").post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON)
    assert gone.status_code == 404


def test_a_poll_planted_in_memcached_is_not_believed_by_a_vote(poll):
    """The vote's own read of the poll meets a value someone else put there
    (closing the poll, or opening a closed one): it is refused, the poll is
    read from the database and put back, and the vote is judged by that."""
    services.flush_all()
    choice = _choice(poll, 0)

    def vote(name: str) -> object:
        return _user_client(name).post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON)

    assert vote("alice").status_code == 200
    planted = b'{"v": {"id": %d, "question": "x", "is_open": false, "ends_at": null, "choices": []}}'
    planted %= poll.id
    get_client().set(snapshot.memo_key(poll.id), planted)
    assert vote("bob").status_code == 200
    assert get_client().get(snapshot.memo_key(poll.id)) != planted  # replaced by the database's
    # A closed poll that a planted value calls open stays closed.
    poll.refresh_from_db()
    poll.is_open = False
    poll.save(update_fields=["is_open"])
    forget(f"polls:{poll.id}:info")
    assert vote("carol").status_code == 403
    opened = planted.replace(b"false", b"true").replace(b"[]", b'[[%d, "A"]]' % choice)
    get_client().set(snapshot.memo_key(poll.id), opened)
    dave = vote("dave")
    assert dave.status_code == 403 and "closed" in dave.json()["error"]
    assert services.flush_all()["stored"] == 2


def test_a_vote_cast_on_an_old_copy_of_a_closed_poll_is_not_stored(poll):
    """A node believed the poll open after it closed (an old copy written back
    into memcached, or its own memory): the vote was accepted there, but the
    flusher asks the database when the poll closed and stores only the votes
    cast before."""
    services.flush_all()
    choice = _choice(poll, 0)
    before = services.new_vote(_ballot(poll, choice, "u:1"))
    Queue(services.get_config()["QUEUE"]).put(json.dumps(before).encode())
    poll.is_open = False
    poll.save()
    assert poll.closed_at is not None
    still_open = snapshot.poll_info_from_database(poll.id)
    after = services.new_vote(_ballot(poll, choice, "u:2", info=replace(still_open, is_open=True)))
    Queue(services.get_config()["QUEUE"]).put(json.dumps(after).encode())
    assert services.flush_all()["stored"] == 1
    assert [vote.id for vote in poll.votes.all()] == [before["id"]]
    # Acknowledged, not left to be delivered again or buried.
    assert services.flush_all()["stored"] == 0
    assert Queue(services.get_config()["QUEUE"]).stats()["dead_letters"] == 0


def _ballot(poll: Poll, choice: int, voter: str, info=None) -> "services.Ballot":
    info = info or snapshot.poll_info_from_database(poll.id)
    return services.Ballot(poll=info, choice_id=choice, voter=voter, user_id=None, address=None)


def test_an_anonymous_vote_does_not_touch_the_database(poll, django_assert_num_queries):
    services.flush_all()  # the flusher makes a new poll's running totals (beat: within 2 s)
    visitor = Client()
    visitor.get(f"/polls/{poll.id}/")  # the poll is cached from here on
    choice = _choice(poll, 2)
    with django_assert_num_queries(0):
        response = visitor.post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON)
        assert response.status_code == 200 and response.json()["via"] == "queue"
        assert visitor.get(f"/polls/{poll.id}/results.json").status_code == 200
    poll.choices.create(text="Neither", position=9)  # a change reaches the cached poll at once
    choices = visitor.get(f"/polls/{poll.id}/results.json").json()["choices"]
    assert choices[-1]["text"] == "Neither"


def test_votes_are_csrf_protected_and_the_page_shows_live_bars(poll):
    strict = Client(enforce_csrf_checks=True)
    assert strict.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}).status_code == 403
    page = strict.get(f"/polls/{poll.id}/")
    assert (
        page.status_code == 200
        and b'role="progressbar"' in page.content
        and b"data-results-url" in page.content
    )
    token = page.cookies["csrftoken"].value
    voted = strict.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0), "csrfmiddlewaretoken": token})
    assert voted.status_code == 302 and voted["Location"].endswith("?voted=1")
    results = strict.get(f"/polls/{poll.id}/results.json")
    again = strict.get(f"/polls/{poll.id}/results.json", HTTP_IF_NONE_MATCH=results["ETag"])
    assert again.status_code == 304


def test_behind_a_trusted_balancer_the_address_is_the_one_it_forwarded(poll, settings):
    settings.POLLS = {**settings.POLLS, "ANONYMOUS_PER_ADDRESS": 1}
    settings.TRUSTED_PROXIES = ["127.0.0.1"]

    def vote(remote: str, forwarded: str | None) -> int:
        extra = {"REMOTE_ADDR": remote, **({"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {})}
        response = Client().post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON, **extra)
        return response.status_code

    # Two clients behind the balancer: one vote each, not one between them.
    assert vote("127.0.0.1", "203.0.113.7") == 200
    assert vote("127.0.0.1", "203.0.113.8") == 200
    # A client's own X-Forwarded-For entry is not believed: the balancer's last one is.
    assert vote("127.0.0.1", "198.51.100.1, 203.0.113.7") == 429
    # Nor is the header from anyone but a trusted balancer.
    assert vote("192.0.2.50", "203.0.113.9") == 200
    assert vote("192.0.2.50", "203.0.113.10") == 429
    assert {v.address for v in _flushed(poll)} >= {"203.0.113.7", "203.0.113.8", "192.0.2.50"}


def _flushed(poll: Poll) -> list[Vote]:
    services.flush_all()
    return list(poll.votes.all())


def test_malformed_votes_go_to_the_dead_letters_and_the_rest_are_stored(poll):
    import json

    from webfarm.queues.queue import DeadLetter

    services.flush_all()  # the running totals exist
    alice = _user_client("alice")
    assert alice.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 200
    other = Poll.objects.create(question="Other")
    foreign = other.choices.create(text="x").id
    base = {
        "id": "A" * 22,
        "poll": poll.id,
        "choice": _choice(poll, 1),
        "user": None,
        "voter": "a:" + "b" * 22,
        "address": None,
        "at": time.time(),
        "counted_in": None,
    }
    malformed = [
        b"[]",
        json.dumps({**base, "poll": str(poll.id)}).encode(),  # a poll id that is a string
        json.dumps({k: v for k, v in base.items() if k != "voter"}).encode(),  # missing fields
        json.dumps({**base, "at": 1e20}).encode(),
        json.dumps({**base, "choice": foreign}).encode(),  # a choice of another poll
        json.dumps({**base, "address": "not an address"}).encode(),
        b"{" * 5000,
    ]
    queue = Queue("poll-votes")
    queue.put_many(malformed)
    assert Client().post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 2)}, **JSON).status_code == 200
    assert services.flush_all()["stored"] == 2  # alice's and the anonymous vote, behind the bad ones
    assert services.flush_all()["stored"] == 0
    assert _db_totals(poll) == [1, 0, 1]
    dead = [DeadLetter.from_json(m.body) for m in queue.dead_letters().peek(20)]
    assert sorted(letter.body for letter in dead) == sorted(malformed)
    results = Client().get(f"/polls/{poll.id}/results.json").json()
    assert results["live"] and [c["votes"] for c in results["choices"]] == [1, 0, 1]


def test_a_second_vote_after_the_marker_lapsed_is_dropped_and_uncounted(poll, settings):
    services.flush_all()
    first = Client()
    assert first.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON).status_code == 200
    services.flush_all()
    # Its marker lapses (MARKER_TTL); the same voter, without the browser's record, votes again.
    get_client().delete(services._marker(poll.id, services.Vote.objects.get().voter))
    del first.cookies["poll_voted"]
    assert first.post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 1)}, **JSON).status_code == 200
    live = Client().get(f"/polls/{poll.id}/results.json").json()
    assert [c["votes"] for c in live["choices"]] == [1, 1, 0]  # counted as cast...
    assert services.flush_all()["stored"] == 0  # ...but the database keeps one vote per voter
    assert _db_totals(poll) == [1, 0, 0]
    live = Client().get(f"/polls/{poll.id}/results.json").json()
    assert [c["votes"] for c in live["choices"]] == [1, 0, 0]  # and the running total follows


def test_vote_markers_and_rate_keys_expire(poll, memcached_server, progress_on_real_memcached, settings):
    from tests.harness import keyspace

    services.flush_all()
    Client().post(f"/polls/{poll.id}/vote/", {"choice": _choice(poll, 0)}, **JSON)
    items = keyspace.items(memcached_server, f"{progress_on_real_memcached}:poll:")
    markers = [i for i in items if ":voted:" in i.key]
    rates = [i for i in items if ":rate:" in i.key]
    assert settings.POLLS["MARKER_TTL"] <= 24 * 3600
    assert len(markers) == 1 and 0 < markers[0].ttl() <= settings.POLLS["MARKER_TTL"] + keyspace.CLOCK_SLACK
    assert len(rates) == 1 and 0 < rates[0].ttl() <= 3600 + keyspace.CLOCK_SLACK
    assert all(i.expires > 0 for i in items)  # totals and their epoch too: nothing is kept for good
