from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/dashboard/", include("webfarm.dashboard.urls")),
    path("admin/", admin.site.urls),
    path("accounts/", include("webfarm.limits.urls")),
    path("progress/", include("webfarm.progress.urls")),
    path("tasks/", include("webfarm.djangotasks.urls")),
]
