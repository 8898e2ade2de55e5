"""webfarm.progress.pollgate on a real memcached, called as a WSGI server calls it:
which requests it answers, which it hands to Django, and when it stands
aside (tests/farm/test_poll_gate.py compares its answers with Django's
through gunicorn)."""

import io
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.core.wsgi import get_wsgi_application
from django.test import Client

from webfarm.core import users
from webfarm.core.client import get_client
from webfarm.core.seal import MAC_BYTES
from webfarm.core.sessions import SessionStore, longest_copy
from webfarm.progress import services, store
from webfarm.progress.pollgate import PollGate
from webfarm.progress.pollgate.chain import poll_chain
from webfarm.progress.pollgate.lanes import lanes

pytestmark = pytest.mark.django_db


class Recorder:
    """The Django app behind the gate, as far as the gate can tell: says when it is called."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.django = get_wsgi_application()

    def __call__(self, environ, start_response):
        self.calls.append(environ["PATH_INFO"])
        return self.django(environ, start_response)


def _get(gate: PollGate, path: str, method: str = "GET", **extra: str) -> tuple[str, dict, bytes]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "HTTP_HOST": "127.0.0.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        **extra,
    }
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    response = gate(environ, start_response)
    body = b"".join(response)
    if hasattr(response, "close"):  # as a WSGI server does
        response.close()
    return seen["status"], seen["headers"], body


@pytest.fixture
def job(alice):
    return services.create_job(owner=alice, kind="demo", title="Demo", params={})


@pytest.fixture
def gate():
    recorder = Recorder()
    return PollGate(recorder), recorder


def test_a_token_poll_is_answered_by_the_gate_and_anything_else_by_django(gate, job):
    gate, django = gate
    status, headers, body = _get(gate, f"/progress/{job.id}/{job.read_token}/")
    assert status == "200 OK" and b'"state":"queued"' in body and django.calls == []
    assert headers["Content-Length"] == str(len(body)) and headers["X-Content-Type-Options"] == "nosniff"
    # Not polls: a HEAD, a POST, the cancel URL, a page, a path too long to be one.
    _get(gate, f"/progress/{job.id}/{job.read_token}/", method="HEAD")
    _get(gate, f"/progress/{job.id}/cancel/", method="POST")
    assert _get(gate, f"/progress/{job.id}/cancel/")[0].startswith("405")
    _get(gate, "/accounts/login/")
    _get(gate, "/progress/" + "x" * 300 + "/")
    assert len(django.calls) == 5


def test_a_published_token_document_takes_the_lane_and_the_rest_the_chain(gate, job, monkeypatch):
    """The lane sends no request_started (it opens nothing of Django's); the chain does."""
    gate, django = gate
    started = []
    monkeypatch.setattr("django.core.signals.request_started.send", lambda *a, **k: started.append(1))
    url = f"/progress/{job.id}/{job.read_token}/"
    status, headers, _ = _get(gate, url)
    assert status == "200 OK" and started == [] and headers["X-Frame-Options"] == "DENY"
    assert _get(gate, url, HTTP_IF_NONE_MATCH=headers["ETag"])[0] == "304 Not Modified" and started == []
    # nginx's fall-back, another precondition, the session URL: the chain.
    assert _get(gate, url, HTTP_X_PROGRESS_MISSED="1")[0] == "200 OK" and len(started) == 1
    assert _get(gate, url, HTTP_IF_MATCH='"other"')[0].startswith("412") and len(started) == 2
    assert _get(gate, f"/progress/{job.id}/")[0].startswith("401") and len(started) == 3
    assert django.calls == []


@pytest.mark.parametrize("value", ["\U0001f4a5" * 11, "\u202e" + "a" * 21, "%00" * 8])
def test_hostile_poll_paths_are_refused_as_django_refuses_them(gate, job, value):
    """The server's PATH_INFO is the raw bytes as latin-1; a WSGIRequest writes
    the decoded path back into its environ, which Django must never see."""
    gate, _ = gate
    raw = value.encode().decode("latin-1")
    for path in (f"/progress/{job.id}/{raw}/", f"/progress/{raw}/{raw}/", f"/progress/{raw}/"):
        status = _get(gate, path)[0]
        assert status.startswith(("401", "404")), (path, status)


def test_hsts_is_sent_on_a_secure_poll_when_configured(gate, job, settings):
    gate, django = gate
    settings.SECURE_HSTS_SECONDS = 3600
    url = f"/progress/{job.id}/{job.read_token}/"
    assert "Strict-Transport-Security" not in _get(gate, url)[1]
    secure = _get(gate, url, **{"wsgi.url_scheme": "https", "SERVER_PORT": "443"})[1]
    assert secure["Strict-Transport-Security"] == "max-age=3600" and django.calls == []


def test_what_common_middleware_refuses_or_redirects_never_takes_the_lane(job, settings):
    """DISALLOWED_USER_AGENTS and PREPEND_WWW: the gate answers as Django does."""
    settings.DISALLOWED_USER_AGENTS = [re.compile(r"BadBot")]
    gate = PollGate(Recorder())
    url = f"/progress/{job.id}/{job.read_token}/"
    assert _get(gate, url, HTTP_USER_AGENT="Mozilla/5.0")[0] == "200 OK"
    for path in (url, f"/progress/{job.id}/"):
        assert _get(gate, path, HTTP_USER_AGENT="Mozilla/5.0 BadBot/2")[0].startswith("403")
    settings.PREPEND_WWW = True
    status, headers, _ = _get(gate, url)
    assert status.startswith("301") and headers["Location"] == f"http://www.127.0.0.1{url}"


def test_a_host_django_refuses_is_refused_on_either_path(gate, job):
    gate, django = gate
    for url in (f"/progress/{job.id}/{job.read_token}/", f"/progress/{job.id}/"):
        assert _get(gate, url, HTTP_HOST="evil.example")[0].startswith("400")
    assert len(django.calls) == 2


def test_the_lane_judges_hosts_and_schemes_as_the_settings_say_now(gate, job, settings):
    """The lane remembers each host and scheme Django judged, until the
    settings that judge them change."""
    gate, django = gate
    settings.SECURE_HSTS_SECONDS = 3600  # read once, as Django's handler reads it
    url = f"/progress/{job.id}/{job.read_token}/"
    assert _get(gate, url)[0] == "200 OK"
    settings.ALLOWED_HOSTS = ["farm.example"]
    assert _get(gate, url)[0].startswith("400")
    assert _get(gate, url, HTTP_HOST="farm.example")[0] == "200 OK"
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    proxied = _get(gate, url, HTTP_HOST="farm.example", HTTP_X_FORWARDED_PROTO="https")[1]
    assert proxied["Strict-Transport-Security"] == "max-age=3600"
    assert "Strict-Transport-Security" not in _get(gate, url, HTTP_HOST="farm.example")[1]
    assert len(django.calls) == 1


def test_with_ssl_redirect_a_plain_poll_is_redirected_as_django_does(gate, job, settings):
    gate, django = gate
    settings.SECURE_SSL_REDIRECT = True
    url = f"/progress/{job.id}/{job.read_token}/"
    status, headers, _ = _get(gate, url)
    assert status.startswith("301") and headers["Location"] == f"https://127.0.0.1{url}"
    assert _get(gate, url, **{"wsgi.url_scheme": "https", "SERVER_PORT": "443"})[0] == "200 OK"
    assert django.calls == []


def test_a_poll_the_view_fails_on_is_handed_to_django(gate, job, monkeypatch):
    gate, django = gate

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("webfarm.progress.selectors.published_document", broken)
    # Django answers it as it answers any view that raised: its 500, its log.
    assert _get(gate, f"/progress/{job.id}/{job.read_token}/")[0].startswith("500")
    assert django.calls == [f"/progress/{job.id}/{job.read_token}/"]


def test_the_gate_stands_aside_when_switched_off(job, settings):
    settings.PROGRESS = {**settings.PROGRESS, "POLL_GATE": False}
    recorder = Recorder()
    assert _get(PollGate(recorder), f"/progress/{job.id}/{job.read_token}/")[0] == "200 OK"
    assert recorder.calls == [f"/progress/{job.id}/{job.read_token}/"]


class WithAViewHook:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view, args, kwargs):
        return None


