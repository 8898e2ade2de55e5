import logging

from celery import shared_task

from demofarm.polls.services import FlusherBusy, flush_all

logger = logging.getLogger(__name__)


def _flush_votes() -> None:
    try:
        done = flush_all()
    except FlusherBusy:
        logger.debug("vote flusher already running")
        return
    if any(done.values()):
        logger.info(
            "votes: %s stored, %s counted, %s polls' totals rebuilt",
            done["stored"],
            done["counted"],
            done["rebuilt"],
        )


flush_votes = shared_task(_flush_votes, name="demofarm.polls.flush_votes", ignore_result=True)
