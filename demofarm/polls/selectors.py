from typing import Any

from demofarm.polls.models import Poll
from demofarm.polls.snapshot import PollInfo, poll_info, remembered
from demofarm.polls.totals import live_totals


def poll_or_none(poll_id: int) -> PollInfo | None:
    return poll_info(poll_id)


def poll_for_vote(poll_id: int) -> PollInfo | None:
    """The poll without a round trip when this process read it before (the
    vote's checks read it again: demofarm/polls/services.py)."""
    return remembered(poll_id)


def recent_polls(limit: int = 50) -> list[Poll]:
    return list(Poll.objects.all()[:limit])


def results(poll: PollInfo) -> dict[str, Any]:
    """The results document: running totals, shares, and whether they are live."""
    choices = poll.choices
    totals, live = live_totals(poll.id, poll.choice_ids)
    votes = sum(totals.values())
    return {
        "poll": poll.id,
        "open": poll.accepts_votes(),
        "votes": votes,
        "live": live,
        "choices": [
            {
                "id": choice.id,
                "text": choice.text,
                "votes": totals.get(choice.id, 0),
                "percent": round(100 * totals.get(choice.id, 0) / votes, 1) if votes else 0.0,
            }
            for choice in choices
        ],
    }