def test_middleware_the_gate_cannot_run_as_django_does_turns_it_off(settings, caplog):
    hooked = f"{__name__}.WithAViewHook"
    assert poll_chain(settings.MIDDLEWARE) is not None
    assert poll_chain([*settings.MIDDLEWARE, hooked]) is None
    assert f"poll gate off: {hooked} has process_view" in caplog.text


class SaysItSkipsPolls(WithAViewHook):
    """A hook the gate cannot run, on a middleware that says a poll needs none of it."""

    poll_skippable = True


def test_a_middleware_that_says_it_does_nothing_for_a_poll_is_left_out(settings):
    skipping = f"{__name__}.SaysItSkipsPolls"
    assert poll_chain([*settings.MIDDLEWARE, skipping]) is not None
    assert lanes([*settings.MIDDLEWARE, skipping]) is not None
    # Without the attribute its hook turns the gate off (above) and closes the lanes.
    assert lanes([*settings.MIDDLEWARE, f"{__name__}.WithAViewHook"]) is None
    # Ours says so: the task owner's middleware, in the demo site's MIDDLEWARE.
    assert "webfarm.djangotasks.owners.TaskOwnerMiddleware" in settings.MIDDLEWARE
    assert lanes(settings.MIDDLEWARE) is not None


def test_a_sampled_poll_on_the_lane_is_logged_without_its_token(gate, job, settings, caplog):
    gate, django = gate
    settings.ACTIVITY = {**settings.ACTIVITY, "POLL_SAMPLE": 1.0}
    with caplog.at_level("INFO", logger="activity"):
        assert _get(gate, f"/progress/{job.id}/{job.read_token}/")[0] == "200 OK"
    assert django.calls == []
    (record,) = [r for r in caplog.records if r.name == "activity"]
    assert record.getMessage() == f"GET /progress/{job.id}/<token>/ 200"
    assert job.read_token not in caplog.text


