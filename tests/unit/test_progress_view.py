"""GET /progress/<job>/ and POST /progress/<job>/cancel/ on a real memcached."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.harness.processes import free_port
from webfarm.core import tampering
from webfarm.core.client import get_client
from webfarm.progress import services, store

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


def test_unchanged_progress_answers_304_and_changed_progress_200(alice_client, job):
    first = alice_client.get(f"/progress/{job.id}/")
    etag = first["ETag"]
    again = alice_client.get(f"/progress/{job.id}/", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again["ETag"] == etag and again["Cache-Control"] == "no-store"
    services.begin_job(job)
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
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
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


def _document(job) -> dict | None:
    """The published document, without the seal Django's own answers leave out."""
    raw = get_client().get(store.public_key(job.id, job.read_token))
    if raw is None:
        return None
    document = json.loads(raw)
    assert len(document.pop("seal")) == 32
    return document


def test_the_read_token_url_answers_without_a_session_and_a_wrong_token_never(alice, job):
    other = services.create_job(owner=alice, kind="demo", title="Other", params={})
    anonymous = Client()
    response = anonymous.get(f"/progress/{job.id}/{job.read_token}/")
    assert response.status_code == 200 and response.json()["job"] == job.id
    assert response["Cache-Control"] == "no-store" and "read_token" not in response.json()
    wrong = [
        "A" * 22,  # the right shape
        other.read_token,  # another job's token
        job.read_token[:-1] + ("A" if job.read_token[-1] != "A" else "B"),  # one character off
        job.read_token[:21],
        job.read_token + "A",
        "%00" * 8,
    ]
    for token in wrong:
        refused = anonymous.get(f"/progress/{job.id}/{token}/")
        assert refused.status_code == 404 and refused.json() == {"error": "No such job."}, token
    assert anonymous.get(f"/progress/{other.id}/{job.read_token}/").status_code == 404
    assert anonymous.post(f"/progress/{job.id}/{job.read_token}/").status_code == 405


def test_every_record_write_publishes_the_document_nginx_serves(alice, job):
    assert _document(job) == Client().get(f"/progress/{job.id}/{job.read_token}/").json()
    assert _document(job)["state"] == "queued"
    record = services.begin_job(job)
    assert _document(job)["state"] == "running"
    record.message = "halfway"
    store.write(record)
    assert _document(job)["message"] == "halfway"
    queued = services.create_job(owner=alice, kind="demo", title="Queued", params={})
    services.cancel_job(job=queued)
    assert _document(queued)["state"] == "cancelled" and _document(queued)["final"]


def test_a_late_running_write_never_replaces_the_final_document(alice, job):
    record = services.begin_job(job)
    stale = store.JobRecord.from_bytes(record.to_bytes())
    record.state, record.finished_at = "succeeded", 1.0
    store.write(record)
    stale.message = "a heartbeat that lost the race"
    store.write(stale)  # the record itself is last-writer-wins...
    assert _document(job)["state"] == "succeeded"  # ...the published end is not


def test_a_planted_final_document_is_refused_and_replaced_by_the_next_write(alice, job):
    record = services.begin_job(job)
    planted = {**record.public(), "state": "succeeded", "final": True, "result_url": "javascript:alert(1)"}
    key = store.public_key(job.id, job.read_token)
    get_client().set(key, json.dumps(planted).encode())
    # Django does not serve it: the record answers instead.
    answer = Client().get(f"/progress/{job.id}/{job.read_token}/").json()
    assert answer["state"] == "running" and answer["result_url"] is None
    # Copied from another job (a real seal, the wrong key): refused too.
    other = services.create_job(owner=alice, kind="demo", title="Other", params={})
    get_client().set(key, get_client().get(store.public_key(other.id, other.read_token)))
    assert Client().get(f"/progress/{job.id}/{job.read_token}/").json()["job"] == job.id
    # The worker's next write puts its own document back, planted "final" or not.
    get_client().set(key, json.dumps(planted).encode())
    record.message = "still going"
    store.write(record)
    assert _document(job)["state"] == "running" and _document(job)["message"] == "still going"


def test_the_job_page_and_the_start_answer_use_the_token_url(alice_client, alice):
    job = services.create_job(owner=alice, kind="top-customers", title="Top customers", params={})
    page = alice_client.get(f"/jobs/{job.id}/")
    assert f'data-progress-url="/progress/{job.id}/{job.read_token}/"' in page.content.decode()


def test_a_token_poll_that_finds_no_document_publishes_it_again(job):
    key = store.public_key(job.id, job.read_token)
    get_client().delete(key)  # expired while the job was queued, or memcached restarted
    polled = Client().get(f"/progress/{job.id}/{job.read_token}/")
    assert polled.status_code == 200 and _document(job) == polled.json()  # the next poll takes one get
    get_client().delete(key)
    missed = Client().get(f"/progress/{job.id}/{job.read_token}/", HTTP_X_PROGRESS_MISSED="1")
    assert missed.status_code == 200 and _document(job) == missed.json()  # nginx's next poll finds it
    # A wrong token publishes nothing.
    get_client().delete(key)
    assert Client().get(f"/progress/{job.id}/{'A' * 22}/").status_code == 404 and _document(job) is None


def test_a_token_poll_serves_the_published_document_as_it_is_less_its_seal(job):
    key = store.public_key(job.id, job.read_token)
    published = get_client().get(key)
    response = Client().get(f"/progress/{job.id}/{job.read_token}/")
    assert response.status_code == 200 and published.startswith(response.content[:-1])
    assert published[len(response.content) - 1 :].startswith(b',"seal":"')


def test_a_document_planted_under_the_token_key_is_refused(alice, job, caplog, monkeypatch):
    monkeypatch.setattr(tampering, "_warned", {})  # warned once a minute: this test sees its own warning
    record = services.begin_job(job)
    record.message = "the worker's own words"
    store.write(record)
    key = store.public_key(job.id, job.read_token)
    other = services.create_job(owner=alice, kind="demo", title="Other", params={})
    for planted in (
        b"<script>alert(1)</script>",
        b'{"job": "%s", "state": "succeeded"}' % other.id.encode(),  # another job's
        b'{"job": "%s", "state": "hacked", "final": true}' % job.id.encode(),
        b"[1, 2]",
        b"\x80\x04",
    ):
        get_client().set(key, planted)
        response = Client().get(f"/progress/{job.id}/{job.read_token}/")
        # The record's document instead (the record is sealed: it cannot be planted).
        assert response.status_code == 200, planted
        assert response.json()["message"] == "the worker's own words" and response.json()["job"] == job.id
    # Logged, without the read token (a bearer secret).
    warned = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert warned and f"pub:{job.id}.<token>" in warned[0]
    assert job.read_token not in caplog.text


def test_an_ended_job_is_answered_from_the_database_while_memcached_is_away(alice, job, settings):
    with services.track_job(job):
        pass
    running = services.create_job(owner=alice, kind="demo", title="Running", params={})
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    response = Client().get(f"/progress/{job.id}/{job.read_token}/")
    assert response.status_code == 200 and response.json()["state"] == "succeeded"
    assert Client().get(f"/progress/{job.id}/{'A' * 22}/").status_code == 404
    assert Client().get(f"/progress/{running.id}/{running.read_token}/").status_code == 503
