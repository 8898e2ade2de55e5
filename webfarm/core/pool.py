"""Which memcached servers the farm uses now, or which two lists it is
between while an operator changes them.

A process's ring is MEMCACHED["SERVERS"] until the pool is changed in the
database (a PoolChange row): from then on the newest row says which list
the farm is on, or, while a change is under way, which two lists and which
stage (webfarm.core.client.changing says what each stage does to a key).
Every process follows the row within POOL_REFRESH seconds, without a
restart.

The row is read by a thread of each process (the follower), on a database
connection of its own, so no request's transaction sees the query. The
follower also says where its process stands in a PoolMember row: a change
moves to its next stage only once every live member has read the current
one. A member silent for twice POOL_STALE seconds counts as gone; so a
process whose last read is older than POOL_STALE (it was paused, or cut off
from the database) does not act on what it knew: its next memcached call
waits for a read and fails with PoolUnknown if none comes.
"""

import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from enum import StrEnum

from django.apps import apps
from django.db import DatabaseError, connection
from django.db.models import Model
from django.utils import timezone
from pymemcache.exceptions import MemcacheError

from webfarm.core.conf import get_config

logger = logging.getLogger(__name__)


def stale() -> float:
    """Seconds a process acts on the pool it last read (POOL_STALE)."""
    return float(get_config()["POOL_STALE"])


def member_ttl() -> float:
    """Seconds without a word after which a member counts as gone: twice
    stale(), so a process counted as gone has stopped using memcached."""
    return 2 * stale()


# Seconds between a member's rows when its stage does not change.
MEMBER_EVERY = 5.0


class Stage(StrEnum):
    FOLLOW = "follow"  # moving keys: the old server arbitrates, new keys made there
    LEAD = "lead"  # moving keys: the old server arbitrates, new keys made on the new one
    NEW = "new"  # every process on the new list alone
    DONE = "done"  # the change is over: its old list is out of use


class PoolUnknown(MemcacheError):
    """This process cannot tell which servers the farm uses right now."""


@dataclass(frozen=True)
class Plan:
    servers: tuple[str, ...]  # the list in use; during a change, the new one
    old: tuple[str, ...] = ()  # until the change is DONE: the list being left
    stage: Stage = Stage.DONE
    change: int = 0  # the PoolChange row; 0 for the settings' list

    @property
    def changing(self) -> bool:
        """Whether moving keys go through a ChangingRing."""
        return self.stage in (Stage.FOLLOW, Stage.LEAD)

    @property
    def leftovers(self) -> tuple[str, ...]:
        """At NEW: the old list, where a group kept on one server that moved
        (a queue) may still hold what its readers must take."""
        return self.old if self.stage is Stage.NEW else ()


def servers_of(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def settings_plan() -> Plan:
    return Plan(tuple(get_config()["SERVERS"]))


def plan_of(row: object | None) -> Plan:
    """The plan a PoolChange row (or none) says."""
    if row is None:
        return settings_plan()
    stage = Stage(row.stage)  # type: ignore[attr-defined]
    new = servers_of(row.new)  # type: ignore[attr-defined]
    old = servers_of(row.old) if stage is not Stage.DONE else ()  # type: ignore[attr-defined]
    return Plan(new, old, stage, row.pk)  # type: ignore[attr-defined]


def _model(name: str) -> type[Model]:
    # Looked up when used, from the app registry: the site log's handler
    # loads the client (and this module) while Django configures logging,
    # before any model can be imported.
    return apps.get_model("webfarm_core", name)


def read_plan() -> Plan:
    """The newest row's plan, from the database. Raises DatabaseError."""
    PoolChange = _model("PoolChange")
    try:
        return plan_of(PoolChange._default_manager.order_by("-pk").first())
    except DatabaseError:
        # No table yet (a site before `migrate`, a worker's database that
        # has none): no change was ever made. Anything else is raised.
        connection.close()
        if PoolChange._meta.db_table in connection.introspection.table_names():
            raise
        return settings_plan()


def member_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class _Follower:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read = threading.Condition(self.lock)
        self.plan: Plan | None = None
        self.read_at = float("-inf")  # monotonic
        self.said: tuple[int, Stage, float] | None = None  # change, stage, monotonic
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()

    def current(self) -> Plan:
        self._ensure_running()
        plan = self.plan
        limit = stale()
        if plan is not None and time.monotonic() - self.read_at <= limit:
            return plan
        with self.lock:
            self.wake.set()
            deadline = time.monotonic() + get_config()["TIMEOUT"]
            while time.monotonic() - self.read_at > limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PoolUnknown(f"the memcached pool has not been read for {limit:.0f} s")
                self.read.wait(left)
            assert self.plan is not None
            return self.plan

    def _ensure_running(self) -> None:
        thread = self.thread
        if thread is not None and thread.is_alive():
            return
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="memcached-pool", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while get_config()["POOL_FOLLOW"]:
            # A read is as fresh as its start: one under way when the row
            # changed may not have seen it.
            began = time.monotonic()
            try:
                plan = read_plan()
                self._say(plan)
            except Exception as exc:  # the database away: the plan known stays, until STALE
                logger.warning("memcached pool not read: %s", exc)
            else:
                with self.lock:
                    if plan != self.plan and self.plan is not None:
                        logger.info("memcached pool: %s", plan)
                    self.plan, self.read_at = plan, began
                    self.read.notify_all()
            finally:
                # The thread holds no connection between reads.
                with contextlib.suppress(Exception):
                    connection.close()
            self.wake.wait(get_config()["POOL_REFRESH"])
            self.wake.clear()

    def _say(self, plan: Plan) -> None:
        """This process's PoolMember row, when its stage changed or is due again."""
        said = self.said
        now = time.monotonic()
        if said is not None and said[:2] == (plan.change, plan.stage) and now - said[2] < MEMBER_EVERY:
            return
        if plan.change == 0:
            return  # no change ever made: nothing waits on members
        _model("PoolMember")._default_manager.update_or_create(
            name=member_name(),
            defaults={"change": plan.change, "stage": plan.stage.value, "seen_at": timezone.now()},
        )
        self.said = (plan.change, plan.stage, now)


_follower = _Follower()


def _fresh_follower_in_child() -> None:
    # A forked child has no follower thread, and a name of its own.
    global _follower
    known, read_at = _follower.plan, _follower.read_at
    _follower = _Follower()
    _follower.plan, _follower.read_at = known, read_at


os.register_at_fork(after_in_child=_fresh_follower_in_child)


def current_plan() -> Plan:
    """The plan this process uses now. Raises PoolUnknown (a MemcacheError)
    when it has not been read for POOL_STALE seconds and cannot be."""
    if not get_config()["POOL_FOLLOW"]:
        return settings_plan()
    return _follower.current()


def refresh() -> None:
    """Read the plan now (the command, after it changed the row; tests)."""
    if get_config()["POOL_FOLLOW"]:
        follower = _follower
        follower._ensure_running()
        with follower.lock:
            asked = time.monotonic()
            follower.wake.set()
            while follower.read_at < asked:
                if not follower.read.wait(get_config()["TIMEOUT"] + 5):
                    raise PoolUnknown("the memcached pool could not be read")


def stop() -> None:
    """End the follower once POOL_FOLLOW is off (tests), and wait for it."""
    thread = _follower.thread
    _follower.wake.set()
    if thread is not None:
        thread.join(timeout=10)


def forget() -> None:
    """Settings changed (tests): the next call reads the plan afresh."""
    with _follower.lock:
        _follower.plan, _follower.read_at, _follower.said = None, float("-inf"), None
        _follower.wake.set()


get_config.when_changed(forget)
