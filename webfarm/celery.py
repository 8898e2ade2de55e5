"""The Celery app: `celery -A webfarm worker`."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

# CELERY_BROKER_URL=memcached://host:port: the farm's own queue as the broker.
TRANSPORT_ALIASES.setdefault("memcached", "queues.transport:Transport")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webfarm.settings")

app = Celery("webfarm")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
