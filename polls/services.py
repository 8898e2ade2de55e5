"""Casting votes through memcached, and flushing them into the database.

The request path: a "has voted" marker (`add`: the one vote per voter), the
vote into the vote queue, the choice's running total (`incr`). Nothing else.
When memcached cannot take the vote, the vote is written to the database
directly instead: not lost, not refused.

The flusher moves queued votes into the database. Every vote carries the id
it was given when cast, so a batch written twice (the flusher died between
writing and acknowledging, the queue delivered it again) is stored once.
"""

import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count
from pymemcache.exceptions import MemcacheError

from polls.conf import get_config
from polls.models import Poll, Vote
from progress.client import get_client
from progress.memo import get_or_set
from queues.core import Queue
from queues.exceptions import QueueError
from stats.counters import count

logger = logging.getLogger(__name__)


class VoteRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Ballot:
    poll: Poll
    choice_id: int
    voter: str  # "u:<user id>" or "a:<anonymous id>"
    user_id: int | None
    address: str | None


def _marker(poll_id: int, voter: str) -> str:
    # Voter ids come from cookies: hashed, they are always a valid key.
    digest = hashlib.blake2b(voter.encode(), digest_size=12).hexdigest()
    return f"poll:{poll_id}:voted:{digest}"


def total_key(poll_id: int, choice_id: int) -> str:
    return f"poll:{poll_id}:c:{choice_id}"


def built_key(poll_id: int) -> str:
    return f"poll:{poll_id}:built"


def cast(ballot: Ballot) -> str:
    """Accept one vote; returns how: "queue", or "direct" (memcached away). Raises
    VoteRefused for a closed poll, a foreign choice, a second vote or an
    address over its anonymous rate."""
    poll = ballot.poll
    if not poll.accepts_votes():
        raise VoteRefused(403, "This poll is closed.")
    if not any(choice.id == ballot.choice_id for choice in poll.choices.all()):
        raise VoteRefused(400, "That is not one of this poll's choices.")
    vote = {
        "id": secrets.token_urlsafe(16),
        "poll": poll.id,
        "choice": ballot.choice_id,
        "user": ballot.user_id,
        "voter": ballot.voter,
        "address": ballot.address,
        "at": time.time(),
    }
    try:
        return _cast_in_memcached(ballot, vote)
    except (MemcacheError, OSError, QueueError) as exc:
        logger.warning("vote %s written to the database directly: %s", vote["id"], exc)
        _write_direct(vote)
        count("poll_votes", via="direct")
        return "direct"


def _cast_in_memcached(ballot: Ballot, vote: dict[str, Any]) -> str:
    config = get_config()
    client = get_client()
    if ballot.user_id is None and ballot.address:
        _rate_limit(client, ballot.address)
    marker = _marker(ballot.poll.id, ballot.voter)
    if not client.add(marker, vote["id"].encode(), expire=config["MARKER_TTL"]):
        raise VoteRefused(409, "You have already voted in this poll.")
    if client.get(built_key(ballot.poll.id)) is None and _voted_in_database(ballot):
        # memcached lost this poll's markers (restarted) and they are not
        # rebuilt yet: the database knows the votes flushed before.
        raise VoteRefused(409, "You have already voted in this poll.")
    try:
        Queue(config["QUEUE"]).put(json.dumps(vote).encode())
    except BaseException:
        client.delete(marker)  # not accepted: the voter may vote (or fall back) again
        raise
    # The running total: missing (memcached lost it) until the flusher rebuilds it.
    client.incr(total_key(ballot.poll.id, ballot.choice_id), 1)
    count("poll_votes", via="queue")
    return "queue"


def _voted_in_database(ballot: Ballot) -> bool:
    return Vote.objects.filter(poll_id=ballot.poll.id, voter=ballot.voter).exists()


