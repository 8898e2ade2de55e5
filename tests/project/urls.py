from django.apps import apps
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("webfarm.urls")),
    path("admin/", admin.site.urls),
    # The machine APIs, each behind its token (settings).
    path("queues/", include("webfarm.queues.urls")),
    path("stats/", include("webfarm.stats.urls")),
]
# A test of a project without some of the apps leaves the shop out too (it needs them).
if apps.is_installed("tests.project.shop"):
    urlpatterns.append(path("", include("tests.project.shop.urls")))

handler400 = "webfarm.core.errorpages.bad_request"
handler403 = "webfarm.core.errorpages.permission_denied"
handler404 = "webfarm.core.errorpages.page_not_found"
