"""progress.pollgate on a real memcached, called as a WSGI server calls it:
which requests it answers, which it hands to Django, and when it stands
aside (tests/farm/test_poll_gate.py compares its answers with Django's
through gunicorn)."""

import io

import pytest
from django.core.wsgi import get_wsgi_application

from progress import services
from progress.pollgate import PollGate, poll_chain

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


def test_a_host_django_refuses_is_refused_on_either_path(gate, job):
    gate, django = gate
    for url in (f"/progress/{job.id}/{job.read_token}/", f"/progress/{job.id}/"):
        assert _get(gate, url, HTTP_HOST="evil.example")[0].startswith("400")
    assert len(django.calls) == 2


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

    monkeypatch.setattr("progress.selectors.published_document", broken)
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


def test_a_sampled_poll_on_the_lane_is_logged_without_its_token(gate, job, settings, caplog):
    gate, django = gate
    settings.ACTIVITY = {**settings.ACTIVITY, "POLL_SAMPLE": 1.0}
    with caplog.at_level("INFO", logger="activity"):
        assert _get(gate, f"/progress/{job.id}/{job.read_token}/")[0] == "200 OK"
    assert django.calls == []
    (record,) = [r for r in caplog.records if r.name == "activity"]
    assert record.getMessage() == f"GET /progress/{job.id}/<token>/ 200"
    assert job.read_token not in caplog.text
