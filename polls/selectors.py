from typing import Any

from polls.models import Poll
from polls.services import live_totals

MAX_ID = 2**63 - 1  # a bigger number in a URL is no poll, not a database error


def poll_or_none(poll_id: int) -> Poll | None:
    if not 0 < poll_id <= MAX_ID:
        return None
    return Poll.objects.prefetch_related("choices").filter(pk=poll_id).first()


def recent_polls(limit: int = 50) -> list[Poll]:
    return list(Poll.objects.all()[:limit])


def results(poll: Poll) -> dict[str, Any]:
    """The results document: running totals, shares, and whether they are live."""
    choices = list(poll.choices.all())
    totals, live = live_totals(poll, [choice.id for choice in choices])
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
