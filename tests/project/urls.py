from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("webfarm.urls")),
    path("admin/", admin.site.urls),
]
