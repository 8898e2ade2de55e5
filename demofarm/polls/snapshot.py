"""What voting needs to know about a poll, kept in memcached.

A vote must not touch the database while memcached is up, so the question,
whether the poll is open, and its choices come from `get_or_set`; saving or
deleting a poll or a choice forgets them at once, farm-wide. With memcached
away they are read from the database, as the votes are then written there.

A vote does not wait for that read: it starts from what this process read
last (remembered()) and sends the read in its own batch of checks
(demofarm/polls/services.py), where what memcached says then decides (current()).
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone

from demofarm.polls.models import Choice, Poll
from webfarm.core.client import MetaBatch, MetaReply
from webfarm.core.memo import ask_in as memo_ask_in
from webfarm.core.memo import forget, get_or_set, settle
from webfarm.core.memo import memo_key as memo_key_of

MAX_ID = 2**63 - 1  # a bigger number in a URL is no poll, not a database error
# Only a change made while memcached was unreachable (so not forgotten) waits this long.
TTL = 60
# Polls remembered in each process for votes (only polls that exist: an id
# remembered as no poll would stay a 404 here once the poll is made).
REMEMBERED = 1000
_remembered: dict[int, "PollInfo"] = {}


@dataclass(frozen=True)
class ChoiceInfo:
    id: int
    text: str


@dataclass(frozen=True)
class PollInfo:
    id: int
    question: str
    is_open: bool
    ends_at: datetime | None
    choices: tuple[ChoiceInfo, ...]

    def accepts_votes(self, now: datetime | None = None) -> bool:
        now = now or timezone.now()
        return self.is_open and (self.ends_at is None or now < self.ends_at)

    @property
    def choice_ids(self) -> list[int]:
        return [choice.id for choice in self.choices]


def poll_info(poll_id: int) -> PollInfo | None:
    if not 0 < poll_id <= MAX_ID:
        return None
    # An unknown id is remembered too: a flood of them stays off the database.
    return _info(get_or_set(_key(poll_id), lambda: _load(poll_id), ttl=TTL))


def remembered(poll_id: int) -> PollInfo | None:
    """The poll as this process last read it, without a round trip when it
    did; the caller checks it against current() before it counts."""
    info = _remembered.get(poll_id)
    return info if info is not None else poll_info(poll_id)


def memo_key(poll_id: int) -> str:
    """Where the poll's info is in memcached."""
    return memo_key_of(_key(poll_id))


def ask_in(batch: MetaBatch, poll_id: int) -> int:
    """The poll's read, riding in the caller's batch: its answer goes to current()."""
    return memo_ask_in(batch, _key(poll_id), TTL)


def current(poll_id: int, reply: MetaReply) -> PollInfo | None:
    """The poll as memcached's answer to a batch's ask_in() says
    (computed and stored if that answer elects this caller, as poll_info())."""
    info = _info(settle(_key(poll_id), reply, lambda: _load(poll_id), TTL, stale_for=TTL))
    if info is None:
        _remembered.pop(poll_id, None)
    return info


def poll_info_from_database(poll_id: int) -> PollInfo | None:
    """The same, read from the database every time."""
    return _info(_load(poll_id)) if 0 < poll_id <= MAX_ID else None


def _info(data: dict[str, Any] | None) -> PollInfo | None:
    if data is None:
        return None
    info = PollInfo(
        id=data["id"],
        question=data["question"],
        is_open=data["is_open"],
        ends_at=datetime.fromisoformat(data["ends_at"]) if data["ends_at"] else None,
        choices=tuple(ChoiceInfo(id=c_id, text=text) for c_id, text in data["choices"]),
    )
    if len(_remembered) >= REMEMBERED:
        _remembered.clear()
    _remembered[info.id] = info
    return info


def _key(poll_id: int) -> str:
    return f"polls:{poll_id}:info"


def _load(poll_id: int) -> dict[str, Any] | None:
    poll = Poll.objects.prefetch_related("choices").filter(pk=poll_id).first()
    if poll is None:
        return None
    return {
        "id": poll.id,
        "question": poll.question,
        "is_open": poll.is_open,
        "ends_at": poll.ends_at.isoformat() if poll.ends_at else None,
        "choices": [[choice.id, choice.text] for choice in poll.choices.all()],
    }


@receiver([post_save, post_delete], sender=Poll)
def _poll_changed(*, instance: Poll, **kwargs: Any) -> None:
    _remembered.pop(instance.pk, None)
    forget(_key(instance.pk))


@receiver([post_save, post_delete], sender=Choice)
def _choice_changed(*, instance: Choice, **kwargs: Any) -> None:
    _remembered.pop(instance.poll_id, None)
    forget(_key(instance.poll_id))
