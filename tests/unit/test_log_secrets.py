"""Read tokens kept out of every log record (webfarm.core.paths.HideSecrets),
whatever handler the project gives the loggers that write request paths."""

import logging

import pytest
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.utils.log import log_response

JOB, TOKEN = "J" * 22, "T" * 22


def test_djangos_request_log_hides_the_token_and_drops_the_request(caplog):
    request = RequestFactory().get(f"/progress/{JOB}/{TOKEN}/")

    with caplog.at_level(logging.WARNING, logger="django.request"):
        log_response("%s: %s", "Not Found", request.path, response=HttpResponse(status=404), request=request)
    (record,) = caplog.records
    assert record.getMessage() == f"Not Found: /progress/{JOB}/<token>/"
    # An e-mail to the admins would write the request's path and environ out.
    assert record.request is None


def test_gunicorns_access_atoms_are_hidden_in_place():
    """gunicorn hands its access log a dict of its own kind (missing keys read
    as "-"): the filter hides the token in it without replacing it."""

    class Atoms(dict):
        def __getitem__(self, key):
            return super().get(key, "-")

    atoms = Atoms(r=f"GET /progress/{JOB}/{TOKEN}/ HTTP/1.1", s="200")
    record = logging.LogRecord(
        "gunicorn.access", logging.INFO, __file__, 1, "%(r)s %(s)s %(b)s", (atoms,), None
    )
    assert logging.getLogger("gunicorn.access").filter(record)
    assert record.args is atoms
    assert record.getMessage() == f"GET /progress/{JOB}/<token>/ HTTP/1.1 200 -"


# Every form of a token URL that the router or nginx's fast path answers or
# refuses, as the audit sent them: each wrote the raw token somewhere.
FORMS = [
    f"/progress/{JOB}/{TOKEN}",  # no slash: Django redirects
    f"//progress/{JOB}/{TOKEN}/",
    f"/progress//{JOB}/{TOKEN}/",  # nginx merges the slashes and answers 200
    f"/progress/{JOB}/{TOKEN}/x/",
    f"/progress/{JOB}/{TOKEN}/cancel/",
    f"/progress/{JOB}/{TOKEN};x/",
    f"/progress/{JOB}%2F{TOKEN}/",  # gunicorn decodes it to a slash
    f"/progress/{JOB}/%54{TOKEN[1:]}/",  # an escaped letter of the token
]


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_token_url_is_hidden_in_gunicorns_access_line(form):
    atoms = {"r": f"GET {form} HTTP/1.1", "U": form, "s": "404"}
    record = logging.LogRecord(
        "gunicorn.access", logging.INFO, __file__, 1, "%(r)s %(U)s %(s)s", (atoms,), None
    )
    assert logging.getLogger("gunicorn.access").filter(record)
    line = record.getMessage()
    assert TOKEN not in line and TOKEN[1:] not in line and "<token>" in line, line
    assert JOB in line  # the job stays: the log says which job was asked for


@pytest.mark.django_db
@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_a_token_url_is_hidden_in_the_site_and_request_logs(form, caplog):
    """The site log (webfarm.activity) and Django's request log, through a
    real request to the site."""
    with caplog.at_level(logging.INFO):
        Client().get(form)
    written = [record.getMessage() for record in caplog.records]
    assert written, "nothing logged: the test proves nothing"
    assert not [line for line in written if TOKEN in line or TOKEN[1:] in line], written
