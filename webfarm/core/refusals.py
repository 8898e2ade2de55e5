"""Saying no: the counter, the line in the site's activity log, and the 503
(or 429) itself, for every app that refuses a request it could serve later."""

import logging
import threading
import time
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from webfarm.core.client import client_epoch
from webfarm.core.counters import count_soon
from webfarm.core.http import json_error, wants_json
from webfarm.core.paths import loggable_path
from webfarm.core.responses import mark_logged

# The site's activity log (LOGGING routes this logger to it).
activity = logging.getLogger("activity")


# A flood of refusals is logged as a line a second per reason, which says how
# many it stands for; the counter (refused{reason}) counts every one.
LOG_EVERY = 1.0
_lock = threading.Lock()
# (client epoch, reason) -> (last line at, refusals since): per memcached setting, as the counter.
_logged: dict[tuple[int, str], tuple[float, int]] = {}


def note_refusal(
    request: HttpRequest, reason: str, message: str, retry_after: int, *, status: int = 503
) -> None:
    count_soon("refused", reason=reason)
    now, key = time.monotonic(), (client_epoch(), reason)
    with _lock:
        last, since = _logged.get(key, (-LOG_EVERY, 0))
        if now - last < LOG_EVERY:
            _logged[key] = (last, since + 1)
            return
        if len(_logged) > 1000:
            _logged.clear()
        _logged[key] = (now, 0)
    user = request.user.get_username() if request.user.is_authenticated else None
    activity.warning(
        "refused (%s): %s",
        reason,
        message,
        extra={
            "event": "refused",
            "reason": reason,
            "user": user,
            "method": request.method,
            "path": loggable_path(request),
            "status": status,
            "retry_after": retry_after,
            # Refusals of this reason in this process since the last line, not logged one by one.
            "also_refused": since,
        },
    )


def refusal_response(
    request: HttpRequest,
    message: str,
    retry_after: int,
    *,
    template: str,
    context: dict[str, Any] | None = None,
) -> HttpResponse:
    """503 + Retry-After: JSON for fetch() callers, a page for browsers."""
    response: HttpResponse
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
