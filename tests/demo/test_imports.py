"""The customer import: a second job type, written against webfarm.progress.api
alone. Rows are checked one by one (pure functions), a run saves the good
ones and keeps the rejected ones with why, and the pages refuse bad files
with a message. The whole path with a real worker and browser is in
tests/browser/test_browser.py."""

import csv
import io
from datetime import date

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from demofarm.imports import rows
from demofarm.imports.jobs import import_customers
from demofarm.imports.models import RejectedRow, Upload
from demofarm.reports.models import Customer
from webfarm.progress.api import Job, JobType
from webfarm.progress.launching.admission import start_job
from webfarm.progress.launching.running import run_job
from webfarm.progress.registry import get_job_type
from webfarm.progress.selectors import job_record

pytestmark = pytest.mark.django_db

TODAY = date(2026, 1, 15)
COLUMNS = {"name": 0, "email": 1, "region": 2, "joined_on": 3}
GOOD = "Ada Lovelace,ADA@example.org,north,2024-05-01"
FILE = "\n".join(
    [
        "name,email,region,joined_on",
        GOOD,
        "Grace Hopper,grace@example.org,West,2023-12-09",
        "No Region,nr@example.org,Atlantis,2024-01-01",
        "Bad Mail,not-an-address,East,2024-01-01",
        "Again,ada@example.org,South,2024-01-01",
        "=HYPERLINK(1),known@example.com,East,2024-01-01",
    ]
).encode()


@pytest.mark.parametrize(
    "row, reason",
    [
        (",a@example.org,North,2024-01-01", "the name is empty"),
        ("x" * 101 + ",a@example.org,North,2024-01-01", "longer than 100"),
        ("A,a@example,North,2024-01-01", "is not an e-mail address"),
        ("A,a@example.org,Mars,2024-01-01", "region 'Mars' is not one of"),
        ("A,a@example.org,North,01/02/2024", "not written YYYY-MM-DD"),
        ("A,a@example.org,North,2024-02-30", "is not a date"),
        ("A,a@example.org,North,2027-01-01", "in the future"),
        ("A,a@example.org,North", "has 3 cells, not 4"),
        ("A\x00,a@example.org,North,2024-01-01", "NUL"),
    ],
)
def test_a_bad_row_is_rejected_with_a_sentence_saying_why(row, reason):
    with pytest.raises(rows.Rejected, match=reason):
        rows.check(row.split(","), COLUMNS, today=TODAY)


def test_a_good_row_is_normalised():
    fields = rows.check(GOOD.split(","), COLUMNS, today=TODAY)
    assert fields == {
        "name": "Ada Lovelace",
        "email": "ada@example.org",
        "region": "North",
        "joined_on": date(2024, 5, 1),
    }


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"name,email,region,joined_on\n", "no rows"),
        (b"name,mail,region,joined_on\nA,a@b.org,North,2024-01-01", "must name the columns"),
        (b"name,email,region,joined_on,name\nA,a@b.org,North,2024-01-01,A", "must name the columns"),
        (
            "name,email,region,joined_on\nÄ,a@b.org,North,2024-01-01".encode("latin-1"),
            "not UTF-8 text \\(line 2",
        ),
        (b"name,email,region,joined_on\n" + b"A,a@b.org,North,2024-01-01\n" * 4, "more than 3 rows"),
    ],
)
def test_a_file_that_cannot_be_imported_says_why(data, message):
    with pytest.raises(rows.BadFile, match=message):
        rows.read(data, max_rows=3)


def test_columns_in_any_order_and_case_and_a_byte_order_mark():
    columns, found = rows.read(
        "\ufeffJoined_On,Region,EMAIL,name\n2024-01-01,North,a@b.org,A\n".encode(), max_rows=9
    )
    assert columns == {"name": 3, "email": 2, "region": 1, "joined_on": 0}
    assert found == [(2, ["2024-01-01", "North", "a@b.org", "A"])]


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def _imported(user, data: bytes = FILE) -> Job:
    """An import started through the public API and run as its task would run it."""
    upload = Upload.objects.create(owner=user, name="customers.csv", data=data, size=len(data))
    job = import_customers.start(user=user, params={"upload": upload.pk, "name": upload.name})
    run_job(job_id=job.id)
    job.refresh_from_db()
    return job


def test_an_import_saves_the_good_rows_and_keeps_the_rejected_ones_with_why(alice):
    Customer.objects.create(name="Known", email="known@example.com", region="East", joined_on=TODAY)
    job = _imported(alice)
    assert job.state == "succeeded", job.error
    assert job.title == "Customer import: customers.csv"
    saved = Customer.objects.exclude(email="known@example.com").order_by("email")
    assert [(c.name, c.email, c.region) for c in saved] == [
        ("Ada Lovelace", "ada@example.org", "North"),
        ("Grace Hopper", "grace@example.org", "West"),
    ]
    reasons = dict(RejectedRow.objects.values_list("line", "reason"))
    assert reasons == {
        4: "the region 'Atlantis' is not one of North, South, East, West, Central",
        5: "'not-an-address' is not an e-mail address",
        6: "ada@example.org is already on line 2",
        7: "known@example.com is already a customer",
    }
    record = job_record(job_id=job.id, owner_id=alice.pk)
    assert record.message == "2 customers imported, 4 rows rejected"
    assert job.result_url == ""  # the import's page links the rejected rows
    upload = Upload.objects.get()
    assert (upload.imported, upload.rejected, bytes(upload.data)) == (2, 4, b"")  # the file's bytes freed


