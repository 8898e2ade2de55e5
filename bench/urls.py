from django.http import HttpRequest, HttpResponse
from django.urls import path

from progress.client import get_client
from webfarm.urls import urlpatterns as project_urls


def bare(request: HttpRequest) -> HttpResponse:
    """The least a Django view that reads memcached can do: one get, no auth."""
    return HttpResponse(get_client().get("bench:bare") or b"", content_type="application/json")


urlpatterns = [path("bench/bare/", bare), *project_urls]
