"""The Celery app: `celery -A demofarm worker`."""

import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, task_postrun, task_prerun, worker_init
from django.db import close_old_connections
from kombu.transport import TRANSPORT_ALIASES

from demofarm.startup import refuse_to_start_misconfigured

# CELERY_BROKER_URL=memcached://host:port: the farm's own queue as the broker.
# webfarm.broker's ready() says so too; here for the commands (celery
# inspect, purge) that connect before Django is set up.
TRANSPORT_ALIASES.setdefault("memcached", "webfarm.broker.transport:Transport")

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demofarm.settings")

app = Celery("demofarm")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def _database_as_for_a_request(**kwargs: Any) -> None:
    # Celery keeps connections across tasks (CELERY_DB_REUSE_MAX): at each
    # task's edges Django's rules for a request's apply, so a connection past
    # CONN_MAX_AGE or broken is closed, and a kept one is checked at first use.
    close_old_connections()


@worker_init.connect
def _worker_secret(**kwargs: Any) -> None:
    refuse_to_start_misconfigured("worker")  # SystemExit: Celery lets it through and stops


@beat_init.connect
def _beat_secret(**kwargs: Any) -> None:
    refuse_to_start_misconfigured("beat")
