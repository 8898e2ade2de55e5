"""Casting votes through memcached, and flushing them into the database.

The request path: a "has voted" marker (`add`: the one vote per voter), the
vote into the vote queue, the choice's running total (`incr`). Nothing else.
When memcached cannot take the vote, the vote is written to the database
directly instead: not lost, not refused.

The flusher moves queued votes into the database. Every vote carries the id
it was given when cast, so a batch written twice (the flusher died between
writing and acknowledging, the queue delivered it again) is stored once.

Running totals belong to an epoch, named by the poll's `built` key: the
rebuild after memcached lost them counts the database under a fresh epoch,
and only then publishes it. A vote says which epoch's total it incremented;
a vote that counted in no live epoch (memcached was away, the totals were
being rebuilt) is stored as not counted, and the flusher adds it to the
current totals. So each vote is in the running totals exactly once, however
its path and a rebuild interleave.
"""

import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from django.db import IntegrityError, transaction
from pymemcache.exceptions import MemcacheError

from demofarm.polls import snapshot
from demofarm.polls.conf import get_config
from demofarm.polls.messages import check_vote
from demofarm.polls.models import Choice, Poll, Vote
from demofarm.polls.snapshot import PollInfo
from demofarm.polls.totals import built_key, db_totals, is_epoch, total_key
from webfarm.core.client import MetaBatch, MetaReply, get_client
from webfarm.core.counters import count, count_soon
from webfarm.core.locks import Busy, lock
from webfarm.queues.exceptions import QueueError
from webfarm.queues.queue import Queue, thread_queue

logger = logging.getLogger(__name__)


ALREADY_VOTED = "You have already voted in this poll."


class VoteRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass
class Ballot:
    poll: PollInfo
    choice_id: int
    voter: str  # "u:<user id>" or "a:<anonymous id>"
    user_id: int | None
    address: str | None


def _marker(poll_id: int, voter: str) -> str:
    # Voter ids come from cookies: hashed, they are always a valid key.
    digest = hashlib.blake2b(voter.encode(), digest_size=12).hexdigest()
    return f"poll:{poll_id}:voted:{digest}"


def cast(ballot: Ballot) -> str:
    """Accept one vote; returns how: "queue", or "direct" (memcached away). Raises
    VoteRefused for a closed poll, a foreign choice, a second vote or an
    address over its anonymous rate."""
    try:
        vote = new_vote(ballot)
    except VoteRefused:
        # The ballot's poll may be this process's memory of it: refused only as it is now.
        fresh = snapshot.poll_info(ballot.poll.id)
        if fresh == ballot.poll:
            raise
        ballot = replace(ballot, poll=fresh)
        vote = new_vote(ballot)
    try:
        return _cast_in_memcached(ballot, vote)
    except (MemcacheError, OSError, QueueError) as exc:
        # The ballot's poll may be this process's memory of it: the database decides now.
        check_poll(snapshot.poll_info_from_database(ballot.poll.id), ballot.choice_id)
        logger.warning("vote %s written to the database directly: %s", vote["id"], exc)
        write_direct(vote)
        count("poll_votes", via="direct")
        return "direct"


def new_vote(ballot: Ballot) -> dict[str, Any]:
    """The vote, with the id that makes it stored once; VoteRefused for a
    closed poll or a foreign choice."""
    check_poll(ballot.poll, ballot.choice_id)
    return {
        "id": secrets.token_urlsafe(16),
        "poll": ballot.poll.id,
        "choice": ballot.choice_id,
        "user": ballot.user_id,
        "voter": ballot.voter,
        "address": ballot.address,
        "at": time.time(),
    }


def check_poll(poll: PollInfo | None, choice_id: int) -> None:
    """VoteRefused unless the poll exists, is open and has the choice."""
    if poll is None:
        raise VoteRefused(404, "No such poll.")
    if not poll.accepts_votes():
        raise VoteRefused(403, "This poll is closed.")
    if choice_id not in poll.choice_ids:
        raise VoteRefused(400, "That is not one of this poll's choices.")


# The epoch of each poll's running totals as this process last saw it: a vote
# counts itself in that epoch's total in the same round trip as its checks,
# and learns there whether the epoch is still the one.
_epochs_seen: dict[int, str] = {}


