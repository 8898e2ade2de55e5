import logging
from pathlib import Path

from celery import shared_task
from django.conf import settings

from webfarm.activity.drain import DrainerBusy, drain

logger = logging.getLogger(__name__)


@shared_task(name="webfarm.activity.drain_sitelog", ignore_result=True)
def drain_sitelog() -> None:
    try:
        drain(Path(settings.ACTIVITY_LOG_FILE))
    except DrainerBusy:
        logger.debug("site log drainer already running (a --follow drainer?)")
