from django.urls import path

from webfarm.queues import views

app_name = "queues"
urlpatterns = [
    path("<str:name>/", views.messages, name="messages"),
    path("<str:name>/ack/", views.ack, name="ack"),
    path("<str:name>/reject/", views.reject, name="reject"),
    path("<str:name>/stats", views.stats, name="stats"),
    path("<str:name>/dead-letters", views.dead_letters, name="dead_letters"),
]
