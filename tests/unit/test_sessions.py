"""Sessions cached in memcached without trusting memcached (webfarm.core.sessions)."""

import logging
import os
import pickle
import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.test import Client

from tests.harness import keyspace
from webfarm.core import seal
from webfarm.core.client import get_client
from webfarm.core.sessions import SessionStore, longest_copy

pytestmark = pytest.mark.django_db


class RunsCode:
    """What an attacker plants: unpickling it runs a shell command."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _login(username: str) -> tuple[Client, str]:
    user = get_user_model().objects.create_user(username, password="x")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client, client.cookies["sessionid"].value


def _cache_key(session_id: str) -> str:
    """The key memcached itself holds the session's copy under."""
    return f"{settings.MEMCACHED['NAMESPACE']}:{SessionStore()._key_for(session_id)}"


def test_memcached_holds_no_session_id_and_only_a_signed_short_lived_copy(
    memcached_server, progress_on_real_memcached, settings
):
    client, session_id = _login("alice")
    assert client.get("/jobs/").status_code == 200
    ours = keyspace.items(memcached_server, prefix=progress_on_real_memcached)
    sessions = [item for item in ours if ":session:" in item.key]
    assert len(sessions) == 1
    assert not any(session_id in item.key for item in ours)
    assert 0 < sessions[0].ttl() <= longest_copy() + keyspace.CLOCK_SLACK
    key = SessionStore()._key_for(session_id)
    raw = get_client().get(key)
    # Sealed and bound to this session's key: under no other key does it open.
    assert b'"_auth_user_id"' in seal.unseal("session", key, raw)
    assert seal.unseal("probe", SessionStore()._key_for("b" * 32), raw) is None


def test_a_pickle_planted_for_a_session_runs_nothing(memcached_server, tmp_path, caplog):
    client, session_id = _login("alice")
    canary = tmp_path / f"ran-{uuid.uuid4().hex}"
    payload = pickle.dumps(RunsCode(str(canary)))
    # Under our key, and under the key Django's own cached_db would read.
    plain_prefix = caches["default"].make_key("django.contrib.sessions.cached_db")
    for key in (_cache_key(session_id), plain_prefix + session_id):
        keyspace.plant(memcached_server, key, payload, flags=1)
    with caplog.at_level(logging.WARNING, logger="webfarm.core.tampering"):
        response = client.get("/jobs/")
    assert response.status_code == 200  # still alice: read from the database
    assert b"alice" in response.content
    assert not canary.exists()
    assert "refused" in caplog.text


def test_a_signed_value_moved_to_another_session_is_refused(memcached_server):
    alice, alice_id = _login("alice")
    bob, bob_id = _login("bob")
    assert bob.get("/jobs/").status_code == 200
    client = get_client()
    bobs_value = client.get(SessionStore()._key_for(bob_id))
    assert bobs_value
    client.set(SessionStore()._key_for(alice_id), bobs_value, expire=300)
    page = alice.get("/jobs/")
    assert page.status_code == 200
    # Who the page is for (the page's random tokens may spell anything).
    assert b"Log out alice" in page.content and b"Log out bob" not in page.content


def test_a_value_planted_as_json_for_a_session_is_refused(memcached_server):
    alice, alice_id = _login("alice")
    bob = get_user_model().objects.create_user("bob", password="x")
    forged = f'{{"_auth_user_id": "{bob.pk}"}}'
    keyspace.plant(memcached_server, _cache_key(alice_id), forged.encode(), flags=64)
    page = alice.get("/jobs/")
    assert b"Log out alice" in page.content and b"Log out bob" not in page.content


@pytest.mark.parametrize(
    "cookie", ["a\x00" * 16, "A" * 32, "a" * 31, "a" * 33, "../../" + "a" * 26, "a" * 31 + "é", "%00" * 11]
)
def test_a_session_id_django_could_not_have_made_is_no_session(cookie, django_assert_num_queries):
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = cookie
    with django_assert_num_queries(0):
        response = client.get("/jobs/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_logout_removes_the_cached_copy(memcached_server, progress_on_real_memcached):
    client, session_id = _login("alice")
    assert get_client().get(SessionStore()._key_for(session_id)) is not None
    client.post("/accounts/logout/")
    assert get_client().get(SessionStore()._key_for(session_id)) is None
    assert client.get("/jobs/").status_code == 302


def test_a_copy_written_back_after_logout_is_refused(memcached_server, progress_on_real_memcached):
    """Someone who can reach memcached keeps the cached copy and writes it back
    once the user has logged out: the old cookie stays logged out."""
    client, session_id = _login("alice")
    assert client.get("/jobs/").status_code == 200
    key = SessionStore()._key_for(session_id)
    kept = get_client().get(key)
    client.post("/accounts/logout/")
    get_client().set(key, kept, expire=300)
    replayed = Client()
    replayed.cookies["sessionid"] = session_id
    response = replayed.get("/jobs/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_copy_older_than_the_cache_lifetime_is_refused(memcached_server, settings):
    client, session_id = _login("alice")
    key = SessionStore()._key_for(session_id)
    data = SessionStore(session_id).load()
    then = time.time() - longest_copy() - 10
    # Sealed more than SESSION_CACHE_TTL ago, written back with a fresh expiry.
    SessionStore(session_id)._to_cache(key, data, longest_copy(), made=then)
    get_client().set(key, get_client().get(key), expire=300)
    assert SessionStore(session_id).cached_data() is None
    assert client.get("/jobs/").status_code == 200  # the database still has the session


def test_a_session_deleted_by_a_queryset_ends_at_once_and_its_copy_stays_refused():
    """Sessions deleted in bulk (an admin ending a user's sessions, a script),
    not by the engine: the cached copy does not keep the session alive, even
    written back."""
    from django.contrib.sessions.models import Session

    client, session_id = _login("alice")
    assert client.get("/jobs/").status_code == 200
    key = SessionStore()._key_for(session_id)
    kept = get_client().get(key)
    assert kept is not None
    Session.objects.filter(session_key__in=[session_id]).delete()
    assert get_client().get(key) is None  # dropped as well as revoked
    for _ in range(2):
        answer = client.get("/jobs/")
        assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
        get_client().set(key, kept, expire=60)  # an old copy written back


def test_an_expired_session_deleted_writes_no_revocation():
    """clearsessions deletes expired rows: their copies lapsed with them."""
    from datetime import timedelta

    from django.contrib.sessions.models import Session
    from django.utils import timezone

    from webfarm.core.models import Revocation

    _client, session_id = _login("alice")
    Session.objects.filter(session_key=session_id).update(expire_date=timezone.now() - timedelta(seconds=1))
    before = Revocation.objects.count()
    SessionStore.clear_expired()
    assert not Session.objects.filter(session_key=session_id).exists()
    assert Revocation.objects.count() == before
