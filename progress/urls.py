from django.urls import path

from progress import views

app_name = "progress"
urlpatterns = [
    path("<str:job_id>/", views.progress_detail, name="detail"),
    path("<str:job_id>/cancel/", views.cancel, name="cancel"),
]
