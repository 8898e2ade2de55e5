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
from webfarm.progress.web import job_rows, refuse_over_limit, start_response

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


def _form_again(request: HttpRequest, report: Report) -> dict:
    """The start page's context, the form filled in as sent (made only for
    browsers: fetch() callers get JSON)."""
    return {"report": report, "form": report.form_class(request.POST)}


@require_http_methods(["GET", "HEAD", "POST"])
# Over a limit is refused before the form is even read, and in a flood
# before the user is: a refusal must cost less than anything the farm
# serves (docs/operations.md). A session whose user was deactivated a moment
# ago is told the report type is busy rather than sent to log in; its next
# request that gets past this is logged out.
@refuse_over_limit(lambda request, kind: get_report(kind), template=START_PAGE, context=_form_again)
@login_required
def start(request: HttpRequest, kind: str) -> HttpResponse:
    report = get_report(kind)
    if report is None:
        raise Http404("No such report.")
    if request.method != "POST":
        first, last = selectors.order_date_range()
        form = report.form_class(initial={"date_from": first, "date_to": last})
        return render(request, "reports/start.html", {"report": report, "form": form})

    form = report.form_class(request.POST)
    if not form.is_valid():
        if wants_json(request):
            return JsonResponse({"error": "Invalid parameters.", "fields": form.errors}, status=400)
        return render(request, "reports/start.html", {"report": report, "form": form}, status=400)
    return _start(request, report, form)


def _start(request: HttpRequest, report: Report, form: forms.Form) -> HttpResponse:
    """Start a job of `report` from a valid form: 202 with its URLs (JSON) or
    a redirect to its page; the form again with why, if it cannot start."""
    return start_response(
        request,
        lambda: report.start(user=request.user, params=report.params_from_form(form.cleaned_data)),
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
    # Another app's job has a page of its own ("My jobs" links it: {{ job|job_page }}).
    if job is None or get_report(job.kind) is None:
        raise Http404("No such report.")
    files = list(job.files.filter(complete=True))
    return render(
        request,
        "reports/job_detail.html",
        {
            "job": job,
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
