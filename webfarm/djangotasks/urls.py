"""include("webfarm.djangotasks.urls") under a prefix of the site's: a task's
page at <prefix><id>/ (URL name webfarm_djangotasks:watch) and its result as
JSON at <prefix><id>/result/."""

from django.urls import path

from webfarm.djangotasks import views

app_name = "webfarm_djangotasks"

urlpatterns = [
    path("<str:result_id>/", views.watch, name="watch"),
    path("<str:result_id>/result/", views.result, name="result"),
]
