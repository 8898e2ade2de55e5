"""Login tries (webfarm.limits.logins): a few wrong passwords, then a pause, before any
password is hashed; the right password works again once the window ends."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from webfarm.core.client import get_client
from webfarm.limits import logins

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(settings):
    settings.LIMITS = {**settings.LIMITS, "LOGIN_FAILURES": 3, "LOGIN_FAILURES_PER_ADDRESS": 5}
    return get_user_model().objects.create_user("alice", password="right-password")


def _login(client: Client, username: str, password: str, address: str = "10.9.8.7"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_wrong_passwords_past_the_limit_are_refused_before_hashing(alice, monkeypatch):
    client = Client()
    for _ in range(3):
        assert _login(client, "alice", "wrong").status_code == 200
    hashed = []
    monkeypatch.setattr("django.contrib.auth.hashers.MD5PasswordHasher.verify", lambda *a: hashed.append(a))
    refused = _login(client, "Alice ", "right-password", address="10.1.1.1")  # another address, same user
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 300
    assert "Too many failed logins" in refused.content.decode() and not hashed
    assert "_auth_user_id" not in client.session
    monkeypatch.undo()
    # The window ends (memcached drops the count): the right password works.
    get_client().delete_many(logins.failure_keys(refused.wsgi_request, "alice"))
    assert _login(client, "alice", "right-password", address="10.1.1.1").status_code == 302


def test_one_address_trying_many_usernames_is_refused_too(alice):
    client = Client()
    for n in range(5):
        assert _login(client, f"user{n}", "wrong").status_code == 200
    assert _login(client, "alice", "right-password").status_code == 429
    assert _login(client, "alice", "right-password", address="10.2.2.2").status_code == 302


def test_a_count_planted_as_anything_but_a_number_is_ignored(alice):
    """It refuses nothing, and does not switch counting off: the next
    failure starts the count again."""
    request = Client().get("/").wsgi_request
    for key in logins.failure_keys(request, "alice"):
        get_client().set(key, b"not a number", expire=60)
    assert _login(Client(), "alice", "right-password", address="127.0.0.1").status_code == 302
    for _ in range(3):
        assert _login(Client(), "alice", "wrong", address="127.0.0.1").status_code == 200
    assert _login(Client(), "alice", "right-password", address="127.0.0.1").status_code == 429


def test_a_count_planted_past_the_limit_refuses_a_window_of_logins_and_no_more(alice):
    """What a memcached writer can do here: refuse a user's logins until the
    count lapses; never let a wrong password in."""
    request = Client().get("/").wsgi_request
    user_key = logins.failure_keys(request, "alice")[0]
    get_client().set(user_key, b"999", expire=60)
    assert _login(Client(), "alice", "right-password").status_code == 429
    get_client().delete(user_key)  # the window lapses
    assert _login(Client(), "alice", "wrong").status_code == 200
    assert _login(Client(), "alice", "right-password").status_code == 302
