from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from webfarm.core.http import polled
from webfarm.dashboard import selectors
from webfarm.dashboard.access import staff_required


@require_safe
@never_cache
@staff_required
def index(request: HttpRequest) -> HttpResponse:
    running, running_count = selectors.running_jobs()
    all_series = selectors.chart_series()
    context = {
        **admin.site.each_context(request),
        "title": "Farm dashboard",
        "charts_live": all_series["live"],
        "charts": selectors.chart_tables(all_series),
        "totals": selectors.counter_totals(),
        "summaries": selectors.daily_summaries(),
        "running": running,
        "running_count": running_count,
        **selectors.live_parts(),
    }
    return render(request, "webfarm_dashboard/index.html", context)


@polled
@require_safe
@never_cache
@staff_required
def live(request: HttpRequest) -> HttpResponse:
    """The page's fast-changing part, fetched by dashboard.js every few seconds."""
    return render(request, "webfarm_dashboard/live.html", selectors.live_parts())


@polled
@require_safe
@staff_required
def chart(request: HttpRequest, name: str) -> HttpResponse:
    if name not in selectors.CHARTS:
        raise Http404("No such chart.")
    response = HttpResponse(selectors.chart_png(name), content_type="image/png")
    response["Cache-Control"] = "private, max-age=10"
    return response
