"""The test project's Celery app, as Celery's Django guide makes one.
Tests send to an in-memory broker (the settings) unless a fixture puts
them on a memcached of the test's own (tests/conftest.py memcached_broker)."""

from celery import Celery

app = Celery("tests.project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
