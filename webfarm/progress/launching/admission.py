"""Starting a job: its limits looked at (a refusal costs one memcached round
trip, or none in a flood), its slots taken with its record, its task sent.
"""

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.template.defaultfilters import pluralize

from webfarm.core.client import client_epoch
from webfarm.core.slots import Lease, LimitReached, SlotsTaken, SlotsUnavailable, Taking, full_scope, look
from webfarm.progress import services, store
from webfarm.progress.conf import get_config
from webfarm.progress.countdown import PartSpec
from webfarm.progress.exceptions import ProgressUnavailable, TryLater
from webfarm.progress.ids import new_job_id
from webfarm.progress.jobtype_base import JobTypeBase, SlotLimits
from webfarm.progress.models import Job
from webfarm.progress.records import MAX_PARTS
from webfarm.progress.registry import get_job_type
from webfarm.progress.sending import send_job


class StartRefused(TryLater):
    """Over a farm-wide limit: nothing was recorded; try again after retry_after."""

    def __init__(self, message: str, *, reason: str, retry_after: int) -> None:
        super().__init__(message)
        self.message, self.reason, self.retry_after = message, reason, retry_after


@dataclass(frozen=True)
class Looked:
    """Where a start's limits stood when look_at_limits() looked: room in each."""

    scopes: list[tuple[str, int]]
    held: dict[str, dict[str, str]]


# A job type's limit refused twice within this many seconds in one process is
# a flood: until that long after its last look, it is refused without asking
# memcached. (Only the type's: a user's own limit is looked at every time, so
# whoever cancels a job and starts another at once is never refused by memory.)
FLOOD_WINDOW = 0.25


# (client epoch, scope) -> (looked at, refusal, flooding): what one memcached said.
_refused_at: dict[tuple[int, str], tuple[float, LimitReached, bool]] = {}


def refused_in_flood(*, user_id: object, job_type: JobTypeBase) -> StartRefused | None:
    """The refusal a flood of starts already earned (look_at_limits' memory
    of a full limit), for a signed-in session whose user is not read yet: in
    a flood a refusal then costs the session's round trip alone. None when
    there is no flood: the caller goes on the usual way (read the user, look)."""
    stand_in = get_user_model()(pk=cast(Any, user_id))  # unsaved: only its id is read
    limits = job_type.limits(stand_in)
    if limits is None:
        return None
    known = _refused_at.get((client_epoch(), _kind_scope(job_type, limits)))
    if known is not None and known[2] and time.monotonic() - known[0] < FLOOD_WINDOW:
        return _refused(stand_in, job_type, known[1])
    return None


def _kind_scope(job_type: JobTypeBase, limits: SlotLimits) -> str:
    return f"{limits.group}-kind:{job_type.name}"


def look_at_limits(*, user: AbstractBaseUser | AnonymousUser | None, job_type: JobTypeBase) -> Looked:
    """Refuse a start over a limit before anything else is done for it (the
    form need not even be read): one memcached round trip, no query, nothing
    written; under a flood of starts against a full limit, not even that
    (FLOOD_WINDOW: a slot freed meanwhile is taken that much later at most,
    and Retry-After is a second or more). Raises StartRefused or
    ProgressUnavailable; what it returns goes to start_job() through looked_early(), which then
    does not look again."""
    limits = job_type.limits(user)
    if limits is None:  # no farm-wide limit: nothing to look at, no slot to take
        return Looked([], {})
    kind = _kind_scope(job_type, limits)
    scopes = [(kind, limits.per_kind)]
    if user is not None:  # a job started by no user has no user's limit
        scopes.insert(0, (f"{limits.group}-user:{user.pk}", limits.per_user))
    now, epoch = time.monotonic(), client_epoch()
    known = _refused_at.get((epoch, kind))
    if known is not None and known[2] and now - known[0] < FLOOD_WINDOW:
        raise _refused(user, job_type, known[1])
    try:
        held = look(scopes)
    except SlotsUnavailable as exc:
        raise ProgressUnavailable(str(exc)) from exc
    refusal = full_scope(scopes, held)
    if refusal is None:
        _refused_at.pop((epoch, kind), None)
        return Looked(scopes, held)
    if refusal.scope == kind:
        # Jobs hold slots for seconds or minutes: a full limit is not looked
        # at again a millisecond later.
        if len(_refused_at) > 10_000:
            _refused_at.clear()
        flooding = known is not None and now - known[0] < FLOOD_WINDOW
        _refused_at[(epoch, kind)] = (now, refusal, flooding)
    raise _refused(user, job_type, refusal)


# What a view's early look (webfarm.progress.web.refuse_over_limit) saw, for
# the start the view then makes: its limits are not looked at twice.
_early_look: ContextVar[tuple[str, object, Looked] | None] = ContextVar("webfarm_early_look", default=None)


@contextmanager
def looked_early(
    user: AbstractBaseUser | AnonymousUser | None, job_type: JobTypeBase, looked: Looked
) -> Iterator[None]:
    token = _early_look.set((job_type.name, getattr(user, "pk", None), looked))
    try:
        yield
    finally:
        _early_look.reset(token)


