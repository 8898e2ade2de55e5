"""Changing the memcached pool of a running farm, stage by stage (the
`memcached_pool` command; docs/farm.md, "Changing the servers of a running
farm"). webfarm.core.pool says how each process follows the stages, and
webfarm.core.client.changing what each stage does to a key.

A stage is done once every live process has read it (its PoolMember row)
and dwell() seconds have passed since it began: by then a process that did
not read it has stopped using memcached (POOL_STALE). Then:

    FOLLOW  keys that move keep their old server as their arbiter
    LEAD    ... and new ones are made on the new server; migrate() then
            moves what is left, so the old servers hold tombstones only
    NEW     every process on the new list; a queue that moved is drained
            on its old server (apps add what they must drain: leftovers)
    DONE    the old servers' tombstones cleared: they hold nothing the farm
            needs
"""

import time
from collections.abc import Callable
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import (
    ChangingRing,
    Phase,
    StableHashClient,
    build_client,
    clear_tombstones,
    migrate,
    parse_servers,
)
from webfarm.core.client.changing import empty
from webfarm.core.conf import get_config
from webfarm.core.models import PoolChange, PoolMember
from webfarm.core.pool import Plan, Stage, member_ttl, read_plan, servers_of, stale

ORDER = (Stage.FOLLOW, Stage.LEAD, Stage.NEW, Stage.DONE)
# Walks of the old servers, at most, until one finds nothing left to move.
WALKS = 5
# Member rows older than this are deleted when a change starts.
FORGET_MEMBERS = timedelta(days=1)

Say = Callable[[str], None]
# What an app must still take off the old servers at NEW: one line each.
# Called with final=True once the change is DONE: delete what is left.
Leftovers = Callable[[StableHashClient, bool], list[str]]
_leftover_checks: list[Leftovers] = []


class PoolChangeError(Exception):
    """The change cannot go on: why, and what to do."""


def add_leftover_check(check: Leftovers) -> None:
    """An app's check, run at NEW until it says nothing is left: given the
    old list's ring, it moves what it can and says what is still there;
    run once more with final=True when the change is DONE, to delete what
    a straggler left."""
    if check not in _leftover_checks:
        _leftover_checks.append(check)


def dwell() -> float:
    """Seconds a stage lasts at least: past POOL_STALE, no process acts on the one before."""
    return stale() + 1.0


def change(
    servers: list[str], *, say: Say, wait: float = 600.0, at_new: Callable[[], None] | None = None
) -> PoolChange:
    """Change the farm's pool to `servers`, or go on with the change under
    way to them. `at_new`: run once every process is on the new list (the
    operator's nginx reload). Raises PoolChangeError."""
    target = _checked(servers)
    plan = read_plan()
    row = PoolChange.objects.order_by("-pk").first()
    if row is not None and plan.stage is not Stage.DONE:
        if servers_of(row.new) != target:
            raise PoolChangeError(
                f"a change to {row.new} is under way ({row.stage}): finish it first "
                f"(memcached_pool --to {row.new})"
            )
        say(f"going on with the change from {row.old} to {row.new}, at {row.stage}")
    elif plan.servers == target:
        if row is None or servers_of(row.new) != target or not _removed(row):
            raise PoolChangeError(f"the farm already uses {','.join(target)}")
        # Done before: what a straggler wrote since on a removed server goes.
        say(f"the farm already uses {row.new}: emptying what change {row.pk} removed again")
        _empty_removed(row, say=say)
        return row
    else:
        PoolMember.objects.filter(seen_at__lt=timezone.now() - FORGET_MEMBERS).delete()
        row = PoolChange.objects.create(old=",".join(plan.servers), new=",".join(target), stage=Stage.FOLLOW)
        say(f"change {row.pk}: from {row.old} to {row.new}")
    for stage in ORDER[ORDER.index(Stage(row.stage)) :]:
        row = _run_stage(row, stage, say=say, wait=wait, at_new=at_new)
    say(
        f'done: the farm uses {row.new}. Set MEMCACHED["SERVERS"] to {row.new.split(",")} in every '
        "node's settings (a process started meanwhile reads the list from the database) and render "
        "nginx's configuration from it."
    )
    return row


def _run_stage(
    row: PoolChange, stage: Stage, *, say: Say, wait: float, at_new: Callable[[], None] | None
) -> PoolChange:
    old, new = _ring(row.old), _ring(row.new)
    try:
        return _stage(row, stage, old, new, say=say, wait=wait, at_new=at_new)
    finally:
        old.close()
        new.close()


def _stage(
    row: PoolChange,
    stage: Stage,
    old: StableHashClient,
    new: StableHashClient,
    *,
    say: Say,
    wait: float,
    at_new: Callable[[], None] | None,
) -> PoolChange:
    if row.stage != stage:
        PoolChange.objects.filter(pk=row.pk).update(stage=stage, staged_at=timezone.now())
        row.refresh_from_db()
    say(f"stage {stage}: waiting for every process to read it")
    _settled(row, stage, say=say, wait=wait)
    if stage is Stage.LEAD:
        _migrate(ChangingRing(old, new, Phase.LEAD), say=say)
    elif stage is Stage.NEW:
        if at_new is not None:
            at_new()
        _drained(old, say=say, wait=wait)
    elif stage is Stage.DONE:
        # No process looks at the old servers now: what a straggler's last
        # write left there goes too.
        for check in _leftover_checks:
            check(old, True)
        cleared = clear_tombstones(old)
        say(f"cleared {cleared} tombstones from the old servers")
        _empty_removed(row, say=say)
    return row


