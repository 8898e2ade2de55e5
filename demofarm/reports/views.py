from collections.abc import Callable
from functools import wraps

from django import forms
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

from demofarm.reports import results, selectors
from demofarm.reports.definitions.base import Report
from demofarm.reports.registry import all_reports, get_report
from webfarm.core.counters import count
from webfarm.core.http import json_error, wants_json
from webfarm.limits.decorators import limit_concurrency
from webfarm.progress.web import (
    Looked,
    flood_refusal_response,
    job_rows,
    look_before_start,
    own_page,
    page_record,
    start_response,
)

START_PAGE = "reports/start.html"


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
        report = get_report(kind) if request.method == "POST" else None
        refused = None
        if report is not None:
            refused = flood_refusal_response(
                request, report, template=START_PAGE, context=_form_again(request, report)
            )
        return refused or view(request, kind)

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
    looked = look_before_start(request, report, template=START_PAGE, context=_form_again(request, report))
    if isinstance(looked, HttpResponse):
        return looked
    form = report.form_class(request.POST)
    if not form.is_valid():
        if wants_json(request):
            return JsonResponse({"error": "Invalid parameters.", "fields": form.errors}, status=400)
        return render(request, "reports/start.html", {"report": report, "form": form}, status=400)
    return _start(request, report, form, looked)


def _form_again(request: HttpRequest, report: Report) -> Callable[[], dict]:
    """The start page's context, the form filled in as sent (made only for
    browsers: fetch() callers get JSON)."""
    return lambda: {"report": report, "form": report.form_class(request.POST)}


def _start(
    request: HttpRequest, report: Report, form: forms.Form, looked: Looked | None = None
) -> HttpResponse:
    """Start a job of `report` from a valid form: 202 with its URLs (JSON) or
    a redirect to its page; the form again with why, if it cannot start."""
    return start_response(
        request,
        lambda: report.start(
            user=request.user, params=report.params_from_form(form.cleaned_data), looked=looked
        ),
        page="reports:job",
        template=START_PAGE,
        context=lambda: {"report": report, "form": form},
    )


@require_http_methods(["POST"])
@login_required
def again(request: HttpRequest, job_id: str) -> HttpResponse:
    """Start an ended job's report again with the same settings."""
    job = selectors.job_of(request.user, job_id)
    report = get_report(job.kind) if job else None
    if job is None or report is None:
        raise Http404("No such job.")
    if not job.ended:
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
    page = own_page(job)
    if page is not None and page != reverse("reports:job", args=[job.id]):
        return HttpResponseRedirect(page)  # another app's job: its own page
    record = page_record(job, request.user)
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
            "ended_without_result": job.ended and job.state != "succeeded",
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
