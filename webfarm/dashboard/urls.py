from django.urls import path

from webfarm.dashboard import views

app_name = "dashboard"
urlpatterns = [
    path("", views.index, name="index"),
    path("live/", views.live, name="live"),
    path("charts/<str:name>.png", views.chart, name="chart"),
]