def _removed(row: PoolChange) -> list[str]:
    return [server for server in servers_of(row.old) if server not in servers_of(row.new)]


def _empty_removed(row: PoolChange, *, say: Say) -> None:
    """Empty the servers the change removed of the farm's keys, listing them
    again until none has come for a stage's length (empty()). Raises
    PoolChangeError while keys keep coming."""
    removed = _removed(row)
    if not removed:
        return
    leaving = _ring(",".join(removed))
    try:
        emptied = empty(leaving, quiet=dwell(), limit=10 * dwell())
    except (MemcacheError, OSError) as exc:
        # Never called free: a server that did not answer may come back with
        # the farm's keys, and one that refused a delete still holds them.
        raise PoolChangeError(
            f"{','.join(removed)} was not emptied ({type(exc).__name__}: {exc}). The farm no longer "
            f"uses it, but it may hold the farm's keys: run memcached_pool --to {row.new} again once "
            "it answers, or restart it (memcached keeps nothing across a restart) before any farm "
            "uses it again"
        ) from exc
    finally:
        leaving.close()
    if emptied.late:
        say(f"written on {','.join(removed)} since its first listing: {', '.join(emptied.late[:10])}")
    if not emptied.clean:
        raise PoolChangeError(
            f"a process still writes to {','.join(removed)}: find the one that does not follow the "
            f"pool (memcached_pool lists the processes), then run memcached_pool --to {row.new} again "
            "to empty it before you stop it"
        )
    say(f"deleted the farm's {emptied.deleted} keys left on {','.join(removed)}: it can be stopped")


def _settled(row: PoolChange, stage: Stage, *, say: Say, wait: float) -> None:
    """Until every live member read `stage` (or later) of this change, and
    dwell() seconds since the stage began."""
    began = row.staged_at
    deadline = time.monotonic() + wait
    told = 0.0
    while True:
        behind = laggards(row, stage)
        dwelt = (timezone.now() - began).total_seconds() >= dwell()
        if not behind and dwelt:
            return
        if time.monotonic() > deadline:
            raise PoolChangeError(
                f"stage {stage}: {len(behind)} processes have not read it in {wait:.0f} s: "
                f"{', '.join(behind[:10])}. Run the command again to go on."
            )
        if behind and time.monotonic() - told >= 5:
            say(f"  {len(behind)} processes still to read {stage}: {', '.join(behind[:5])}")
            told = time.monotonic()
        time.sleep(0.5)


def laggards(row: PoolChange, stage: Stage) -> list[str]:
    """The live members that have not read `stage` (or later) of this change."""
    live = PoolMember.objects.filter(seen_at__gte=timezone.now() - timedelta(seconds=member_ttl()))
    reached = {s.value for s in ORDER[ORDER.index(stage) :]}
    return sorted(member.name for member in live if member.change != row.pk or member.stage not in reached)


def _migrate(ring: ChangingRing, *, say: Say) -> None:
    """Walk the old servers until a walk finds no value left to move. Once
    every process leads, none puts a value there; but a write that began
    before may land while the walk runs, and a memcached older than 1.6.9
    is listed by a walk of its LRUs, which can miss an item it moves between
    them meanwhile (webfarm.core.client.changing._listing). A value left
    there is lost to the new ring, so a walk that moved values is checked
    by another."""
    for walk in range(1, WALKS + 1):
        walked = migrate(ring)
        say(
            f"walk {walk}: {walked.moved} values moved, {walked.tombstones} already moved, "
            f"{walked.dark} documents nginx reads put out, {walked.stayed} staying"
        )
        if not walked.moved and not walked.lost_races:
            return
    raise PoolChangeError(
        f"values still to move after {WALKS} walks (the last moved {', '.join(walked.keys) or 'none'}): "
        "a process writes them on the old servers without following the pool. Run the command again"
    )


def _drained(old: StableHashClient, *, say: Say, wait: float) -> None:
    deadline = time.monotonic() + wait
    told = 0.0
    while True:
        left = [line for check in _leftover_checks for line in check(old, False)]
        if not left:
            return
        if time.monotonic() > deadline:
            raise PoolChangeError(f"still on the old servers after {wait:.0f} s: {'; '.join(left[:10])}")
        if time.monotonic() - told >= 5:
            say(f"  draining the old servers: {'; '.join(left[:5])}")
            told = time.monotonic()
        time.sleep(1.0)


def _checked(servers: list[str]) -> tuple[str, ...]:
    """The list, each server answering; PoolChangeError otherwise."""
    try:
        parsed = parse_servers(servers)
    except ImproperlyConfigured as exc:
        raise PoolChangeError(str(exc)) from exc
    config = get_config()
    for host, port in parsed:
        client = Client((host, port), connect_timeout=config["CONNECT_TIMEOUT"], timeout=config["TIMEOUT"])
        try:
            client.version()
        except (MemcacheError, OSError) as exc:
            raise PoolChangeError(f"memcached {host}:{port} does not answer: {exc}") from exc
        finally:
            client.close()
    return tuple(s.strip() for s in servers)


def _ring(servers: str) -> StableHashClient:
    return build_client(servers_of(servers), get_config()["NAMESPACE"])


def current() -> tuple[Plan, PoolChange | None, list[PoolMember]]:
    """What the database says: the plan, its row, the live members."""
    live = PoolMember.objects.filter(seen_at__gte=timezone.now() - timedelta(seconds=member_ttl()))
    return read_plan(), PoolChange.objects.order_by("-pk").first(), list(live.order_by("name"))
