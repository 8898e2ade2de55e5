from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page says: the site's icon, not a 404."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon),
    # Before the admin's own URLs, which would answer 404 for it.
    path("admin/dashboard/", include("webfarm.dashboard.urls")),
    path("admin/", admin.site.urls),
    # Django's account pages, every password counted (a few wrong, then a pause).
    path("accounts/", include("webfarm.limits.urls")),
    path("progress/", include("webfarm.progress.urls")),
    path("tasks/", include("webfarm.djangotasks.urls")),
    path("queues/", include("webfarm.queues.urls")),
    path("stats/", include("webfarm.stats.urls")),
    path("polls/", include("demofarm.polls.urls")),
    path("imports/", include("demofarm.imports.urls")),
    path("", include("demofarm.reports.urls")),
]

# Django's own error pages answer 500 for a POST whose body they cannot parse.
handler400 = "webfarm.core.errorpages.bad_request"
handler403 = "webfarm.core.errorpages.permission_denied"
handler404 = "webfarm.core.errorpages.page_not_found"
