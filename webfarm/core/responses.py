"""The one place that reaches into Django's response internals."""

from typing import TypeVar

from django.http import HttpResponseBase

Response = TypeVar("Response", bound=HttpResponseBase)


def mark_logged(response: Response) -> Response:
    """Tell django.request and the activity log not to log this response
    again: a response the view has logged as what it is (a refusal), which
    Django would log as a server error. Django has no public switch for this;
    it reads `_has_been_logged` (django.utils.log.log_response)."""
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def was_logged(response: HttpResponseBase) -> bool:
    return getattr(response, "_has_been_logged", False) is True