def _cast_in_memcached(ballot: Ballot, vote: dict[str, Any]) -> str:
    """The voter's checks, the poll as memcached has it now, the epoch, the
    running total and the vote's index in the queue in one round trip (meta
    commands: the address's window is created and counted by one `ma`, the
    marker is an `ms` in add mode), then the vote into the queue. The ballot's
    poll may be this process's memory of it (snapshot.remembered): what the
    batch read of it is what decides."""
    config = get_config()
    poll_id = ballot.poll.id
    marker = _marker(poll_id, ballot.voter)
    batch = MetaBatch()
    rate = None
    if ballot.user_id is None and ballot.address:
        window = int(config["ANONYMOUS_WINDOW"])
        # The key names its window: it is needed only until the window ends.
        rate = batch.arithmetic(_rate_key(ballot.address, window), vivify=window, initial=1, value=True)
    voted = batch.set(marker, value=vote["id"].encode(), ttl=config["MARKER_TTL"], mode="add")
    built = batch.get(built_key(poll_id))
    poll_now = snapshot.ask_in(batch, poll_id)
    guess = _epochs_seen.get(poll_id)
    guessed = batch.arithmetic(total_key(poll_id, guess, ballot.choice_id), value=True) if guess else None
    # The vote's index in the queue, so that its put is one round trip.
    queue = thread_queue(config["QUEUE"])
    reserved = queue.reserve_in(batch)
    replies = batch.run()
    if reserved is not None:
        reserved(replies)

    raw_epoch = replies[built].value if replies[built].hit else None
    epoch = raw_epoch.decode() if is_epoch(raw_epoch) else None  # not ours: as while being rebuilt
    if epoch is None:
        _epochs_seen.pop(poll_id, None)
    else:
        _epochs_seen[poll_id] = epoch
    total = total_key(poll_id, epoch, ballot.choice_id) if epoch else None
    undo = MetaBatch()
    counted = False
    if guessed is not None and replies[guessed].hit:
        if guess == epoch:
            counted = True
        else:  # counted in an epoch that is no longer the one: take it back
            undo.arithmetic(total_key(poll_id, guess, ballot.choice_id), decrement=True)

    refusal = _poll_refusal(ballot, replies[poll_now])
    over_rate = rate is not None and (replies[rate].number() or 0) > config["ANONYMOUS_PER_ADDRESS"]
    if refusal is None and over_rate:
        refusal = VoteRefused(429, "Too many votes from your network; try again later.")
    if refusal is not None:
        if replies[voted].done:
            undo.delete(marker)  # not a vote: the voter may vote once the poll or the window allows
    elif not replies[voted].done:
        refusal = VoteRefused(409, ALREADY_VOTED)
    # No marker: a first vote, or one whose marker lapsed or memcached lost.
    # The database knows the votes flushed before: asked while the totals are
    # rebuilt, and always for a logged-in voter, who costs queries anyway.
    # (An anonymous voter's second vote is dropped at flush; their browser's
    # cookie answers before that.)
    elif (epoch is None or ballot.user_id is not None) and _voted_in_database(ballot):
        refusal = VoteRefused(409, ALREADY_VOTED)  # the marker stays: it is true
    if refusal is not None:
        if counted:
            undo.arithmetic(total, decrement=True)
        if undo:
            with contextlib.suppress(MemcacheError, OSError):
                undo.run()
        raise refusal

    if undo:
        undo.run()
    if total is not None and not counted:
        # No guess, or a wrong one (a rebuild): one more round trip, once per epoch here.
        reply = MetaBatch()
        reply.arithmetic(total, value=True)
        counted = reply.run()[0].hit
    elif guessed is not None and not replies[guessed].hit:
        counted = False
    if total is not None and not counted:
        get_client().delete(built_key(poll_id))  # a total is gone: the flusher rebuilds them all
        _epochs_seen.pop(poll_id, None)
    vote["counted_in"] = epoch if counted else None
    try:
        queue.put(json.dumps(vote).encode())
    except BaseException:
        # Not accepted here: the voter may vote (or fall back) again.
        with contextlib.suppress(MemcacheError, OSError):
            client = get_client()
            client.delete(marker)
            if counted:
                client.decr(total, 1)
        raise
    count_soon("poll_votes", via="queue")
    return "queue"


def _poll_refusal(ballot: Ballot, reply: MetaReply) -> VoteRefused | None:
    """Why the poll as memcached has it now refuses the ballot, if it does
    (it was closed, or lost the choice, since this process last read it)."""
    try:
        poll = snapshot.current(ballot.poll.id, reply)
    except (MemcacheError, OSError):
        poll = snapshot.poll_info_from_database(ballot.poll.id)
    if poll == ballot.poll:
        return None  # checked before the vote was made (new_vote)
    try:
        check_poll(poll, ballot.choice_id)
    except VoteRefused as refusal:
        return refusal
    return None


