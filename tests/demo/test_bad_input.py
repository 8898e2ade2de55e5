"""Any string in a URL or a form of the demo's pages gets a 4xx with a message,
never a 500 (tests/unit/test_bad_input.py: the library's)."""

from urllib.parse import quote

import pytest

from demofarm.polls.models import Poll
from tests.harness.hostile import HOSTILE

pytestmark = pytest.mark.django_db


def _segment(value: str) -> str:
    return quote(value, safe="")


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_ids_and_names_in_urls(client_and_job, value):
    client, job = client_and_job
    segment = _segment(value)
    responses = {
        "job page": client.get(f"/jobs/{segment}/"),
        "download": client.get(f"/jobs/{job.id}/files/{segment}"),
        "report form": client.get(f"/reports/{segment}/"),
        "report start": client.post(f"/reports/{segment}/", {"date_from": "2024-01-01"}),
        "poll": client.get(f"/polls/{segment}/"),
        "poll results": client.get(f"/polls/{segment}/results.json"),
        "vote": client.post(f"/polls/{segment}/vote/", {"choice": "1"}),
    }
    for what, response in responses.items():
        assert 400 <= response.status_code < 500, (what, value, response.status_code)


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_report_parameters(client_and_job, value):
    client, _ = client_and_job
    cases = [
        {"date_from": value, "date_to": "2025-01-01", "top": "10"},
        {"date_from": "2024-01-01", "date_to": "2025-01-01", "top": value},
    ]
    if value:  # an empty region means "all regions"
        cases.append({"date_from": "2024-01-01", "date_to": "2025-01-01", "top": "10", "region": value})
    for params in cases:
        response = client.post("/reports/top-customers/", params, HTTP_ACCEPT="application/json")
        assert response.status_code == 400, (params, response.status_code)
        assert response.json()["error"] == "Invalid parameters."


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_votes(client_and_job, value):
    client, _ = client_and_job
    poll = Poll.objects.create(question="q")
    poll.choices.create(text="a")
    response = client.post(f"/polls/{poll.id}/vote/", {"choice": value}, HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and response.json()["error"]


def test_reversed_date_range_is_refused_with_a_reason(client_and_job):
    client, _ = client_and_job
    response = client.post(
        "/reports/return-rates/",
        {"date_from": "2025-01-01", "date_to": "2024-01-01", "min_units": "1"},
    )
    assert response.status_code == 400
    assert b"The start date must not be after the end date." in response.content
