from django.urls import path

from webfarm.progress import views

app_name = "progress"
urlpatterns = [
    path("<str:job_id>/", views.progress_detail, name="detail"),
    path("<str:job_id>/cancel/", views.cancel, name="cancel"),
    # After cancel/: the capability URL that nginx serves from memcached when it can.
    path("<str:job_id>/<str:token>/", views.progress_by_token, name="by_token"),
]
