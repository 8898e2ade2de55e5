import logging

from celery import shared_task

from webfarm.activity.conf import log_file
from webfarm.activity.drain import DrainerBusy, drain

logger = logging.getLogger(__name__)


@shared_task(name="webfarm.activity.drain_sitelog", ignore_result=True)
def drain_sitelog() -> None:
    try:
        drain(log_file())
    except DrainerBusy:
        logger.debug("site log drainer already running (a --follow drainer?)")
