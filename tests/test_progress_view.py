"""GET /progress/<job>/ and POST /progress/<job>/cancel/ on a real memcached."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from progress import services
from progress.client import get_client
from tests.processes import free_port

pytestmark = pytest.mark.django_db

CONTRACT_KEYS = {
    "job",
    "state",
    "current",
    "total",
    "percent",
    "stage",
    "message",
    "eta_seconds",
    "updated_at",
    "result_url",
    "error",
}


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


@pytest.fixture
def alice_client(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def job(alice):
    return services.create_job(owner=alice, kind="demo", title="Demo", params={})


def test_progress_json_has_the_contract_fields(alice_client, job):
    response = alice_client.get(f"/progress/{job.id}/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    assert set(data) >= CONTRACT_KEYS
    assert data["job"] == job.id and data["state"] == "queued" and "owner" not in data


def test_progress_is_read_with_one_memcached_get(alice_client, job, monkeypatch):
    client = get_client()
    calls = []
    for name in ("get", "get_many", "gets", "set", "add", "cas", "incr"):
        original = getattr(client, name)
        monkeypatch.setattr(
            client, name, lambda *a, _n=name, _o=original, **k: calls.append(_n) or _o(*a, **k)
        )
    alice_client.get(f"/progress/{job.id}/")  # warms the session cache
    monkeypatch.setattr("stats.counters.FLUSH_EVERY", 3600)  # poll counts stay in the process
    calls.clear()
    assert alice_client.get(f"/progress/{job.id}/").status_code == 200
    assert calls == ["get"]


def test_unchanged_progress_answers_304_and_changed_progress_200(alice_client, job):
    first = alice_client.get(f"/progress/{job.id}/")
    etag = first["ETag"]
    again = alice_client.get(f"/progress/{job.id}/", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again["ETag"] == etag and again["Cache-Control"] == "no-store"
    services.begin_job(job.id)
    changed = alice_client.get(f"/progress/{job.id}/", HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and changed.json()["state"] == "running"


def test_unknown_and_foreign_jobs_are_404_and_anonymous_401(job):
    bob = get_user_model().objects.create_user("bob", password="x")
    client = Client()
    anonymous = client.get(f"/progress/{job.id}/")
    assert anonymous.status_code == 401 and anonymous.json()["error"]
    client.force_login(bob)
    assert client.get(f"/progress/{job.id}/").status_code == 404
    assert client.get("/progress/AAAAAAAAAAAAAAAAAAAAAA/").status_code == 404
    assert client.post(f"/progress/{job.id}/cancel/").status_code == 404


def test_memcached_down_is_503_with_retry_after(alice_client, job, settings):
    settings.PROGRESS = {**settings.PROGRESS, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    response = alice_client.get(f"/progress/{job.id}/")
    assert response.status_code == 503
    assert int(response["Retry-After"]) > 0
    assert "temporarily unavailable" in response.json()["error"]


def test_cancel_needs_post_and_csrf(alice, job):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.get(f"/progress/{job.id}/cancel/").status_code == 405
    assert client.post(f"/progress/{job.id}/cancel/").status_code == 403
    client.get("/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    response = client.post(
        f"/progress/{job.id}/cancel/", HTTP_X_CSRFTOKEN=token, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 202 and json.loads(response.content)["state"] == "cancelled"


def test_cancel_from_a_form_redirects_only_to_this_site(alice_client, job):
    response = alice_client.post(f"/progress/{job.id}/cancel/", {"next": "https://evil.example/"})
    assert response.status_code == 302 and response["Location"] == "/"