def _rate_limit(client: Any, address: str) -> None:
    config = get_config()
    window = int(time.time() // config["ANONYMOUS_WINDOW"])
    key = f"poll:rate:{hashlib.blake2b(address.encode(), digest_size=8).hexdigest()}:{window}"
    client.add(key, b"0", expire=config["ANONYMOUS_WINDOW"] * 2)
    if (client.incr(key, 1) or 0) > config["ANONYMOUS_PER_ADDRESS"]:
        raise VoteRefused(429, "Too many votes from your network; try again later.")


def _write_direct(vote: dict[str, Any]) -> None:
    """memcached is away: one vote per voter is kept by the database."""
    with transaction.atomic():
        # Serialise this poll's direct votes, so a voter's two at once cannot both pass.
        Poll.objects.select_for_update().filter(pk=vote["poll"]).first()
        if Vote.objects.filter(poll_id=vote["poll"], voter=vote["voter"]).exists():
            raise VoteRefused(409, "You have already voted in this poll.")
        Vote.objects.create(**_row(vote), via="direct", synced=False)


def _row(vote: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": vote["id"],
        "poll_id": vote["poll"],
        "choice_id": vote["choice"],
        "user_id": vote["user"],
        "voter": vote["voter"],
        "address": vote["address"],
        "cast_at": datetime.fromtimestamp(vote["at"], UTC),
    }


# -- the flusher ----------------------------------------------------------------------


def flush(*, limit: int | None = None) -> int:
    """Move queued votes into the database; returns how many were new.

    Each batch is written (ignoring ids already stored) and only then
    acknowledged: a flush stopped anywhere loses nothing and, run again,
    stores nothing twice.
    """
    config = get_config()
    queue = Queue(config["QUEUE"])
    stored = 0
    while limit is None or stored < limit:
        messages = queue.claim_many(config["FLUSH_BATCH"])
        if not messages:
            break
        rows = []
        for message in messages:
            try:
                rows.append(Vote(**_row(json.loads(message.body))))
            except (ValueError, KeyError, TypeError):
                logger.error("vote queue: dropping a malformed message %r", message.body[:200])
        before = Vote.objects.filter(pk__in=[row.id for row in rows]).count()
        try:
            Vote.objects.bulk_create(rows, ignore_conflicts=True)
        except IntegrityError:  # a poll or choice deleted meanwhile: one by one
            for row in rows:
                try:
                    with transaction.atomic():
                        row.save(force_insert=True)
                except IntegrityError:
                    logger.warning("vote %s for a deleted poll or choice dropped", row.id)
        stored += Vote.objects.filter(pk__in=[row.id for row in rows]).count() - before
        queue.ack_many([message.receipt for message in messages])
    return stored


def db_totals(poll: Poll) -> dict[int, int]:
    counted = poll.votes.values("choice").annotate(n=Count("id"))
    totals = {choice.id: 0 for choice in poll.choices.all()}
    totals.update({row["choice"]: row["n"] for row in counted})
    return totals


def sync_direct_votes() -> int:
    """Votes written to the database while memcached was away: put their
    "has voted" markers and running totals into memcached now."""
    client = get_client()
    ttl = get_config()["MARKER_TTL"]
    synced = 0
    for vote in Vote.objects.filter(synced=False).order_by("cast_at")[:1000]:
        client.add(_marker(vote.poll_id, vote.voter), vote.id.encode(), expire=ttl)
        client.incr(total_key(vote.poll_id, vote.choice_id), 1)
        Vote.objects.filter(pk=vote.pk).update(synced=True)
        synced += 1
    return synced


def rebuild_totals(poll: Poll) -> bool:
    """Set the running totals from the database once every queued vote is in
    it (the flusher holds the only claims), and the voters' markers with them.
    Returns whether it did."""
    if Queue(get_config()["QUEUE"]).stats()["ready"]:
        return False
    client = get_client()
    with transaction.atomic():
        totals = db_totals(poll)
        # These are counted now; syncing them later would count them twice.
        Vote.objects.filter(poll=poll, synced=False).update(synced=True)
    for choice_id, total in totals.items():
        client.set(total_key(poll.id, choice_id), str(total).encode())
    ttl = get_config()["MARKER_TTL"]
    voters = poll.votes.values_list("voter", "id")
    for start in range(0, voters.count(), 1000):
        batch = {_marker(poll.id, voter): vote_id.encode() for voter, vote_id in voters[start : start + 1000]}
        client.set_many(batch, expire=ttl)
    client.set(built_key(poll.id), b"1")
    return True


FLUSH_LOCK = "polls:flusher"


class FlusherBusy(Exception):
    pass


def flush_all() -> dict[str, int]:
    """The periodic job: flush the queue, sync direct votes, rebuild the
    running totals memcached lost. One flusher at a time farm-wide."""
    client = get_client()
    if not client.add(FLUSH_LOCK, b"1", expire=120):
        raise FlusherBusy("another flusher is running")
    try:
        stored = flush()
        synced = sync_direct_votes()
        polls = Poll.objects.filter(is_open=True)
        built = client.get_many([built_key(poll.id) for poll in polls]) if polls else {}
        rebuilt = sum(1 for poll in polls if built_key(poll.id) not in built and rebuild_totals(poll))
        return {"stored": stored, "synced": synced, "rebuilt": rebuilt}
    finally:
        client.delete(FLUSH_LOCK)


def live_totals(poll: Poll, choices: list[int]) -> tuple[dict[int, int], bool]:
    """The running totals from memcached, and whether they are live. While
    they are being rebuilt (or memcached is away), the database's, counted
    at most once a second farm-wide."""
    try:
        client = get_client()
        found = client.get_many([built_key(poll.id), *(total_key(poll.id, c) for c in choices)])
    except (MemcacheError, OSError):
        found = {}
    if built_key(poll.id) in found:
        return {c: int(found.get(total_key(poll.id, c), b"0")) for c in choices}, True
    stored = get_or_set(f"polls:{poll.id}:db-totals", lambda: list(db_totals(poll).items()), ttl=1)
    return {int(c): n for c, n in stored}, False
