"""What an app's views need to start jobs and show them, the same in every
app: a start, or why it did not start, as the answer (202 JSON or a redirect;
503 with Retry-After and the form again, saying why); a start over a limit
refused before the view reads its form; a job's rows for a list.

    @refuse_over_limit(lambda request: count_orders, template="counts/start.html",
                       context=lambda request, job_type: {"form": StartForm(request.POST)})
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
from functools import wraps
from typing import Any

from django.contrib.auth import SESSION_KEY
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from webfarm.core.http import json_error, wants_json
from webfarm.core.refusals import note_refusal, refusal_response
from webfarm.progress.exceptions import UNAVAILABLE_RETRY_AFTER, ProgressUnavailable, TryLater
from webfarm.progress.jobtype_base import JobTypeBase
from webfarm.progress.launching.admission import (
    Looked,
    StartRefused,
    look_at_limits,
    looked_early,
    refused_in_flood,
)
from webfarm.progress.models import Job
from webfarm.progress.selectors import job_rows
from webfarm.progress.sending import BrokerUnavailable

__all__ = ["TryLater", "job_rows", "refuse_over_limit", "start_response"]

Context = Callable[[], dict[str, Any]]
View = Callable[..., HttpResponse]


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


def refuse_over_limit(
    job_type_of: Callable[..., JobTypeBase | None],
    *,
    template: str,
    context: Callable[[HttpRequest, JobTypeBase], dict[str, Any]],
) -> Callable[[View], View]:
    """A view that starts jobs, its POSTs over a farm-wide limit refused
    before it runs (a refusal must cost less than anything the farm serves:
    its form is not even read), answered as start_response() answers them.
    Put it above login_required: in a flood of starts against a full limit,
    a signed-in session is refused before its user is read.

    `job_type_of(request, *args, **kwargs)`: the job type the POST would
    start (None: the view decides). `context(request, job_type)`: the page's
    context, for a browser's refusal (`template` with the form and why)."""

    def decorate(view: View) -> View:
        @wraps(view)
        def refusing(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            job_type = job_type_of(request, *args, **kwargs) if request.method == "POST" else None
            if job_type is None:
                return view(request, *args, **kwargs)
            kept = job_type

            def again() -> dict[str, Any]:
                return context(request, kept)

            refused = flood_refusal_response(request, job_type, template=template, context=again)
            if refused is not None:
                return refused
            if not request.user.is_authenticated:
                return view(request, *args, **kwargs)  # login_required answers
            looked = look_before_start(request, job_type, template=template, context=again)
            if isinstance(looked, HttpResponse):
                return looked
            with looked_early(request.user, job_type, looked):
                return view(request, *args, **kwargs)

        return refusing

    return decorate


def look_before_start(
    request: HttpRequest, job_type: JobTypeBase, *, template: str, context: Context
) -> Looked | HttpResponse:
    """Refuse a start over a limit before the form is even read (a refusal
    must cost less than anything the farm serves): what the limits looked
    like, for start_job() (through looked_early), or the answer to send."""
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


def _call(undo: Callable[[], object] | None) -> None:
    if undo is not None:
        undo()
