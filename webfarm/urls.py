"""Every page of the installed apps, at the paths docs/install.md gives them,
in one line of a project's URLconf, before the admin's own:

    path("", include("webfarm.urls")),
    path("admin/", admin.site.urls),

admin/dashboard/ (staff), accounts/ (Django's account pages, every password
counted), progress/ (what the bars poll and cancel) and tasks/ (a task's
page and its result). A project that wants other paths includes each app's
`urls` module itself. The machine APIs (webfarm.queues.urls, webfarm.stats.urls)
are left to the project: each needs its token set.
"""

from django.apps import apps
from django.urls import URLPattern, URLResolver, include, path

__all__ = ["urlpatterns"]

_MOUNTED = (
    ("webfarm.dashboard", "admin/dashboard/"),
    ("webfarm.limits", "accounts/"),
    ("webfarm.progress", "progress/"),
    ("webfarm.djangotasks", "tasks/"),
)

urlpatterns: list[URLPattern | URLResolver] = [
    path(prefix, include(f"{app}.urls")) for app, prefix in _MOUNTED if apps.is_installed(app)
]
