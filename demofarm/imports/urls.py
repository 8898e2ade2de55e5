from django.urls import path

from demofarm.imports import views

app_name = "imports"
urlpatterns = [
    path("", views.index, name="index"),
    path("<webfarm_job:job_id>/", views.job_detail, name="job"),
    path("<webfarm_job:job_id>/rejected.csv", views.rejected, name="rejected"),
]
