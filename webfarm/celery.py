"""The Celery app: `celery -A webfarm worker`."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webfarm.settings")

app = Celery("webfarm")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