def _voted_in_database(ballot: Ballot) -> bool:
    return Vote.objects.filter(poll_id=ballot.poll.id, voter=ballot.voter).exists()


def _rate_key(address: str, window: int) -> str:
    digest = hashlib.blake2b(address.encode(), digest_size=8).hexdigest()
    return f"poll:rate:{digest}:{int(time.time() // window)}"


def write_direct(vote: dict[str, Any]) -> None:
    """memcached is away: one vote per voter is kept by the database."""
    with transaction.atomic():
        # Serialise this poll's direct votes, so a voter's two at once cannot both pass.
        Poll.objects.select_for_update().filter(pk=vote["poll"]).first()
        if Vote.objects.filter(poll_id=vote["poll"], voter=vote["voter"]).exists():
            raise VoteRefused(409, ALREADY_VOTED)
        try:
            with transaction.atomic():
                Vote.objects.create(**_row(vote), via="direct", counted=False)
        except IntegrityError:  # the flusher stored this voter's queued vote meanwhile
            raise VoteRefused(409, ALREADY_VOTED) from None


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


def flush(*, limit: int | None = None, renew: Callable[[], None] = lambda: None) -> int:
    """Move queued votes into the database; returns how many were new.

    Each batch is written (ignoring ids already stored) and only then
    acknowledged: a flush stopped anywhere loses nothing and, run again,
    stores nothing twice. A message that is not a vote, or a vote for a poll
    or choice that no longer exists, goes to the dead letters; a second vote
    by the same voter (their marker had expired), or one cast after its poll
    closed, is dropped, counted as refused and taken out of the running
    totals. Either way the votes behind it flow on.
    """
    config = get_config()
    queue = Queue(config["QUEUE"])
    stored = 0
    while limit is None or stored < limit:
        messages = queue.claim_many(config["FLUSH_BATCH"])
        if not messages:
            break
        votes, bad = [], []
        for message in messages:
            try:
                votes.append((message, check_vote(json.loads(message.body))))
            except (ValueError, RecursionError) as exc:
                bad.append((message, f"not a vote: {exc}"))
        choices = _choices_of({vote["poll"] for _, vote in votes})
        epochs = _epochs(set(choices))
        polls = Poll.objects.in_bulk(set(choices))
        kept, late = [], []
        for message, vote in votes:
            if vote["choice"] not in choices.get(vote["poll"], ()):
                bad.append((message, "no such poll or choice (deleted since the vote?)"))
                _uncount(vote, epochs)
            elif not polls[vote["poll"]].accepted_votes_at(datetime.fromtimestamp(vote["at"], UTC)):
                late.append(message)
                _uncount(vote, epochs)
            else:
                kept.append((message, vote))
        if late:
            # Cast where an old copy of the poll said open (memcached written
            # to by someone else, or a node's memory): the database decides.
            logger.warning("%d votes cast after their poll closed not stored", len(late))
            count("poll_votes_refused", len(late), reason="closed")
        stored += _store(kept, epochs)
        queue.bury_many(bad)
        queue.ack_many([message.receipt for message, _ in kept] + [message.receipt for message in late])
        renew()
    return stored


def _choices_of(poll_ids: set[int]) -> dict[int, set[int]]:
    choices: dict[int, set[int]] = {}
    for poll_id, choice_id in Choice.objects.filter(poll_id__in=poll_ids).values_list("poll_id", "id"):
        choices.setdefault(poll_id, set()).add(choice_id)
    return choices


def _store(votes: list[tuple[Any, dict[str, Any]]], epochs: dict[int, str]) -> int:
    """Write the votes (ids already stored are skipped); returns how many are new."""
    # Counted only if in totals memcached still has; count_uncounted_votes() adds the rest.
    rows = [
        Vote(**_row(v), counted=bool(v.get("counted_in")) and v["counted_in"] == epochs.get(v["poll"]))
        for _, v in votes
    ]
    ids = [row.id for row in rows]
    before = set(Vote.objects.filter(pk__in=ids).values_list("pk", flat=True))
    try:
        Vote.objects.bulk_create(rows, ignore_conflicts=True)
    except IntegrityError:  # a poll or choice deleted meanwhile: one by one
        for row in rows:
            try:
                with transaction.atomic():
                    row.save(force_insert=True)
            except IntegrityError:
                logger.warning("vote %s for a deleted poll or choice (or a second vote) dropped", row.id)
    after = set(Vote.objects.filter(pk__in=ids).values_list("pk", flat=True))
    # Not stored under its own id: its voter had voted already (one vote per voter).
    seconds = [vote for _, vote in votes if vote["id"] not in after]
    for vote in seconds:
        _uncount(vote, epochs)
    if seconds:
        count("poll_votes_refused", len(seconds), reason="second-vote")
    return len(after - before)


