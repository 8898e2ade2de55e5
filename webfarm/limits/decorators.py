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

from webfarm.core.refusals import note_refusal, refusal_response
from webfarm.core.slots import Lease, LimitReached, SlotsUnavailable, acquire
from webfarm.limits.conf import get_config

View = Callable[..., HttpResponse]
# The page a browser is shown when a limit says no.
BUSY = "webfarm_limits/busy.html"


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
                return refusal_response(request, text, retry_after, template=BUSY)
            except SlotsUnavailable:
                if fail_open:
                    return view(request, *args, **kwargs)
                text = f"The farm cannot check its {name} limit right now; try again in {retry_after} s."
                note_refusal(request, "limits_unavailable", text, retry_after)
                return refusal_response(request, text, retry_after, template=BUSY)
            try:
                response = view(request, *args, **kwargs)
            except BaseException:
                lease.release()
                raise
            if isinstance(response, StreamingHttpResponse):
                response.streaming_content = _Renewing(response.streaming_content, lease)
            else:
                lease.release()
            return response

        return wrapped

    return decorate


class _Renewing:
    """The response's chunks, renewing the lease at a third of its length
    while they go out, and releasing it when the response is closed. Django
    closes the streaming content with the response (anything with close()),
    also when the client went away before the first chunk."""

    def __init__(self, chunks: Iterable[bytes], lease: Lease) -> None:
        self._chunks = iter(chunks)
        self._lease = lease
        self._renewed = time.monotonic()

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if time.monotonic() - self._renewed > self._lease.ttl / 3:
            self._lease.renew()
            self._renewed = time.monotonic()
        return next(self._chunks)

    def close(self) -> None:
        self._lease.release()
        close = getattr(self._chunks, "close", None)
        if close is not None:
            close()
