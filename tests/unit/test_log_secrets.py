"""Read tokens kept out of every log record (webfarm.core.paths.HideSecrets),
whatever handler the project gives the loggers that write request paths."""

import logging

from django.http import HttpResponse
from django.test import RequestFactory
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
