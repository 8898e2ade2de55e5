from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST, require_safe

from webfarm.core.counters import count_soon
from webfarm.core.http import json_error, json_polled, polled, wants_json
from webfarm.core.users import user_with
from webfarm.progress import selectors, services, store
from webfarm.progress.exceptions import UNAVAILABLE_RETRY_AFTER, ProgressUnavailable
from webfarm.progress.ids import is_valid_job_id


@polled
@require_safe
def progress_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    # The user and the record in one round trip, after the session's.
    key = store.record_key(job_id) if is_valid_job_id(job_id) else None
    user, found = user_with(request, [key] if key else [])
    if not user.is_authenticated:
        return json_error(401, "Log in to see job progress.")
    # Staff follow everyone's jobs (the farm dashboard); users only their own.
    owner_id = selectors.owner_scope(pk=user.pk, is_active=user.is_active, is_staff=user.is_staff)
    raw = store.UNREAD if found is None or key is None else found.get(key)

    def lookup() -> dict[str, Any] | None:
        record = selectors.job_record(job_id=job_id, owner_id=owner_id, raw=raw)
        return None if record is None else record.public()

    return _polled(request, lookup)


@polled
@require_safe
def progress_by_token(request: HttpRequest, job_id: str, token: str) -> HttpResponse:
    """The same document, for whoever holds the job's read token: no session,
    as on nginx's fast path, which answers this URL from memcached and falls
    back here when the document is not there (or the token is wrong).

    A poll is what nginx does: one get of the published document, sent as it
    is. When none is published (nginx marks its fall-backs with
    X-Progress-Missed; a queued or silent job's document lives a few
    heartbeats), the record is read and its document published again, so the
    next polls take one get."""
    missed = request.headers.get("X-Progress-Missed") == "1"

    def lookup() -> bytes | dict[str, Any] | None:
        document = None if missed else selectors.published_document(job_id=job_id, token=token)
        if document is not None:
            return document
        record = services.republished(selectors.job_record_by_token(job_id=job_id, token=token))
        return None if record is None else record.public()

    return _polled(request, lookup)


def _polled(request: HttpRequest, lookup: Callable[[], bytes | dict[str, Any] | None]) -> HttpResponse:
    try:
        document = lookup()
    except ProgressUnavailable:
        return json_error(503, "Progress is temporarily unavailable.", retry_after=UNAVAILABLE_RETRY_AFTER)
    if document is None:
        return json_error(404, "No such job.")
    count_soon("progress_polls")
    return json_polled(request, document)


@require_POST
def cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    if not request.user.is_authenticated:
        return json_error(401, "Log in to cancel a job.")
    job = selectors.jobs_seen_by(request.user).filter(pk=job_id).first() if is_valid_job_id(job_id) else None
    if job is None:
        return json_error(404, "No such job.")
    try:
        record = services.cancel_job(job=job)
    except ProgressUnavailable:
        return json_error(
            503, "Cannot reach the progress store; try again.", retry_after=UNAVAILABLE_RETRY_AFTER
        )
    if wants_json(request):
        return JsonResponse(record.public(), status=202)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        next_url = "/"
    return HttpResponseRedirect(next_url)
