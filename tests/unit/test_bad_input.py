"""Any string in a URL or a form gets a 4xx with a message, never a 500:
the library's pages, and a project's that start jobs through it."""

from urllib.parse import quote

import pytest
from django.test import Client

from tests.harness.hostile import HOSTILE

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_ids_and_names_in_urls(client_and_job, value):
    client, job = client_and_job
    segment = quote(value, safe="")
    responses = {
        "progress": client.get(f"/progress/{segment}/"),
        "token poll": client.get(f"/progress/{job.id}/{segment}/"),
        "cancel": client.post(f"/progress/{segment}/cancel/"),
        "task page": client.get(f"/tasks/{segment}/"),
        "job page": client.get(f"/jobs/{segment}/"),
        "start form": client.get(f"/start/{segment}/"),
        "start": client.post(f"/start/{segment}/", {"steps": "3"}),
        "download": client.get(f"/download/{segment}/"),
    }
    for what, response in responses.items():
        assert 400 <= response.status_code < 500, (what, value, response.status_code)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_job_parameters(client_and_job, value):
    client, _ = client_and_job
    cases = [{"steps": value}]
    if value:  # pause and parts may be left empty
        cases += [{"steps": "3", "pause": value}, {"steps": "3", "parts": value}]
    for params in cases:
        response = client.post("/start/count-parts/", params, HTTP_ACCEPT="application/json")
        assert response.status_code == 400, (params, response.status_code)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_login(value):
    response = Client(raise_request_exception=False).post(
        "/accounts/login/", {"username": value, "password": value}
    )
    assert response.status_code == 200
    assert b'class="errorlist' in response.content  # the form again, with why
