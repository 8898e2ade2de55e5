"""Logs each request's activity (who, what, status, duration) to the site log."""

import logging
import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from core.paths import loggable_path

logger = logging.getLogger("activity")


class ActivityLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        start = time.perf_counter()
        response = self.get_response(request)
        user = getattr(request, "user", None)
        path = loggable_path(request)
        logger.info(
            "%s %s %s",
            request.method,
            path,
            response.status_code,
            extra={
                "user": user.get_username() if user is not None and user.is_authenticated else None,
                "method": request.method,
                "path": path,
                "status": response.status_code,
                "duration_ms": round((time.perf_counter() - start) * 1000, 1),
            },
        )
        return response
