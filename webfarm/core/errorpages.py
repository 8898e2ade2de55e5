"""Django's 400, 403 and 404 pages, kept from answering 500 for a body they cannot read.

    # the project's root URLconf
    handler400 = "webfarm.core.errorpages.bad_request"
    handler403 = "webfarm.core.errorpages.permission_denied"
    handler404 = "webfarm.core.errorpages.page_not_found"

Django's error views take the CSRF token (requires_csrf_token), which for a
POST with a CSRF cookie reads the form in the body. A body Django cannot
parse (multipart without a boundary, a form in a charset other than UTF-8,
too many fields) then raises inside the error view, and Django answers a
POST to any unknown URL with a 500. These views answer it with a 400 that
says the body could not be read.
"""

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, UnreadablePostError
from django.http.multipartparser import MultiPartParserError
from django.template import TemplateDoesNotExist, loader
from django.views import defaults

UNREADABLE = "The request's body could not be read: it is not a form this site can parse."
BODY_ERRORS = (MultiPartParserError, BadRequest, SuspiciousOperation, UnreadablePostError)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    try:
        return defaults.bad_request(request, exception)
    except BODY_ERRORS:
        return unreadable_body(request)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    try:
        return defaults.permission_denied(request, exception)
    except BODY_ERRORS:
        return unreadable_body(request)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    try:
        return defaults.page_not_found(request, exception)
    except BODY_ERRORS:
        return unreadable_body(request)


def unreadable_body(request: HttpRequest) -> HttpResponse:
    """The 400 page, rendered without reading the body again."""
    try:
        body: str = loader.render_to_string(defaults.ERROR_400_TEMPLATE_NAME, {"reason": UNREADABLE}, request)
    except TemplateDoesNotExist:
        body = f"<h1>Bad Request (400)</h1><p>{UNREADABLE}</p>"
    return HttpResponseBadRequest(body)