def test_running_an_import_again_after_its_commit_saves_nothing_twice(alice):
    first = _imported(alice)
    upload = Upload.objects.get()
    # A worker died after the commit: the retry runs the same upload again.
    again = import_customers.start(user=alice, params={"upload": upload.pk, "name": upload.name})
    run_job(job_id=again.id)
    again.refresh_from_db()
    assert again.state == "succeeded"
    assert Customer.objects.count() == 3  # imported once
    # It says what the first run did.
    assert job_record(job_id=again.id, owner_id=alice.pk).message == "3 customers imported, 3 rows rejected"
    assert job_record(job_id=first.id, owner_id=alice.pk).message == "3 customers imported, 3 rows rejected"


def test_a_file_whose_rows_all_fail_to_parse_fails_the_job_with_the_reason(alice):
    job = _imported(alice, b"name,email\nA,b")
    assert job.state == "failed"
    assert job.error.startswith("The first line must name the columns name, email, region, joined_on")
    assert Customer.objects.count() == 0


def test_the_job_type_is_registered_with_its_own_page():
    job_type = get_job_type("customer-import")
    assert job_type is import_customers
    assert job_type.page_url("A" * 22) == f"/imports/{'A' * 22}/"
    assert job_type.retry_on_lost and job_type.noun == "import"


# -- pages ----------------------------------------------------------------------------


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _post(client: Client, data: bytes, name: str = "customers.csv", **headers):
    return client.post("/imports/", {"file": SimpleUploadedFile(name, data, "text/csv")}, **headers)


def test_uploading_starts_an_import_and_redirects_to_its_page(alice):
    response = _post(_client(alice), FILE)
    job = Job.objects.get(kind="customer-import")
    assert response.status_code == 302 and response["Location"] == f"/imports/{job.id}/"
    page = _client(alice).get(f"/imports/{job.id}/")
    assert page.status_code == 200 and b"Customer import: customers.csv" in page.content
    # "My jobs" links an import to its own page.
    assert f'href="/imports/{job.id}/"'.encode() in _client(alice).get("/jobs/").content
    assert _client(alice).get(f"/jobs/{job.id}/").status_code == 404  # a report's page is for reports


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", b"The submitted file is empty"),
        (b"name;email;region;joined_on\n", b"The first line must name the columns"),
        (b"\xff\xfen\x00a\x00", b"not UTF-8 text"),
    ],
)
def test_a_bad_file_is_refused_at_once_with_a_message_and_nothing_is_started(alice, data, message):
    response = _post(_client(alice), data)
    assert response.status_code == 400 and message in response.content
    assert not Job.objects.exists() and not Upload.objects.exists()


def test_a_too_large_file_is_refused_before_it_is_read(alice, settings):
    settings.IMPORTS = {**settings.IMPORTS, "MAX_UPLOAD_BYTES": 100}
    # The body says it is long: refused without reading a byte of it.
    said = _post(_client(alice), FILE * 1000, HTTP_ACCEPT="application/json")
    assert said.status_code == 413 and "at most 100" in said.json()["error"]
    assert said.wsgi_request._stream._pos == 0  # nothing of the body was read
    # Short enough to be read, a file past the limit: cut off at the first chunk over it.
    page = _post(_client(alice), FILE)
    assert page.status_code == 413 and b"The file may be at most 100" in page.content
    assert not Upload.objects.exists()


def test_the_upload_form_is_still_csrf_protected(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert _post(client, FILE).status_code == 403
    assert not Upload.objects.exists()


def test_a_file_name_with_control_characters_is_made_printable(alice):
    response = _post(_client(alice), FILE, name="a\x00b\x1bc.csv", HTTP_ACCEPT="application/json")
    assert response.status_code == 202
    assert Upload.objects.get().name == "abc.csv"


def test_another_user_sees_neither_the_import_nor_its_rejected_rows(alice):
    job = _imported(alice)
    bob = _client(get_user_model().objects.create_user("bob", password="x"))
    assert bob.get(f"/imports/{job.id}/").status_code == 404
    assert bob.get(f"/imports/{job.id}/rejected.csv").status_code == 404
    assert Client().get(f"/imports/{job.id}/").status_code == 302  # to the login page


def test_the_rejected_rows_download_is_safe_to_open_in_a_spreadsheet(alice):
    Customer.objects.create(name="Known", email="known@example.com", region="East", joined_on=TODAY)
    job = _imported(alice)
    response = _client(alice).get(f"/imports/{job.id}/rejected.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(response.content.decode())))
    assert table[0] == ["line", "reason", "name", "email", "region", "joined_on"]
    assert [r[0] for r in table[1:]] == ["4", "5", "6", "7"]
    assert table[4][2] == "'=HYPERLINK(1)"  # a formula is not run by the program that opens it


class _Stray(JobType):
    name, title = "stray", "Not in any jobs.py"


def test_a_job_type_no_worker_can_find_is_refused_before_anything_is_recorded(alice):
    with pytest.raises(ValueError, match="not registered"):
        start_job(user=alice, job_type=_Stray(), params={})
    assert not Job.objects.exists()
