"""What an app's views need to start jobs and show them, the same in every
app: a start, or why it did not start, as the answer (202 JSON or a redirect;
503 with Retry-After and the form again, saying why); a job's record for its
page; its rows for a list.

    @require_POST
    @login_required
    def start(request):
        form = StartForm(request.POST)
        ...
        return start_response(
            request,
            lambda: count_orders.start(user=request.user, params=form.cleaned_data),
            page="counts:job",
            template="counts/start.html",
            context=lambda: {"form": form},
        )
"""

from collections.abc import Callable
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from webfarm.core.http import json_error, wants_json
from webfarm.core.refusals import note_refusal, refusal_response
from webfarm.progress import services
from webfarm.progress.exceptions import UNAVAILABLE_RETRY_AFTER, ProgressUnavailable
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.launching.admission import Looked, StartRefused, look_at_limits, refused_in_flood
from webfarm.progress.models import Job
from webfarm.progress.rebuilt import record_from_job
from webfarm.progress.records import JobRecord
from webfarm.progress.registry import get_job_type
from webfarm.progress.selectors import job_record, job_rows, jobs_seen_by
from webfarm.progress.sending import BrokerUnavailable

__all__ = [
    "BrokerUnavailable",
    "Looked",
    "ProgressUnavailable",
    "StartRefused",
    "cancel",
    "flood_refusal_response",
    "job_progress",
    "job_rows",
    "jobs_seen_by",
    "look_before_start",
    "own_page",
    "page_record",
    "start_response",
]

Context = Callable[[], dict[str, Any]]


def start_response(
    request: HttpRequest,
    start: Callable[[], Job],
    *,
    page: str,
    template: str,
    context: Context,
    not_started: Callable[[], object] | None = None,
) -> HttpResponse:
    """Call `start` and answer: 202 with the job's URLs for fetch() callers, a
    redirect to its page (the URL name `page`, taking the job id) for
    browsers. A start refused over a limit or that could not be recorded or
    sent is a 503 with Retry-After: JSON, or `template` again with
    `context()` and why. `not_started` undoes what the view made for the job
    (an upload, say)."""
    try:
        job = start()
    except StartRefused as refusal:
        _call(not_started)
        return refused_response(request, refusal, template=template, context=context)
    except ProgressUnavailable:
        _call(not_started)
        message = "The progress store is unavailable, so the job was not started. Please try again."
        return unavailable_response(request, message, template=template, context=context)
    except BrokerUnavailable as exc:
        _call(not_started)
        what = "full right now" if exc.full else "unavailable"
        message = f"The job queue is {what}, so the job was not started. Please try again."
        return unavailable_response(request, message, template=template, context=context)
    job_url = reverse(page, args=[job.id])
    if wants_json(request):
        return JsonResponse(
            {
                "job": job.id,
                "job_url": job_url,
                "progress_url": reverse("progress:detail", args=[job.id]),
                # The same document without a session: nginx serves it from memcached.
                "public_progress_url": reverse("progress:by_token", args=[job.id, job.read_token]),
            },
            status=202,
        )
    return HttpResponseRedirect(job_url)


def look_before_start(
    request: HttpRequest, job_type: JobTypeBase, *, template: str, context: Context
) -> Looked | HttpResponse:
    """Refuse a start over a limit before the form is even read (a refusal
    must cost less than anything the farm serves): what the limits looked
    like, for start_job(looked=...), or the answer to send."""
    try:
        return look_at_limits(user=request.user, job_type=job_type)
    except StartRefused as refusal:
        return refused_response(request, refusal, template=template, context=context)
    except ProgressUnavailable:
        message = "The progress store is unavailable, so the job was not started. Please try again."
        return unavailable_response(request, message, template=template, context=context)


def flood_refusal_response(
    request: HttpRequest, job_type: JobTypeBase, *, template: str, context: Context
) -> HttpResponse | None:
    """In a flood of starts against a full limit, the refusal for a signed-in
    session before its user is read (one memcached round trip), or None: go
    on the usual way. Call it before login_required does its query."""
    user_id = request.session.get(SESSION_KEY) if request.method == "POST" else None
    refusal = refused_in_flood(user_id=user_id, job_type=job_type) if user_id is not None else None
    if refusal is None:
        return None
    return refused_response(request, refusal, template=template, context=context)


def refused_response(
    request: HttpRequest, refusal: StartRefused, *, template: str, context: Context
) -> HttpResponse:
    """503 + Retry-After, counted and logged: JSON for fetch() callers (no
    context is made for them), `template` with the form and why for browsers."""
    note_refusal(request, refusal.reason, refusal.message, refusal.retry_after)
    extra = {} if wants_json(request) else {**context(), "refusal": refusal}
    return refusal_response(request, refusal.message, refusal.retry_after, template=template, context=extra)


def unavailable_response(
    request: HttpRequest, message: str, *, template: str, context: Context
) -> HttpResponse:
    if wants_json(request):
        return json_error(503, message, retry_after=UNAVAILABLE_RETRY_AFTER)
    response = render(request, template, {**context(), "unavailable": message}, status=503)
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


def page_record(job: Job, user: AbstractBaseUser) -> JobRecord:
    """The job's record for its page (the owner's), or one made from its row
    when memcached is away: the bar retries and says so."""
    try:
        record = job_record(job_id=job.id, owner_id=user.pk)
    except ProgressUnavailable:
        return record_from_job(job)
    return record_from_job(job) if record is None else record


def job_progress(job: Job) -> dict[str, Any]:
    """The job's progress as its poll answers it (state, percent, stage,
    message, ETA, metadata...), for any caller on any node: from memcached,
    or from its row when memcached is away or lost the record."""
    try:
        record = job_record(job_id=job.id, owner_id=None)
    except ProgressUnavailable:
        record = None
    return (record or record_from_job(job)).public()


def cancel(job: Job) -> dict[str, Any]:
    """Ask the job to stop (whoever may: the caller decides): a queued job
    ends at once, a running one at its next progress write or check. Returns
    its progress as it stands. Raises ProgressUnavailable."""
    return services.cancel_job(job=job).public()


def own_page(job: Job) -> str | None:
    """The URL of the page the job's type names for its jobs (None: none, or
    the type is gone): a page of one app that is shown another app's job
    sends the browser there."""
    job_type = get_job_type(job.kind)
    return job_type.page_url(job.id) if job_type is not None and job_type.page else None


def _call(undo: Callable[[], object] | None) -> None:
    if undo is not None:
        undo()
