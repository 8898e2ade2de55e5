"""limit_concurrency: a farm-wide limit on any expensive view.

    @limit_concurrency("downloads", total="DOWNLOADS", per_user="DOWNLOADS_PER_USER")
    def download(request, ...): ...

The names after total/per_user are keys of settings.LIMITS (read per request,
so they can change without a restart of the decorator). Over the limit the
view is not called: 503 + Retry-After at once. A streamed response keeps its
slot until the last byte is sent, renewing the lease as it goes.
"""

import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from limits.conf import get_config
from limits.refusals import note_refusal, refusal_response
from limits.slots import Lease, LimitReached, SlotsUnavailable, acquire

View = Callable[..., HttpResponse]


def limit_concurrency(
    name: str,
    *,
    total: str | None = None,
    per_user: str | None = None,
    message: str = "",
    fail_open: bool = False,
) -> Callable[[View], View]:
    """fail_open: with memcached away, run the view unlimited rather than
    refuse (for views that have a fallback of their own, like votes)."""

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            config = get_config()
            scopes = []
            if total:
                scopes.append((name, int(config[total])))
            if per_user and request.user.is_authenticated:
                scopes.append((f"{name}-user:{request.user.pk}", int(config[per_user])))
            retry_after = int(config["RETRY_AFTER"])
            try:
                lease = acquire(
                    scopes,
                    f"request:{secrets.token_hex(8)}",
                    ttl=config["REQUEST_LEASE"],
                    attempts=config["ATTEMPTS"],
                    pause=config["PAUSE"],
                )
            except LimitReached as refusal:
                text = message or f"Too many {name} at once right now; try again in {retry_after} s."
                note_refusal(request, refusal.scope.split(":")[0], text, retry_after)
                return refusal_response(request, text, retry_after)
            except SlotsUnavailable:
                if fail_open:
                    return view(request, *args, **kwargs)
                text = f"The farm cannot check its {name} limit right now; try again in {retry_after} s."
                note_refusal(request, "limits_unavailable", text, retry_after)
                return refusal_response(request, text, retry_after)
            try:
                response = view(request, *args, **kwargs)
            except BaseException:
                lease.release()
                raise
            if isinstance(response, StreamingHttpResponse):
                response.streaming_content = _renewing(response.streaming_content, lease)
                response._resource_closers.append(lease.release)
            else:
                lease.release()
            return response

        return wrapped

    return decorate


def _renewing(chunks: Iterable[bytes], lease: Lease) -> Iterator[bytes]:
    """Renew the lease at a third of its length while the chunks go out."""
    renewed = time.monotonic()
    for chunk in chunks:
        if time.monotonic() - renewed > lease.ttl / 3:
            lease.renew()
            renewed = time.monotonic()
        yield chunk