def _looked_for(user: AbstractBaseUser | AnonymousUser | None, job_type: JobTypeBase) -> Looked | None:
    """The early look at this user's start of this type, once: a second start
    in the same request looks again."""
    early = _early_look.get()
    if early is None or early[:2] != (job_type.name, getattr(user, "pk", None)):
        return None
    _early_look.set(None)
    return early[2]


def start_job(
    *,
    user: AbstractBaseUser | None,
    job_type: JobTypeBase,
    params: dict[str, Any],
) -> Job:
    """Take the job's limit slots, record it as queued in memcached and the
    database (counted), then send its task. Where the view looked at the
    limits a moment ago (looked_early), that look is not made twice.

    Raises StartRefused (over a limit), ProgressUnavailable (nothing recorded)
    or BrokerUnavailable (the job is recorded as failed with the reason).
    """
    looked = _looked_for(user, job_type)
    registered = get_job_type(job_type.name)
    # By class, not identity: a source may build its instances again (a settings change, another thread).
    if registered is None or type(registered) is not type(job_type):
        raise ValueError(f"job type {job_type.name!r} is not registered: a worker could not run it")
    job_id = new_job_id()
    config = get_config()
    parts = split_job(job_type, params)
    lease = Lease(holder=job_id, ttl=config["QUEUED_LEASE"])
    for attempt in range(config["START_ATTEMPTS"]):
        # The first look may be the caller's; a lost race looks again.
        looked = (
            looked if attempt == 0 and looked is not None else look_at_limits(user=user, job_type=job_type)
        )
        taking = Taking(looked.scopes, looked.held, lease)
        try:
            # The slots are taken with the record, in one round trip.
            job = services.create_job(
                owner=user,
                kind=job_type.name,
                title=job_type.describe(params),
                params=params,
                job_id=job_id,
                slots=taking.keys,
                taking=taking,
                parts=parts,
                sending=not parts,
            )
        except SlotsTaken:  # a racer took a free slot first: look again
            time.sleep(config["START_PAUSE"] * (attempt + 1))
            continue
        except BaseException:
            lease.release()
            raise
        send_job(job, job_type, slots=lease.keys, noted=not parts)
        return job
    # Every try lost a race. A last look refuses with the limit that is full
    # now; if none is, the one with the least room is where the racers met.
    looked = look_at_limits(user=user, job_type=job_type)
    scope, limit = min(looked.scopes, key=lambda s: s[1] - len(looked.held[s[0]]))
    raise _refused(user, job_type, LimitReached(scope, limit, list(looked.held[scope].values())))


def split_job(job_type: JobTypeBase, params: dict[str, Any]) -> list[PartSpec]:
    """The parts the job type splits these params into ([]: it runs whole)."""
    parts = job_type.split(params)
    if parts is None:
        return []
    parts = list(parts)
    if not 1 <= len(parts) <= MAX_PARTS or not all(isinstance(part, PartSpec) for part in parts):
        raise ValueError(f"{job_type.name}.split() must give 1 to {MAX_PARTS} PartSpecs, not {parts!r:.200}")
    return parts


def _refused(
    user: AbstractBaseUser | AnonymousUser | None, job_type: JobTypeBase, refusal: LimitReached
) -> StartRefused:
    """What a user is told when a start is over a limit, and when to come back."""
    limits = job_type.limits(user)
    assert limits is not None  # a refusal comes from a limit
    retry_after = _retry_after(refusal.scope, refusal.holders, default=get_config()["RETRY_AFTER"])
    if user is not None and refusal.scope.endswith(f"-user:{user.pk}"):
        n = limits.per_user
        message = (
            f"You already have {n} {job_type.noun}{pluralize(n)} queued or running, the most "
            f"anyone may have at once. Try again in about {retry_after} s, when one has finished."
        )
        return StartRefused(message, reason=f"{limits.group}-user", retry_after=retry_after)
    n = limits.per_kind
    message = (
        f"{job_type.title} is already being run {n} time{pluralize(n)} on the farm, "
        f"the most at once. Try again in about {retry_after} s."
    )
    return StartRefused(message, reason=f"{limits.group}-kind", retry_after=retry_after)


# Seconds a refusal's Retry-After is reused for the same full scope in this process.
RETRY_AFTER_KEPT = 1.0


_retry_afters: dict[str, tuple[float, int]] = {}


def _retry_after(scope: str, holders: list[str], *, default: int) -> int:
    """When a slot is likely to come free: the soonest ETA of (a sample of) the
    jobs holding them. A refusal must stay cheaper than a poll, so at most ten
    are read, and a flood of refusals for one scope reads them once a second."""
    now = time.monotonic()
    kept = _retry_afters.get(scope)
    if kept is not None and kept[0] > now:
        return kept[1]
    try:
        sample = holders[:10]
        etas = [r.eta_seconds for r in store.read_many(sample).values() if r.eta_seconds is not None]
    except ProgressUnavailable:
        etas = []
    soonest = min(etas, default=default)
    answer = max(1, min(60, math.ceil(soonest)))
    if len(_retry_afters) > 1000:
        _retry_afters.clear()
    _retry_afters[scope] = (now + RETRY_AFTER_KEPT, answer)
    return answer
