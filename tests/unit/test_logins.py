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


def test_logins_that_get_in_are_not_counted_as_failures(alice):
    """Each try is counted before its hash and given back when it gets in:
    a user who logs in often is never refused for it."""
    for _ in range(6):
        assert _login(Client(), "alice", "right-password").status_code == 302
    for _ in range(2):
        assert _login(Client(), "alice", "wrong").status_code == 200
    assert _login(Client(), "alice", "right-password").status_code == 302


@pytest.fixture
def root(alice):
    return get_user_model().objects.create_superuser("root", password="right-password")


def _admin_login(client: Client, username: str, password: str, address: str = "10.9.8.7"):
    return client.post(
        "/admin/login/?next=/admin/",
        {"username": username, "password": password, "next": "/admin/"},
        REMOTE_ADDR=address,
    )


def test_the_admins_login_is_counted_by_the_same_throttle(root, monkeypatch):
    """The attack: past the limit at /accounts/login/, the admin's own login
    page let the same guesser go on (Django's AdminSite.login is not the
    site's view). Now every login form counts under one name."""
    for _ in range(2):
        assert _login(Client(), "root", "wrong").status_code == 200
    assert _admin_login(Client(), "root", "wrong", address="10.3.3.3").status_code == 200
    hashed = []
    monkeypatch.setattr("django.contrib.auth.hashers.MD5PasswordHasher.verify", lambda *a: hashed.append(a))
    client = Client()
    refused = _admin_login(client, "root", "right-password", address="10.4.4.4")
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 300
    assert "Too many failed logins" in refused.content.decode() and not hashed
    assert "_auth_user_id" not in client.session
    assert _login(Client(), "ROOT", "right-password", address="10.5.5.5").status_code == 429
    assert not hashed


def test_an_admin_login_that_gets_in_gives_its_try_back(root):
    for _ in range(5):
        assert _admin_login(Client(), "root", "right-password").status_code == 302
    assert _admin_login(Client(), "root", "right-password").status_code == 302


@pytest.mark.parametrize("url", ["/accounts/password_change/", "/admin/password_change/"])
def test_a_password_changes_old_password_is_counted_with_the_logins(root, url, monkeypatch):
    """With a stolen session, a guesser could try old passwords on the
    password change forms without any limit: they count as logins now."""
    client = Client()
    client.force_login(root)
    change = {"old_password": "wrong", "new_password1": "A-new-passw0rd!", "new_password2": "A-new-passw0rd!"}
    for _ in range(3):
        answer = client.post(url, change, REMOTE_ADDR="10.6.6.6")
        assert answer.status_code == 200 and b"incorrect" in answer.content
    hashed = []
    monkeypatch.setattr("django.contrib.auth.hashers.MD5PasswordHasher.verify", lambda *a: hashed.append(a))
    refused = client.post(url, {**change, "old_password": "right-password"}, REMOTE_ADDR="10.6.6.6")
    assert refused.status_code == 429 and "Too many failed logins" in refused.content.decode()
    assert not hashed
    monkeypatch.undo()
    root.refresh_from_db()
    assert root.check_password("right-password")
    assert _login(Client(), "root", "right-password", address="10.7.7.7").status_code == 429


def test_a_password_change_with_the_right_old_password_works_and_is_not_counted(root):
    client = Client()
    client.force_login(root)
    for n in range(5):
        new = f"A-new-passw0rd-{n}!"
        old = "right-password" if n == 0 else f"A-new-passw0rd-{n - 1}!"
        answer = client.post(
            "/accounts/password_change/", {"old_password": old, "new_password1": new, "new_password2": new}
        )
        assert answer.status_code == 302, answer.content[:500]


def test_tries_sent_at_once_get_no_more_hashes_than_the_limit(alice):
    """Counted before the hash, atomically: 40 tries at once, 3 evaluated
    (the limit), however the threads interleave."""
    import threading

    from webfarm.limits.logins import Refusal, reserve

    barrier, results = threading.Barrier(40), []

    def one_try() -> None:
        barrier.wait(timeout=10)
        results.append(reserve(None, "alice"))

    threads = [threading.Thread(target=one_try) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(results) == 40
    assert sum(not isinstance(result, Refusal) for result in results) == 3


def test_a_project_whose_backend_is_not_throttled_hears_so(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from webfarm.limits.checks import check_login_throttle

    assert check_login_throttle() == []
    settings.AUTHENTICATION_BACKENDS = [
        "webfarm.limits.backends.ThrottledUserBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    (warning,) = check_login_throttle()
    assert warning.id == "webfarm_limits.W001"
    assert "'django.contrib.auth.backends.ModelBackend', which checks passwords without" in warning.msg
    assert "webfarm.limits.backends.ThrottledUserBackend" in warning.hint
    with pytest.raises(SystemCheckError, match=r"webfarm_limits\.W001"):
        call_command("check", "--fail-level", "WARNING", "--tag", "security")


def test_a_project_without_trusted_proxies_logs_in(alice, settings):
    """TRUSTED_PROXIES is the demo's setting: a project that never heard of
    it counts its logins by REMOTE_ADDR (the installed site's test found a
    500 at the first login)."""
    del settings.TRUSTED_PROXIES
    assert _login(Client(), "alice", "wrong").status_code == 200
    assert _login(Client(), "alice", "right-password").status_code == 302
