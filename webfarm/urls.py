from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("progress/", include("progress.urls")),
    path("queues/", include("queues.urls")),
    path("stats/", include("stats.urls")),
    path("", include("reports.urls")),
]