def _session_of(user) -> str:
    """A cookie of the user's, after a page that cached their user (as a job's
    page does before its bar polls)."""
    client = Client()
    client.force_login(user)
    assert client.get("/jobs/").status_code == 200
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.fixture
def started(monkeypatch):
    """request_started's sends: the chain sends one a poll, the lanes none."""
    sent = []
    monkeypatch.setattr("django.core.signals.request_started.send", lambda *a, **k: sent.append(1))
    return sent


def test_the_owners_session_poll_takes_the_lane_with_djangos_headers(gate, job, alice, started):
    gate, django = gate
    cookie = _session_of(alice)
    started.clear()
    status, headers, body = _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)
    assert status == "200 OK" and b'"state":"queued"' in body and started == []
    assert headers["Vary"] == "Cookie" and headers["X-Frame-Options"] == "DENY"
    assert headers["Cache-Control"] == "no-store" and "Set-Cookie" not in headers
    again = _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie, HTTP_IF_NONE_MATCH=headers["ETag"])
    assert again[0] == "304 Not Modified" and again[1]["Vary"] == "Cookie" and started == []
    assert django.calls == []


@pytest.mark.parametrize("owner_first", [False, True])
def test_a_session_poll_of_someone_elses_job_is_the_chains_404_and_staff_see_it(
    gate, job, alice, started, owner_first
):
    """Also once the lane knows the job (its owner polled it): it reads the
    job's published document then, and still only for its owner or staff."""
    gate, django = gate
    users = get_user_model().objects
    bob, staff = users.create_user("bob", password="x"), users.create_user("sam", password="x", is_staff=True)
    bobs, staffs = _session_of(bob), _session_of(staff)
    if owner_first:
        assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=_session_of(alice))[0] == "200 OK"
        assert job.id in gate._lanes.jobs
    started.clear()
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=bobs)[0].startswith("404")
    assert len(started) == 1
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=staffs)[0] == "200 OK"
    assert len(started) == 1 and django.calls == []


def test_a_known_job_is_answered_with_its_sealed_document_or_else_its_record(gate, job, alice, started):
    """The session lane sends the document the token URL sends; one that is
    not sealed for the job's key is refused, and one that is gone is made
    again from the record, on the lane."""
    gate, _ = gate
    url, cookie = f"/progress/{job.id}/", _session_of(alice)
    first = _get(gate, url, HTTP_COOKIE=cookie)
    assert first[2] == _get(gate, f"/progress/{job.id}/{job.read_token}/")[2]
    published = store.read(job.id)
    published.title = "Published"
    store.publish(published)  # the document alone: the record still says "Demo"
    assert b'"title":"Published"' in _get(gate, url, HTTP_COOKIE=cookie)[2]
    key = store.public_key(job.id, job.read_token)
    planted = first[2][:-1] + b',"seal":"' + b"0" * 2 * MAC_BYTES + b'"}'
    get_client().set(key, planted.replace(b'"title":"Demo"', b'"title":"<script>"'))
    started.clear()
    again = _get(gate, url, HTTP_COOKIE=cookie)
    assert again[0] == "200 OK" and again[2] == first[2] and started == []
    get_client().delete(key)
    assert _get(gate, url, HTTP_COOKIE=cookie)[2] == first[2] and started == []


