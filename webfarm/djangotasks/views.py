"""A task's own page and its result as JSON, for its owner and staff: what
a site's view redirects to after enqueue(), so the site writes no page of
its own to watch a task (docs/install.md).

The Tasks API has no user; the job behind a task has an owner, and these
views answer 404 to anyone else, as the bar's own endpoints do.
"""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webfarm.djangotasks.jobs import PREFIX, alias_of
from webfarm.djangotasks.results import ProgressTaskResult, result_of
from webfarm.progress.ids import is_valid_job_id
from webfarm.progress.selectors import jobs_seen_by


def _own_result(request: HttpRequest, result_id: str) -> ProgressTaskResult:
    seen = jobs_seen_by(request.user)
    job = seen.filter(pk=result_id, kind__startswith=PREFIX).first() if is_valid_job_id(result_id) else None
    if job is None:
        raise Http404("No such task.")
    return result_of(job, backend=alias_of(job.kind))


@require_GET
@login_required
def watch(request: HttpRequest, result_id: str) -> HttpResponse:
    """The task's live bar, with its cancel button; the site's own
    templates/webfarm_djangotasks/watch.html replaces this page."""
    result = _own_result(request, result_id)
    title = result.task.name.replace("_", " ").capitalize()
    return render(request, "webfarm_djangotasks/watch.html", {"result": result, "title": title})


@require_GET
@login_required
def result(request: HttpRequest, result_id: str) -> JsonResponse:
    """The TaskResult as JSON, read on any node."""
    found = _own_result(request, result_id)
    return JsonResponse(as_json(found))


def as_json(found: ProgressTaskResult) -> dict[str, Any]:
    done = found.status == "SUCCESSFUL"
    return {
        "id": found.id,
        "task": found.task.module_path,
        "status": str(found.status),
        "return_value": found.return_value if done else None,
        "metadata": found.metadata,
        "errors": [error.exception_class_path for error in found.errors],
        "enqueued_at": found.enqueued_at,
        "started_at": found.started_at,
        "finished_at": found.finished_at,
        "attempts": found.attempts,
    }
