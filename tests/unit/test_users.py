"""Users cached in memcached (webfarm.core.users): no query per request, and still
every change to a user is seen at once on every node, and nothing anyone
plants in memcached makes a user more than they are."""

import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from webfarm.core import users
from webfarm.core.client import get_client
from webfarm.core.seal import seal
from webfarm.progress import services

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="first-password")


@pytest.fixture
def bob_job():
    bob = get_user_model().objects.create_user("bob", password="x")
    return services.create_job(owner=bob, kind="demo", title="Bob's", params={})


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _cached(user) -> bytes | None:
    return get_client().get(users.cache_key(user.pk))


def test_a_cached_user_answers_requests_without_a_query(alice, django_assert_num_queries):
    client = _client(alice)
    job = services.create_job(owner=alice, kind="demo", title="Mine", params={})
    assert client.get(f"/progress/{job.id}/").status_code == 200  # reads and caches alice
    assert _cached(alice) is not None
    with django_assert_num_queries(0):
        assert client.get(f"/progress/{job.id}/").status_code == 200


def test_the_password_hash_never_reaches_memcached(alice):
    client = _client(alice)
    client.get("/jobs/")
    raw = _cached(alice)
    assert raw is not None and alice.password.encode() not in raw
    assert b"first-password" not in raw and b"pbkdf2" not in raw and b"md5" not in raw


def test_a_password_changed_on_any_node_logs_the_old_sessions_out_at_once(alice):
    client = _client(alice)
    assert client.get("/jobs/").status_code == 200
    assert _cached(alice) is not None
    # Another node (any process on the farm) changes the password.
    again = get_user_model().objects.get(pk=alice.pk)
    again.set_password("second-password")
    again.save()
    response = client.get("/jobs/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_deactivating_or_demoting_a_user_takes_effect_at_once(bob_job):
    staff = get_user_model().objects.create_user("carol", password="x", is_staff=True)
    client = _client(staff)
    assert client.get(f"/progress/{bob_job.id}/").status_code == 200  # staff follow every job
    staff.is_staff = False
    staff.save()
    assert client.get(f"/progress/{bob_job.id}/").status_code == 404
    staff.is_active = False
    staff.save()
    assert client.get(f"/progress/{bob_job.id}/").status_code == 401


def test_a_user_planted_in_memcached_is_refused(alice, bob_job):
    client = _client(alice)
    client.get("/jobs/")
    key = users.cache_key(alice.pk)
    forged = {"pk": alice.pk, "username": "alice", "is_active": True, "is_staff": True, "is_superuser": True}
    forged["auth"] = alice.get_session_auth_hash()
    # Plain JSON, and JSON sealed for another user's key: neither is believed.
    for value in (
        json.dumps(forged).encode(),
        seal(users.cache_key(bob_job.owner_id), json.dumps(forged).encode(), ttl=300),
    ):
        get_client().set(key, value)
        assert client.get(f"/progress/{bob_job.id}/").status_code == 404  # alice, read from the database
    assert client.get("/admin/").status_code == 302  # not staff


def test_a_reader_of_the_old_row_cannot_cache_it_after_a_change(alice):
    made = time.time()
    stale = get_user_model().objects.get(pk=alice.pk)  # read before the change...
    alice.is_staff = True
    alice.save()  # ...which every node must see
    # The slow reader now caches what it read: refused, the database read instead.
    key = users.cache_key(alice.pk)
    get_client().set(key, users.seal(key, users._snapshot(stale), ttl=300, made=made))
    assert users.cached_user(alice.pk).is_staff


def test_an_old_copy_written_back_is_refused_once_the_user_changed(alice, bob_job):
    """A memcached writer keeps alice's copy from when she was staff and writes
    it back after she is demoted (and after a new password): refused."""
    alice.is_staff = alice.is_superuser = True
    alice.save()
    client = _client(alice)
    assert client.get("/admin/dashboard/").status_code == 200
    key = users.cache_key(alice.pk)
    old = get_client().get(key)
    assert old is not None
    alice.is_staff = alice.is_superuser = False
    alice.save()
    get_client().set(key, old)
    assert client.get("/admin/dashboard/").status_code in (302, 403)
    assert client.get(f"/progress/{bob_job.id}/").status_code == 404
    # A new copy is made from the database and believed.
    assert users.cached_user(alice.pk).is_staff is False
    assert get_client().get(key) != old


def test_a_copy_past_its_lifetime_is_refused_whatever_memcached_keeps(alice):
    key = users.cache_key(alice.pk)
    old = users.seal(key, users._snapshot(alice), ttl=300, made=time.time() - 400)
    get_client().set(key, old, expire=300)
    assert users._from_snapshot(alice.pk, old) is None


def test_a_login_does_not_drop_the_cached_copy(alice):
    client = _client(alice)
    client.get("/jobs/")
    cached = _cached(alice)
    assert Client().login(username="alice", password="first-password")  # saves last_login alone
    assert _cached(alice) == cached


def test_a_new_signing_key_reads_none_of_the_old_entries(alice, settings):
    before = users.cache_key(alice.pk)
    settings.SECRET_KEY = "another-key-" + "x" * 40
    assert users.cache_key(alice.pk) != before


def test_without_memcached_users_come_from_the_database(alice, settings):
    from tests.harness.processes import free_port

    client = _client(alice)
    dead = [f"127.0.0.1:{free_port()}"]
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": dead}
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": dead}}
    response = client.get("/jobs/")
    assert response.status_code == 200 and b"alice" in response.content
