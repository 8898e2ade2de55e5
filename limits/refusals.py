"""Saying no: the counter, the activity-log line, and the 503 itself."""

import logging
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.counters import count_soon
from core.http import json_error, wants_json
from core.paths import loggable_path
from core.responses import mark_logged

activity = logging.getLogger("activity")


def note_refusal(request: HttpRequest, reason: str, message: str, retry_after: int) -> None:
    count_soon("refused", reason=reason)
    user = request.user.get_username() if request.user.is_authenticated else None
    activity.warning(
        "refused (%s): %s",
        reason,
        message,
        extra={
            "event": "refused",
            "reason": reason,
            "user": user,
            "path": loggable_path(request),
            "retry_after": retry_after,
        },
    )


def refusal_response(
    request: HttpRequest,
    message: str,
    retry_after: int,
    *,
    template: str = "limits/busy.html",
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """503 + Retry-After: JSON for fetch() callers, a page for browsers."""
    if wants_json(request):
        response = json_error(503, message, retry_after=retry_after)
    else:
        context = {"message": message, "retry_after": retry_after, **(context or {})}
        response = render(request, template, context, status=503)
        response["Retry-After"] = str(retry_after)
        response["Cache-Control"] = "no-store"
    # A refusal is the farm working as meant: note_refusal logged it once, as
    # itself; Django would log every one again as a server error.
    return mark_logged(response)
