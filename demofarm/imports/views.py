import csv
import io

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat
from django.utils.http import content_disposition_header
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_safe

from demofarm.imports.conf import get_config
from demofarm.imports.forms import UploadForm
from demofarm.imports.jobs import import_customers
from demofarm.imports.models import Upload
from demofarm.imports.selectors import import_of, imports_of, upload_of
from demofarm.imports.services import rejected_csv_rows
from demofarm.imports.uploads import cut_off, declared_too_large, limit_upload
from demofarm.reports.definitions.base import safe_cell
from webfarm.core.http import json_error, wants_json
from webfarm.progress.web import job_rows, start_response

PREVIEW_ROWS = 20
PAGE = "imports/index.html"


def _page(request: HttpRequest, form: UploadForm, status: int = 200, **extra: object) -> HttpResponse:
    context = {"form": form, "rows": job_rows(imports_of(request.user)), **extra}
    return render(request, PAGE, context, status=status)


def _printable(name: str) -> str:
    # A file name is the user's: no control characters (a NUL fails PostgreSQL) in titles.
    return "".join(c for c in name if c.isprintable())[:200] or "upload.csv"


# CSRF is checked by _upload, once the upload's size limit is in place: the
# check reads the body, and a limit set after that would come too late.
@csrf_exempt
@require_http_methods(["GET", "HEAD", "POST"])
@login_required
def index(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return _page(request, UploadForm())
    largest = get_config()["MAX_UPLOAD_BYTES"]
    if declared_too_large(request, largest):
        return _too_large(request, largest)
    limit_upload(request, largest)
    return _upload(request, largest)


def _too_large(request: HttpRequest, largest: int) -> HttpResponse:
    message = f"The file may be at most {filesizeformat(largest)}."
    if wants_json(request):
        return json_error(413, message)
    form = UploadForm()
    form.cleaned_data = {}  # an empty form, shown with this one error
    form.add_error("file", message)
    return _page(request, form, status=413)


@csrf_protect
def _upload(request: HttpRequest, largest: int) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    if cut_off(request):
        return _too_large(request, largest)
    if not form.is_valid():
        if wants_json(request):
            return JsonResponse({"error": "The file cannot be imported.", "fields": form.errors}, status=400)
        return _page(request, form, status=400)
    data = form.cleaned_data["data"]
    upload = Upload.objects.create(
        owner=request.user, name=_printable(form.cleaned_data["file"].name), data=data, size=len(data)
    )
    return start_response(
        request,
        lambda: import_customers.start(user=request.user, params={"upload": upload.pk, "name": upload.name}),
        page="imports:job",
        template=PAGE,
        context=lambda: {"form": form, "rows": job_rows(imports_of(request.user))},
        not_started=upload.delete,
    )


@require_safe
@login_required
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = import_of(request.user, job_id)
    if job is None:
        raise Http404("No such import.")
    upload = upload_of(job)
    done = upload is not None and upload.imported_at is not None and job.state == "succeeded"
    preview = list(upload.rejected_rows.all()[:PREVIEW_ROWS]) if done else []
    return render(
        request,
        "imports/job.html",
        {
            "job": job,
            "upload": upload if done else None,
            "preview": preview,
            # The page shows the rejected rows once they exist: fetch it again then.
            "reload_on_success": not done,
        },
    )


@require_safe
@login_required
def rejected(request: HttpRequest, job_id: str) -> HttpResponse:
    job = import_of(request.user, job_id)
    upload = upload_of(job) if job else None
    if upload is None or upload.imported_at is None:
        raise Http404("No rejected rows for this import.")
    out = io.StringIO()
    writer = csv.writer(out)
    for row in rejected_csv_rows(upload):
        writer.writerow([safe_cell(cell) for cell in row])
    response = HttpResponse(out.getvalue().encode(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, f"rejected-{job.id}.csv")
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response
