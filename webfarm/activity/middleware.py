"""Logs each request's activity (who, what, status, duration) to the site log.

Answered polls are counted (`requests_polled{area,status}`), not logged,
unless sampled (ACTIVITY["POLL_SAMPLE"]). A response the view logged as what
it is (a refusal, webfarm.core.responses.mark_logged) is not logged twice. Logging reads only what the view
already loaded: a request whose view never looked at request.user is logged
without a user rather than made to load the session and the user for the log.
"""

import logging
import random
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.functional import LazyObject, empty

from webfarm.activity.conf import get_config
from webfarm.activity.handler import LOGGER
from webfarm.activity.polling import area, is_poll
from webfarm.core.counters import count_soon
from webfarm.core.paths import hide_tokens, loggable_path
from webfarm.core.responses import was_logged

logger = logging.getLogger(LOGGER)


def loaded_username(request: HttpRequest) -> str | None:
    """The user's name if the request has loaded its user; never loads it."""
    user = request.__dict__.get("user")
    if user is None or (isinstance(user, LazyObject) and user._wrapped is empty):
        return None
    return user.get_username() if user.is_authenticated else None


class ActivityLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        status = response.status_code
        if was_logged(response):
            return response  # logged by the view as what it is (a refusal, with its reason)
        if status < 400 and is_poll(request.method, request.path):
            count_soon("requests_polled", area=area(request.path), status=str(status))
            if not _sampled():
                return response
        self._log(request, status, start)
        return response

    def poll_answered(self, path: str, status: int, username: str | None = None) -> None:
        """A poll answered without this middleware (webfarm.progress.pollgate's
        lanes; `username`: the signed-in user the session lane found):
        counted, and logged if sampled, as __call__ would."""
        count_soon("requests_polled", area=area(path), status=str(status))
        if _sampled():
            logger.info(
                "GET %s %s",
                hide_tokens(path),
                status,
                extra={"user": username, "method": "GET", "path": hide_tokens(path), "status": status},
            )

    def _log(self, request: HttpRequest, status: int, start: float) -> None:
        path = loggable_path(request)
        logger.info(
            "%s %s %s",
            request.method,
            path,
            status,
            extra={
                "user": loaded_username(request),
                "method": request.method,
                "path": path,
                "status": status,
                "duration_ms": round((time.perf_counter() - start) * 1000, 1),
            },
        )


def _sampled() -> bool:
    sample = get_config()["POLL_SAMPLE"]
    return bool(sample) and random.random() < sample
