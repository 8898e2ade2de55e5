import logging

from celery import shared_task

from polls.services import FlusherBusy, flush_all

logger = logging.getLogger(__name__)


@shared_task(name="polls.flush_votes", ignore_result=True)
def flush_votes() -> None:
    try:
        flush_all()
    except FlusherBusy:
        logger.debug("vote flusher already running")
