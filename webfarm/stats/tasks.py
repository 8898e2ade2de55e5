import logging
from datetime import UTC, datetime, timedelta

from celery import shared_task

from webfarm.stats.harvest import harvest, summarise

logger = logging.getLogger(__name__)


@shared_task(name="webfarm.stats.harvest_counters", ignore_result=True)
def harvest_counters() -> None:
    added = harvest()  # HarvestUnavailable: the task fails, and the console says why
    today = datetime.now(UTC).date()
    summarise(today - timedelta(days=1))
    summarise(today)
    if added:
        logger.debug("harvested %s increments over %s counters", sum(added.values()), len(added))
