from django.urls import path

from demofarm.imports import views

app_name = "imports"
urlpatterns = [
    path("", views.index, name="index"),
    path("<str:job_id>/", views.job_detail, name="job"),
    path("<str:job_id>/rejected.csv", views.rejected, name="rejected"),
]
