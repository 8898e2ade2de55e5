from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

from webfarm.core.http import polled, require_token
from webfarm.stats import selectors


@polled
@require_token("STATS_API_TOKEN")
@require_safe
def counters_json(request: HttpRequest) -> HttpResponse:
    values, live = selectors.totals()
    response = JsonResponse({"counters": values, "gauges": selectors.gauges(), "includes_unharvested": live})
    response["Cache-Control"] = "no-store"
    return response


@polled
@require_token("STATS_API_TOKEN")
@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    values, _ = selectors.totals()
    return HttpResponse(
        selectors.prometheus(values, selectors.gauges()), content_type="text/plain; version=0.0.4"
    )
