"""The report pages: lists of live bars, the job page, starting a report."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from tests.harness.processes import free_port
from webfarm.progress import services, store

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client():
    alice = get_user_model().objects.create_user("alice", password="x")
    client = Client()
    client.force_login(alice)
    return alice, client


def test_my_jobs_shows_live_and_ended_jobs_without_polling_ended_ones(alice_client):
    alice, client = alice_client
    running = services.create_job(owner=alice, kind="demo", title="Running one", params={})
    record = services.begin_job(running)
    record.percent, record.stage = 42.0, "reading orders"
    store.write(record)
    done = services.create_job(owner=alice, kind="demo", title="Finished one", params={})
    with services.track_job(done):
        pass

    page = client.get("/jobs/").content.decode()
    running_html = page[page.index("Running one") :]
    done_html = page[page.index("Finished one") : page.index("Running one")]
    assert 'aria-valuenow="42"' in running_html and "data-final" not in running_html.split("</li>")[0]
    assert 'aria-valuenow="100"' in done_html and "data-final" in done_html


def test_other_users_jobs_are_not_listed(alice_client):
    _, client = alice_client
    bob = get_user_model().objects.create_user("bob", password="x")
    services.create_job(owner=bob, kind="demo", title="Bob's secret", params={})
    assert b"Bob&#x27;s secret" not in client.get("/jobs/").content
    assert b"Bob&#x27;s secret" not in client.get("/").content


def test_starting_needs_login_and_unknown_reports_are_404(alice_client):
    _, client = alice_client
    anonymous = Client().get("/reports/top-customers/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")
    assert client.get("/reports/no-such-report/").status_code == 404
    form = client.get("/reports/top-customers/")
    assert form.status_code == 200 and b'name="top"' in form.content


def test_generating_data_without_memcached_says_what_that_means(settings, caplog):
    # At set-up memcached is not running yet: a plain note, not a warning.
    settings.MEMCACHED = {**settings.MEMCACHED, "SERVERS": [f"127.0.0.1:{free_port()}"]}
    out = StringIO()
    call_command("generate_orders", orders=10, customers=5, products=3, verbosity=0, stdout=out)
    assert "memcached is not reachable" in out.getvalue() and "300 s" in out.getvalue()
    assert not [record for record in caplog.records if record.levelname == "WARNING"]


def test_the_dataset_summary_is_computed_once_and_forgotten_when_data_is_regenerated(alice_client):
    _, client = alice_client
    assert b"The shop data: 0 orders" in client.get("/").content
    call_command("generate_orders", orders=300, customers=50, products=20, verbosity=0)
    # generate_orders forgot the cached summary: the new counts show at once.
    page = client.get("/").content.decode()
    assert "The shop data: 300 orders" in page and "by 50 customers, over 20 products" in page
    form = client.get("/reports/top-customers/").content.decode()
    assert 'name="date_from" value="20' in form


def test_an_ended_job_starts_again_with_the_same_settings(alice_client):
    from webfarm.progress.exceptions import JobFailed
    from webfarm.progress.models import Job

    alice, client = alice_client
    params = {"date_from": "2024-01-01", "date_to": "2024-06-30", "regions": ["North", "East"]}
    failed = services.create_job(owner=alice, kind="sales-by-region", title="t", params=params)
    with services.track_job(failed):  # ends it as failed, with the reason
        raise JobFailed("The database went away.")
    page = client.get(f"/jobs/{failed.id}/").content.decode()
    assert "Start it again with the same settings" in page and 'class="again" data-again-for' in page
    form_tag = page[page.index('class="again"') :].split(">", 1)[0]
    assert "hidden" not in form_tag  # a failed job: offered at once

    answer = client.post(f"/jobs/{failed.id}/again/")
    again = Job.objects.exclude(pk=failed.pk).get()
    assert answer.status_code == 302 and answer["Location"] == f"/jobs/{again.id}/"
    assert (again.kind, again.params, again.state) == ("sales-by-region", params, "queued")
    # Not for a job still going, nor another user's, nor by GET.
    assert client.post(f"/jobs/{again.id}/again/", HTTP_ACCEPT="application/json").status_code == 409
    bob = Client()
    bob.force_login(get_user_model().objects.create_user("bob", password="x"))
    assert bob.post(f"/jobs/{failed.id}/again/").status_code == 404
    assert client.get(f"/jobs/{failed.id}/again/").status_code == 405
    assert Job.objects.count() == 2


def test_my_jobs_filters_by_state_and_lists_its_jobs_as_json_for_the_page_to_poll(alice_client):
    alice, client = alice_client
    running = services.create_job(owner=alice, kind="demo", title="Running one", params={})
    services.begin_job(running)
    done = services.create_job(owner=alice, kind="demo", title="Finished one", params={})
    with services.track_job(done):
        pass
    cancelled = services.create_job(owner=alice, kind="demo", title="Cancelled one", params={})
    services.cancel_job(job=cancelled)

    def titles(state: str) -> list[str]:
        page = client.get(f"/jobs/?state={state}").content.decode()
        return [t for t in ("Running one", "Finished one", "Cancelled one") if t in page]

    assert titles("") == ["Running one", "Finished one", "Cancelled one"]
    assert titles("running") == ["Running one"]
    assert titles("finished") == ["Finished one"]
    assert titles("failed") == ["Cancelled one"]
    assert 'aria-current="page">Finished</a>' in client.get("/jobs/?state=finished").content.decode()

    listed = client.get("/jobs/?state=running", HTTP_ACCEPT="application/json")
    assert listed.json() == {"updated_at": running.id, "jobs": [{"id": running.id, "state": "running"}]}
    assert "Accept" in listed["Vary"]
    bad = client.get("/jobs/?state=%00nope")
    assert bad.status_code == 400 and b"Unknown filter" in bad.content


def test_the_site_has_an_icon_where_browsers_ask_for_one(client, admin_user):
    """Every first visit asks for /favicon.ico: the icon, not a 404 in the log."""
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith(".svg")
    client.force_login(admin_user)
    assert 'rel="icon"' in client.get("/admin/").content.decode()
