from collections.abc import Callable
from functools import wraps

from django import forms
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
    JsonResponse,
    QueryDict,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_http_methods, require_safe

from core.counters import count
from core.http import json_error, wants_json
from limits.decorators import limit_concurrency
from limits.refusals import note_refusal, refusal_response
from progress.api import (
    FINAL_STATES,
    BrokerUnavailable,
    Looked,
    ProgressUnavailable,
    StartRefused,
    get_job_type,
    job_record,
    job_rows,
    look_at_limits,
    record_from_job,
    refused_in_flood,
    start_job,
)
from reports import results, selectors
from reports.definitions.base import Report
from reports.registry import all_reports, get_report

UNAVAILABLE_RETRY_AFTER = 5


def _unavailable(request: HttpRequest, message: str) -> HttpResponse:
    if wants_json(request):
        return json_error(503, message, retry_after=UNAVAILABLE_RETRY_AFTER)
    response = render(request, "reports/unavailable.html", {"message": message}, status=503)
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER)
    return response


@require_safe
@login_required
def index(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "reports/index.html",
        {
            "reports": all_reports().values(),
            "dataset": selectors.dataset_summary(),
            "rows": job_rows(selectors.jobs_of(request.user, limit=5)),
        },
    )


def _shed_floods(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """In a flood of starts against a full limit, refuse a signed-in session
    before its user is read (a load shedder's place is in front of the
    expensive part): one memcached round trip. A session whose user was
    deactivated a moment ago is told the report type is busy rather than
    sent to log in; its next request that gets past this is logged out."""

    @wraps(view)
    def shed(request: HttpRequest, kind: str) -> HttpResponse:
        user_id = request.session.get(SESSION_KEY) if request.method == "POST" else None
        report = get_report(kind) if user_id is not None else None
        refusal = refused_in_flood(user_id=user_id, job_type=report) if report is not None else None
        if refusal is not None:
            return _refused(request, report, None, refusal)
        return view(request, kind)

    return shed


@require_http_methods(["GET", "HEAD", "POST"])
@_shed_floods
@login_required
def start(request: HttpRequest, kind: str) -> HttpResponse:
    report = get_report(kind)
    if report is None:
        raise Http404("No such report.")
    if request.method != "POST":
        first, last = selectors.order_date_range()
        form = report.form_class(initial={"date_from": first, "date_to": last})
        return render(request, "reports/start.html", {"report": report, "form": form})

    # Over a limit is refused before the form is even read: a refusal must
    # cost less than anything the farm serves (docs/operations.md).
    try:
        looked = look_at_limits(user=request.user, job_type=report)
    except StartRefused as refusal:
        return _refused(request, report, None, refusal)
    except ProgressUnavailable:
        return _unavailable(request, "The progress store is unavailable, so the job was not started.")
    form = report.form_class(request.POST)
    if not form.is_valid():
        if wants_json(request):
            return JsonResponse({"error": "Invalid parameters.", "fields": form.errors}, status=400)
        return render(request, "reports/start.html", {"report": report, "form": form}, status=400)
    return _start(request, report, form, looked)


def _refused(
    request: HttpRequest, report: Report, form: forms.Form | None, refusal: StartRefused
) -> HttpResponse:
    note_refusal(request, refusal.reason, refusal.message, refusal.retry_after)
    # Browsers get the form again, filled in, saying why and when to try again;
    # fetch() callers get JSON, and no form is made for them.
    if form is None and not wants_json(request):
        form = report.form_class(request.POST)
    context = {"report": report, "form": form, "refusal": refusal}
    return refusal_response(
        request, refusal.message, refusal.retry_after, template="reports/start.html", context=context
    )


def _start(
    request: HttpRequest, report: Report, form: forms.Form, looked: Looked | None = None
) -> HttpResponse:
    """Start a job of `report` from a valid form: 202 with its URLs (JSON) or
    a redirect to its page; the form again with why, if it cannot start."""
    try:
        params = report.params_from_form(form.cleaned_data)
        job = start_job(user=request.user, job_type=report, params=params, looked=looked)
    except StartRefused as refusal:
        return _refused(request, report, form, refusal)
    except ProgressUnavailable:
        return _unavailable(request, "The progress store is unavailable, so the job was not started.")
    except BrokerUnavailable as exc:
        if exc.full:
            return _unavailable(request, "The job queue is full right now, so the job was not started.")
        return _unavailable(request, "The job queue is unavailable, so the job was not started.")
    job_url = reverse("reports:job", args=[job.id])
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


@require_http_methods(["POST"])
@login_required
def again(request: HttpRequest, job_id: str) -> HttpResponse:
    """Start an ended job's report again with the same settings."""
    job = selectors.job_of(request.user, job_id)
    report = get_report(job.kind) if job else None
    if job is None or report is None:
        raise Http404("No such job.")
    if job.state not in FINAL_STATES:
        return (
            json_error(409, "This job has not ended yet.")
            if wants_json(request)
            else HttpResponseRedirect(reverse("reports:job", args=[job.id]))
        )
    # Checked again as if typed in: the settings of an old job may not suit the report today.
    form = report.form_class(_as_form_data(job.params))
    if not form.is_valid():
        return render(request, "reports/start.html", {"report": report, "form": form}, status=400)
    return _start(request, report, form)


def _as_form_data(params: object) -> QueryDict:
    data = QueryDict(mutable=True)
    for key, value in (params if isinstance(params, dict) else {}).items():
        if isinstance(value, list):
            data.setlist(key, [str(v) for v in value])
        elif value is not None:
            data[key] = str(value)
    return data


@require_safe
@login_required
def my_jobs(request: HttpRequest) -> HttpResponse:
    shown = request.GET.get("state", "")
    if shown not in selectors.JOB_FILTERS:
        message = f"Unknown filter; use one of: {', '.join(f for f in selectors.JOB_FILTERS if f)}."
        return json_error(400, message) if wants_json(request) else HttpResponseBadRequest(message)
    jobs = selectors.jobs_of(request.user, states=selectors.JOB_FILTERS[shown][1])
    if wants_json(request):
        # What the page polls to see jobs come and go; each bar follows its own job.
        listed = [{"id": job.id, "state": job.state} for job in jobs]
        version = ",".join(job["id"] for job in listed)
        response: HttpResponse = JsonResponse({"updated_at": version, "jobs": listed})
    else:
        filters = [(name, label, name == shown) for name, (label, _) in selectors.JOB_FILTERS.items()]
        context = {"rows": job_rows(jobs), "filters": filters, "shown": shown}
        response = render(request, "reports/my_jobs.html", context)
    # One URL, two answers: no cache may hand the list's JSON to the page.
    patch_vary_headers(response, ["Accept"])
    return response


@require_safe
@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = selectors.job_of(request.user, job_id)
    if job is None:
        raise Http404("No such job.")
    job_type = get_job_type(job.kind)
    if job_type is not None and job_type.page not in (None, "reports:job"):
        return HttpResponseRedirect(job_type.page_url(job.id))  # another app's job: its own page
    try:
        record = job_record(job_id=job.id, owner_id=request.user.pk)
    except ProgressUnavailable:
        record = record_from_job(job)  # the widget retries and says so
    files = list(job.files.filter(complete=True))
    return render(
        request,
        "reports/job_detail.html",
        {
            "job": job,
            "record": record,
            "files": files,
            "charts": [f for f in files if f.content_type.startswith("image/")],
            # The page shows files only once they exist: fetch it again when they do.
            "reload_on_success": not files,
            "ended_without_result": job.state in FINAL_STATES and job.state != "succeeded",
        },
    )


@require_safe
@login_required
@limit_concurrency(
    "downloads",
    total="DOWNLOADS",
    per_user="DOWNLOADS_PER_USER",
    message="Too many downloads at once right now; try again in a few seconds.",
)
def download(request: HttpRequest, job_id: str, name: str) -> HttpResponse:
    job = selectors.job_of(request.user, job_id)
    result = selectors.result_file(job, name) if job else None
    if result is None:
        raise Http404("No such file.")
    count("downloads", kind=job.kind)
    response = StreamingHttpResponse(results.iter_chunks(result), content_type=result.content_type)
    response["Content-Length"] = str(result.size)
    inline = result.content_type.startswith("image/") and "download" not in request.GET
    response["Content-Disposition"] = content_disposition_header(not inline, result.name)
    response["ETag"] = f'"{result.sha256}"'
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response
