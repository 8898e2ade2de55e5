import logging

from demofarm.polls.services import FlusherBusy, flush_all
from webfarm.core.tasks import renamed_task

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


# Also under its name while polls were in the library.
flush_votes = renamed_task(
    _flush_votes, "demofarm.polls.flush_votes", was=("webfarm.polls.flush_votes",), ignore_result=True
)