def test_a_password_change_or_a_deactivation_logs_the_session_out_on_the_lane_too(gate, job, alice, started):
    """Django's get_user refuses a session whose hash no longer matches and
    flushes it; an inactive user is no user: the lane hands both to the chain."""
    gate, _ = gate
    url = f"/progress/{job.id}/"
    cookie = _session_of(alice)
    started.clear()
    assert _get(gate, url, HTTP_COOKIE=cookie)[0] == "200 OK" and started == []
    alice.set_password("changed")
    alice.save()
    assert _get(gate, url, HTTP_COOKIE=cookie)[0].startswith("401") and len(started) == 1
    assert _get(gate, url, HTTP_COOKIE=cookie)[0].startswith("401")  # flushed: no session any more
    cookie = _session_of(alice)
    started.clear()
    assert _get(gate, url, HTTP_COOKIE=cookie)[0] == "200 OK"
    alice.is_active = False
    alice.save()
    assert _get(gate, url, HTTP_COOKIE=cookie)[0].startswith("401")


def test_a_logged_out_session_is_refused(gate, job, alice, started):
    gate, _ = gate
    client = Client()
    client.force_login(alice)
    client.get("/jobs/")
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    started.clear()
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK" and started == []
    copy_key = SessionStore(client.cookies["sessionid"].value).cache_key
    old_copy = get_client().get(copy_key)
    client.post("/accounts/logout/")
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0].startswith("401")
    # The very bytes the lane checked before, written back: still refused.
    get_client().set(copy_key, old_copy)
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0].startswith("401")


def test_a_staff_users_old_copy_written_back_after_a_demotion_is_refused(gate, job, started):
    gate, _ = gate
    sam = get_user_model().objects.create_user("sam", password="x", is_staff=True)
    cookie = _session_of(sam)
    for _ in range(2):  # the second poll reads the user beside the session, as checked before
        assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK"
    old_copy = get_client().get(users.cache_key(sam.pk))
    sam.is_staff = False
    sam.save()
    get_client().set(users.cache_key(sam.pk), old_copy)
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0].startswith("404")


def test_copies_the_lane_checked_before_are_dated_on_every_poll(gate, job, alice, started, monkeypatch):
    """The lane does not check the same bytes' seal twice, but their lifetime
    it does: past it, the chain reads the session from the database."""
    gate, _ = gate
    cookie = _session_of(alice)
    for _ in range(2):
        assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK"
    started.clear()
    later = time.time() + longest_copy() + 60
    monkeypatch.setattr(time, "time", lambda: later)
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK" and len(started) == 1


@pytest.mark.parametrize(
    "setting, value",
    [
        ("SESSION_SAVE_EVERY_REQUEST", True),
        ("AUTHENTICATION_BACKENDS", ["django.contrib.auth.backends.ModelBackend"]),
        ("SESSION_ENGINE", "django.contrib.sessions.backends.db"),
    ],
)
def test_sessions_the_lane_cannot_read_as_django_does_go_the_chain(
    job, alice, settings, started, setting, value
):
    setattr(settings, setting, value)
    gate = PollGate(Recorder())
    cookie = _session_of(alice)
    started.clear()
    status, headers, _ = _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)
    assert status == "200 OK" and len(started) == 1
    if setting == "SESSION_SAVE_EVERY_REQUEST":
        assert "sessionid=" in headers["Set-Cookie"]


def test_a_sampled_session_poll_on_the_lane_is_logged_with_its_user(
    gate, job, alice, settings, caplog, started
):
    gate, _ = gate
    settings.ACTIVITY = {**settings.ACTIVITY, "POLL_SAMPLE": 1.0}
    cookie = _session_of(alice)
    started.clear()
    with caplog.at_level("INFO", logger="activity"):
        assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK"
    (record,) = [r for r in caplog.records if r.name == "activity" and "/progress/" in r.getMessage()]
    assert record.user == "alice" and started == []


def test_whose_session_it_is_is_only_a_guess_the_session_decides(gate, job, alice, started, monkeypatch):
    """The lane remembers each session's user to read the user's key in the
    same round trip; a wrong memory (another user's id) changes nothing: the
    session's own value names the user. The memory is bounded."""
    gate, _ = gate
    bob = get_user_model().objects.create_user("bob", password="x")
    bobs_job = services.create_job(owner=bob, kind="demo", title="Bob's", params={})
    cookie = _session_of(alice)
    started.clear()
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK" and started == []
    lanes = gate._lanes
    ((session_key, (copy_key, _)),) = lanes.sessions.items()
    lanes.sessions[session_key] = (copy_key, str(bob.pk))
    assert _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=cookie)[0] == "200 OK" and started == []
    assert _get(gate, f"/progress/{bobs_job.id}/", HTTP_COOKIE=cookie)[0].startswith("404")
    assert lanes.sessions[session_key] == (copy_key, str(alice.pk))
    monkeypatch.setattr("webfarm.progress.pollgate.lanes.MAX_SESSIONS_KNOWN", 2)
    for _ in range(3):
        _get(gate, f"/progress/{job.id}/", HTTP_COOKIE=_session_of(alice))
        assert len(lanes.sessions) <= 2
