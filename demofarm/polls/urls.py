from django.urls import path

from demofarm.polls import views

app_name = "polls"
urlpatterns = [
    path("", views.poll_list, name="list"),
    path("<int:poll_id>/", views.poll_detail, name="detail"),
    path("<int:poll_id>/vote/", views.vote, name="vote"),
    path("<int:poll_id>/results.json", views.results_json, name="results"),
]
