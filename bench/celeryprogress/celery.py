from celery import Celery

app = Celery("celeryprogress")
app.config_from_object("django.conf:settings", namespace="CELERY")