def _uncount(vote: dict[str, Any], epochs: dict[int, str]) -> None:
    """Take a vote that will not be stored out of the running total it counted in."""
    epoch = vote.get("counted_in")
    if epoch and epoch == epochs.get(vote["poll"]):
        with contextlib.suppress(MemcacheError, OSError):
            get_client().decr(total_key(vote["poll"], epoch, vote["choice"]), 1)


def _epochs(poll_ids: set[int]) -> dict[int, str]:
    """The epoch of each poll's running totals, for the polls that have them."""
    if not poll_ids:
        return {}
    found = get_client().get_many([built_key(poll_id) for poll_id in poll_ids])
    return {p: found[built_key(p)].decode() for p in poll_ids if is_epoch(found.get(built_key(p)))}


def count_uncounted_votes(*, renew: Callable[[], None] = lambda: None) -> int:
    """Votes in the database but not in the running totals (written directly
    while memcached was away, or cast while the totals were being rebuilt):
    add them to the current totals, and their voters' markers."""
    client = get_client()
    ttl = get_config()["MARKER_TTL"]
    pending = Vote.objects.filter(counted=False)
    epochs = _epochs(set(pending.values_list("poll_id", flat=True).distinct()))
    done = 0
    for poll_id, epoch in epochs.items():
        with transaction.atomic():
            votes = list(pending.filter(poll_id=poll_id).values_list("id", "choice_id", "voter")[:1000])
            Vote.objects.filter(pk__in=[vote_id for vote_id, _, _ in votes]).update(counted=True)
        # After the commit: a flusher dying here leaves a total short, never
        # counted twice, until the next rebuild.
        markers = {_marker(poll_id, voter): vote_id.encode() for vote_id, _, voter in votes}
        client.set_many(markers, expire=ttl)
        for choice_id, n in Counter(choice_id for _, choice_id, _ in votes).items():
            if client.incr(total_key(poll_id, epoch, choice_id), n) is None:
                client.delete(built_key(poll_id))  # a total is gone: rebuild them all
        done += len(votes)
        renew()
    return done


def rebuild_totals(poll: Poll) -> None:
    """Count the poll's votes in the database into a fresh epoch's running
    totals, then publish the epoch. Voters' markers are not restored: the
    database keeps one vote per voter (a second one is dropped at flush), so
    memcached need not hold a marker for every voter of every open poll."""
    client = get_client()
    epoch = secrets.token_hex(4)
    with transaction.atomic():
        # Direct writes take the same lock: none lands between the count and the mark.
        Poll.objects.select_for_update().filter(pk=poll.pk).first()
        totals = db_totals(poll.id)
        Vote.objects.filter(poll=poll, counted=False).update(counted=True)
    ttl = get_config()["TOTALS_TTL"]
    # The totals outlive their epoch's name by a little: whichever lapses first,
    # votes find no live total and the next flush rebuilds them all.
    client.set_many(
        {total_key(poll.id, epoch, c): str(n).encode() for c, n in totals.items()}, expire=ttl + 600
    )
    client.set(built_key(poll.id), epoch.encode(), expire=ttl)


FLUSH_LOCK = "polls:flusher"
FLUSH_LOCK_TTL = 30  # renewed at every batch: a flusher that died frees it within this


class FlusherBusy(Busy):
    """Another flusher holds the lock: votes are stored by one at a time."""


def flush_all() -> dict[str, int]:
    """The periodic job: flush the queue, sync direct votes, rebuild the
    running totals memcached lost. One flusher at a time farm-wide."""
    with lock(FLUSH_LOCK, FLUSH_LOCK_TTL, FlusherBusy, "another flusher") as renew:
        stored = flush(renew=renew)
        counted = count_uncounted_votes(renew=renew)
        polls = list(Poll.objects.filter(is_open=True))
        epochs = _epochs({poll.id for poll in polls})
        lost = [poll for poll in polls if poll.id not in epochs]
        for poll in lost:
            rebuild_totals(poll)
            renew()
        return {"stored": stored, "counted": counted, "rebuilt": len(lost)}
