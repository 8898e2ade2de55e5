from django.urls import path

from tests.project.shop import views

app_name = "shop"
urlpatterns = [
    path("", views.home, name="home"),
    path("start/<str:kind>/", views.start, name="start"),
    path("jobs/", views.jobs, name="jobs"),
    path("jobs/<webfarm_job:job_id>/", views.job, name="job"),
    path("counters/<int:number>.json", views.counter, name="counter"),
    path("download/<int:size>/", views.download, name="download"),
]
