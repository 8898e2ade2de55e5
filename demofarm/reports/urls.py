from django.urls import path

from demofarm.reports import views

app_name = "reports"
urlpatterns = [
    path("", views.index, name="index"),
    path("reports/<str:kind>/", views.start, name="start"),
    path("jobs/", views.my_jobs, name="my_jobs"),
    path("jobs/<webfarm_job:job_id>/", views.job_detail, name="job"),
    path("jobs/<webfarm_job:job_id>/again/", views.again, name="again"),
    path("jobs/<webfarm_job:job_id>/files/<str:name>", views.download, name="download"),
]
