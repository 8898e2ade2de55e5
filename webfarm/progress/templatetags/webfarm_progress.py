"""Template tags of the progress app.

{% load webfarm_progress %}
{% progress_assets %}            in <head>: the bar's CSS and JS
{% progress_bar job %}           a live bar for `job`, or for a django.tasks result
                                 (its id is its job's); a list that read its jobs'
                                 records at once (job_rows) passes each: {% progress_bar job record %}
{{ job|job_page }}               the URL of the job's own page (its job type's)
{{ record|parts_line }}          a job split in parts: how many run, wait, and where
"""

from typing import Any

from django import template
from django.middleware.csrf import get_token
from django.templatetags.static import static
from django.utils.html import format_html

from webfarm.progress.models import Job
from webfarm.progress.registry import get_job_type
from webfarm.progress.selectors import record_of
from webfarm.progress.states import FINAL_STATES

register = template.Library()


@register.simple_tag
def progress_assets() -> str:
    # poller.js first: progress.js (and polls, the dashboard) build on it.
    return format_html(
        '<link rel="stylesheet" href="{}">\n'
        '<script src="{}" defer></script>\n<script src="{}" defer></script>',
        static("webfarm_progress/progress.css"),
        static("webfarm_progress/poller.js"),
        static("webfarm_progress/progress.js"),
    )


@register.inclusion_tag("webfarm_progress/widget.html", takes_context=True)
def progress_bar(
    context: template.Context, job: Any, record: Any = None, *, reload_on_success: bool = False
) -> dict[str, Any]:
    """A bar that follows `job` until it ends: state, percent, stage, ETA,
    message, a cancel button while it runs and a download link when it
    succeeded. With reload_on_success the page reloads when the job succeeds
    (to show what it made)."""
    if not isinstance(job, Job):
        # A django.tasks TaskResult (webfarm.djangotasks): a task is a job of the same id.
        found = Job.objects.filter(pk=str(getattr(job, "id", ""))).first()
        if found is None:
            raise ValueError(f"progress_bar takes a job or a task's result, not {job!r:.100}")
        job = found
    if record is None:
        record = record_of(job)  # the page's viewer may see it: the view found it for them
    request = context.get("request")
    # A page rendered without the csrf context processor still gets a cancel that works.
    csrf_token = context.get("csrf_token") or (get_token(request) if request is not None else None)
    return {
        "job": job,
        "record": record,
        # Ended, and the page knew it: a page that read the job's row before
        # the end, and its record after, keeps its bar live, and the bar's
        # first poll ends it as the page asks (a reload, to show the result).
        "final": record.is_final and job.state in FINAL_STATES,
        "reload_on_success": reload_on_success,
        "request": request,
        "csrf_token": csrf_token,
    }


@register.filter
def job_page(job: Any) -> str:
    """The job's own page, as its type names it ("" for a type no longer installed)."""
    job_type = get_job_type(job.kind)
    return job_type.page_url(job.id) if job_type is not None else ""


@register.filter
def parts_line(record: Any) -> str:
    """What the bar says of a job split in parts (progress.js's partsLine() says the same)."""
    counts = record.part_counts() if record is not None else None
    if not counts:
        return ""
    if record.is_final:
        if record.state == "succeeded":
            return f"Ran in {counts['total']} part{'' if counts['total'] == 1 else 's'}."
        return f"{counts['done']} of {counts['total']} parts had finished."
    waiting = []
    if counts["running"]:
        waiting.append(f"{counts['running']} running")
    if counts["queued"]:
        waiting.append(f"{counts['queued']} waiting for a worker")
    line = f"Parts: {counts['done']} of {counts['total']} done" + "".join(f", {bit}" for bit in waiting)
    if counts["workers"]:
        line += " · on " + ", ".join(counts["workers"])
    return line
