from django.urls import path

from webfarm.stats import views

app_name = "stats"
urlpatterns = [
    path("counters.json", views.counters_json, name="counters_json"),
    path("metrics", views.metrics, name="metrics"),
]
