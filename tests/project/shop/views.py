"""Pages that start and show jobs, as a project writes them with
webfarm.progress.web."""

from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_http_methods, require_safe

from webfarm.core.http import polled
from webfarm.limits.decorators import limit_concurrency
from webfarm.progress.api import Job, JobType
from webfarm.progress.registry import get_job_type
from webfarm.progress.web import job_rows, refuse_over_limit, start_response

START_PAGE = "shop/start.html"
MAX_DOWNLOAD = 10_000_000


class CountForm(forms.Form):
    steps = forms.IntegerField(min_value=1, max_value=100_000, initial=10)
    pause = forms.FloatField(min_value=0, max_value=1, initial=0, required=False)
    parts = forms.IntegerField(min_value=1, max_value=64, required=False)


def _shop_type(request: HttpRequest, kind: str) -> JobType | None:
    job_type = get_job_type(kind)
    return job_type if isinstance(job_type, JobType) else None


def _form_again(request: HttpRequest, job_type: Any) -> dict[str, Any]:
    return {"job_type": job_type, "form": CountForm(request.POST)}


@require_safe
@ensure_csrf_cookie
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", {"form": CountForm()})


@require_http_methods(["GET", "HEAD", "POST"])
@refuse_over_limit(_shop_type, template=START_PAGE, context=_form_again)
@login_required
def start(request: HttpRequest, kind: str) -> HttpResponse:
    job_type = _shop_type(request, kind)
    if job_type is None:
        raise Http404("No such job type.")
    form = CountForm(request.POST or None)
    if request.method != "POST":
        return render(request, START_PAGE, {"job_type": job_type, "form": form})
    if not form.is_valid():
        return render(request, START_PAGE, {"job_type": job_type, "form": form}, status=400)
    params = {key: value for key, value in form.cleaned_data.items() if value is not None}
    return start_response(
        request,
        lambda: job_type.start(user=request.user, params=params),
        page="shop:job",
        template=START_PAGE,
        context=lambda: {"job_type": job_type, "form": form},
    )


@require_safe
@login_required
def jobs(request: HttpRequest) -> HttpResponse:
    mine = Job.objects.filter(owner=request.user).order_by("-created_at")[:50]
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"jobs": [{"id": job.id, "state": job.state} for job in mine]})
    return render(request, "shop/jobs.html", {"rows": job_rows(mine)})


@polled
@require_safe
def counter(request: HttpRequest, number: int) -> HttpResponse:
    """What a page polls every second: a number's live count (here, the number)."""
    return JsonResponse({"counter": number})


@require_safe
@login_required
def job(request: HttpRequest, job_id: str) -> HttpResponse:
    found = Job.objects.filter(pk=job_id, owner=request.user).first()
    if found is None:
        raise Http404("No such job.")
    return render(request, "shop/job.html", {"job": found})


@require_safe
@login_required
@limit_concurrency(
    "downloads",
    total="DOWNLOADS",
    per_user="DOWNLOADS_PER_USER",
    message="Too many downloads at once right now; try again in a few seconds.",
)
def download(request: HttpRequest, size: int) -> HttpResponse:
    """`size` bytes, streamed a kilobyte at a time: the slot is held until the last."""
    if size > MAX_DOWNLOAD:
        return HttpResponseBadRequest(f"At most {MAX_DOWNLOAD} bytes.")
    return StreamingHttpResponse(b"x" * min(1024, size - sent) for sent in range(0, size, 1024))
