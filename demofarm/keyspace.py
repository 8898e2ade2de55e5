"""Every key family this farm keeps in memcached: its shape, how long it may
live, and why that is the shortest safe lifetime.

Keys are shown without the namespace (MEMCACHED_NAMESPACE, "webfarm:"); the
Celery broker's queues live under "<namespace>:broker:" with the queue shapes.
`tests/farm/test_soak.py` reads every key memcached holds after a day's worth of
mixed traffic and fails on a key that fits no family here, or that lives
longer than its family allows; docs/memcached.md is this table for people.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from demofarm.polls.conf import get_config as polls_config
from demofarm.reports.selectors import DATASET_TTL
from webfarm.core import sessions, users
from webfarm.dashboard.conf import get_config as dashboard_config
from webfarm.limits.conf import get_config as limits_config
from webfarm.progress.conf import get_config as progress_config
from webfarm.progress.conf import lost_after
from webfarm.queues.conf import get_config as queues_config

# Lifetimes in seconds, read from the settings the processes run with; None:
# kept until deleted, which only bounded families may be.
Lifetime = Callable[[], int | None]


@dataclass(frozen=True)
class Family:
    name: str
    pattern: re.Pattern[str]
    lifetime: Lifetime
    why: str
    # What someone who can write memcached can do with a key of this family
    # (docs/security.md), and the label its refused values are counted under
    # (memcached_refused{family}), if it is checked at all.
    writer: str = ""
    refused_as: str | None = None


def _progress(name: str) -> int:
    return int(progress_config()[name])


def _queues(name: str) -> int:
    return int(queues_config()[name])


def _polls(name: str) -> int:
    return int(polls_config()[name])


def _limits(name: str) -> int:
    return int(limits_config()[name])


def _lost_after() -> int:
    return int(lost_after())


def _memo_longest() -> int:
    # get_or_set keeps a value for ttl + stale_for; the longest is the dataset summary's.
    return 2 * max(DATASET_TTL, int(dashboard_config()["CHART_TTL"]), 60)


def _never() -> None:
    return None


ID = r"[A-Za-z0-9_-]{22}"
QUEUE = r"(broker:)?d?q:[A-Za-z0-9][A-Za-z0-9_.-]*"
GEN = r"[0-9a-f]{8}"

FAMILIES: tuple[Family, ...] = (
    Family(
        "job record",
        re.compile(rf"job:{ID}"),
        lambda: _progress("RECORD_TTL"),
        "a live job rewrites it every heartbeat; an ended one is kept FINAL_TTL, then read from the database",
        writer="sealed: a planted, moved or replayed record reads as missing (the database answers)",
        refused_as="job",
    ),
    Family(
        "cancel flag",
        re.compile(rf"cancel:{ID}"),
        lambda: _progress("RECORD_TTL"),
        "deleted when its job ends; the lifetime only bounds one whose job nothing ends",
        writer="sealed: a planted or copied flag cancels nothing",
        refused_as="cancel",
    ),
    Family(
        "public progress document",
        re.compile(rf"pub:{ID}\.{ID}"),
        lambda: max(_progress("FINAL_TTL"), _lost_after()),
        "a running job's lapses after its silence would make it lost; an ended one's after FINAL_TTL",
        writer="make one bar lie until the worker writes again; sealed for Django, checked in the browser",
        refused_as="pub",
    ),
    Family(
        "parts left",
        re.compile(rf"parts:{ID}:left"),
        lambda: _progress("RECORD_TTL"),
        "a split job's parts still to finish, counted down by each; lives as long as a running job's record",
        writer="make a split job's merge wait: a zero is believed only when the database's rows agree",
    ),
    Family(
        "reaper's missing-record mark",
        re.compile(rf"reap:missing:{ID}"),
        lambda: 4 * _lost_after() + 60,
        "the grace a job whose record vanished gets before it is judged lost",
        writer="bring a lost job's judgement forward or back by its grace; the database decides",
    ),
    Family(
        "get_or_set value",
        re.compile(r"memo:(?!.*:lock$).+"),
        _memo_longest,
        "its time to live plus as long again served stale while one process recomputes it",
        writer="sealed: a planted value is recomputed",
        refused_as="memo",
    ),
    Family(
        "get_or_set lock",
        re.compile(r"memo:.+:lock"),
        lambda: 60,
        "deleted when the value is computed; the lifetime frees it if the computing process dies",
        writer="make one process wait for a value, then compute it itself",
    ),
    Family(
        "limit slot",
        re.compile(r"slot:.+:[0-9]+"),
        lambda: max(_progress("QUEUED_LEASE"), _limits("REQUEST_LEASE")),
        "deleted when its holder ends; a lease its holder renews, so a crashed holder's slot comes free",
        writer="refuse starts, downloads or votes until the planted slot's lease lapses",
    ),
    Family(
        "failed logins",
        re.compile(r"login-fail:(user|addr):[0-9a-f]{24}"),
        lambda: _limits("LOGIN_WINDOW"),
        "names the window from the first failure: needed only until it ends",
        writer="refuse a username's or an address's logins for a window; never admit a wrong password",
    ),
    Family(
        "password resets asked for",
        re.compile(r"reset:(email|addr):[0-9a-f]{24}"),
        lambda: _limits("RESET_WINDOW"),
        "names the window from the first reset asked for: needed only until it ends",
        writer="refuse an address's password resets for a window; never send one more e-mail",
    ),
    Family(
        "site log drainer lock",
        re.compile(r"sitelog:drainer"),
        lambda: 30,
        "deleted when the drain ends; renewed at every batch, so a drainer that died frees it soon",
        writer="hold the drain back until the lock lapses (30 s)",
    ),
    Family(
        "newest site log entries",
        re.compile(r"sitelog:recent"),
        lambda: 24 * 3600,
        "one key, rewritten at every drain; the dashboard reads the file when it lapses",
        writer="sealed: the dashboard falls back to the log file",
        refused_as="sitelog",
    ),
    Family(
        "vote flusher lock",
        re.compile(r"polls:flusher"),
        lambda: 30,
        "deleted when the flush ends; renewed at every batch, so a flusher that died frees it soon",
        writer="hold the flush back until the lock lapses (30 s)",
    ),
    Family(
        "has-voted marker",
        re.compile(r"poll:[0-9]+:voted:[0-9a-f]{24}"),
        lambda: _polls("MARKER_TTL"),
        "settles a voter's votes in flight; after it the database keeps one vote per voter",
        writer="refuse a voter's vote (409) until it lapses; the database keeps one vote per voter",
    ),
    Family(
        "anonymous votes per address",
        re.compile(r"poll:rate:[0-9a-f]{16}:[0-9]+"),
        lambda: _polls("ANONYMOUS_WINDOW"),
        "names its window, so it is needed only until the window ends",
        writer="refuse an address's anonymous votes for its window",
    ),
    Family(
        "running totals' epoch",
        re.compile(r"poll:[0-9]+:built"),
        lambda: _polls("TOTALS_TTL"),
        "renewed by a rebuild from the database (one count per open poll)",
        writer="make the totals be rebuilt from the database",
    ),
    Family(
        "running total",
        re.compile(rf"poll:[0-9]+:{GEN}:c:[0-9]+"),
        lambda: _polls("TOTALS_TTL") + 600,
        "lapses a little after its epoch, so votes find none and the flusher rebuilds them all",
        writer="make a poll's public running totals lie; the votes stored in the database decide",
    ),
    Family(
        "counter",
        re.compile(r"c:(?!(registry|generation)$)[a-z][a-z0-9_]*(\|[a-z][a-z0-9_]*=[A-Za-z0-9_.-]+)*"),
        _never,
        "counters only go up and the harvester keeps a watermark; bounded by the names and labels counted",
        writer="make a counter lie until the harvester's next read (a drop is taken as a reset)",
        refused_as="counter",
    ),
    Family(
        "counter registry and generation",
        re.compile(r"c:(registry|generation)"),
        _never,
        "one key each; the registry lists the counters, bounded like them",
        writer="hide counters from the harvest until they are counted again",
        refused_as="list",
    ),
    Family(
        "worker heartbeat",
        re.compile(r"workers:[0-9a-f]{16}"),
        lambda: 24 * 3600,
        "rewritten every beat; kept a day so the dashboard can say when a worker went quiet",
        writer="sealed: a planted worker is not shown",
        refused_as="workers",
    ),
    Family(
        "a worker's live processes",
        re.compile(r"alive:[0-9a-f]{24}"),
        lambda: math.ceil(lost_after()),
        "rewritten every half heartbeat by the worker's main process, deleted when the process "
        "dies or stops: the reaper tells a slow job from a dead one by it",
        writer="sealed: a planted one keeps no job from being lost; a replayed one, not past its time limit",
        refused_as="alive",
    ),
    Family(
        "worker registry",
        re.compile(r"workers:registry"),
        _never,
        "one key; a worker whose heartbeat lapsed is taken off it",
        writer="hide workers from the dashboard until their next beat lists them again",
        refused_as="list",
    ),
    Family(
        "queue registry",
        re.compile(r"(broker:)?q:registry"),
        _never,
        "one key; bounded by the farm's queues and HTTP_MAX_QUEUES, idle HTTP queues are taken off",
        writer="hide queues from the dashboard and the metrics until they are used again",
        refused_as="list",
    ),
    Family(
        "queue generation",
        re.compile(rf"{QUEUE}:gen"),
        _never,
        "one per queue: a queue's messages must outlive any timer",
        writer="start a queue's new generation: consumers follow it and finish the old one, or "
        "put the key back (docs/queue.md)",
        refused_as="queue",
    ),
    Family(
        "queue counters",
        re.compile(rf"{QUEUE}:{GEN}:(tail|head|floor)"),
        _never,
        "three per queue; losing them is a reset (a new generation); a generation the queue "
        "moved on from loses them once its consumers have finished it",
        writer="start a new generation, or delay deliveries until the recovery scan",
        refused_as="queue",
    ),
    Family(
        "queue horizon",
        re.compile(rf"{QUEUE}:{GEN}:scan"),
        lambda: 3600,
        "one per queue: the last two heads a recovery scan saw, rewritten as the newer ages",
        writer="make the recovery scan look again from the floor",
    ),
    Family(
        "queue entry",
        re.compile(rf"{QUEUE}:{GEN}:m:[0-9]+"),
        _never,
        "a message until it is acknowledged; then an acked marker (FINISHED_TTL at most, deleted when the "
        "floor passes it), a hole marker HOLE_TTL, a dead letter DEAD_LETTER_TTL",
        writer="MAC over queue, index and time: a planted or copied entry goes to the dead letters",
        refused_as="queue",
    ),
    Family(
        "queue claim",
        re.compile(rf"{QUEUE}:{GEN}:c:[0-9]+"),
        lambda: max(
            _queues("VISIBILITY_TIMEOUT"),
            int(settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 60)),
        ),
        "deleted by the ack; lapses after the visibility timeout if its consumer died (renewed while held)",
        writer="hide a message until the visibility timeout; a forged receipt acknowledges nothing",
    ),
    Family(
        "queue statistics",
        re.compile(rf"{QUEUE}:stat:[a-z]+"),
        _never,
        "nine counters per queue (an HTTP queue's ten: its byte count); deleted when an idle HTTP "
        "queue is forgotten",
        writer="make the queue's figures lie; the HTTP front's byte count is counted again at its cap",
    ),
    Family(
        "HTTP queue in use",
        re.compile(r"q-alive:http\..+"),
        lambda: _queues("HTTP_IDLE_AFTER"),
        "touched while the queue is used; when it lapses, an empty queue is forgotten",
        writer="keep an idle empty HTTP queue from being forgotten",
    ),
    Family(
        "HTTP front's byte count",
        re.compile(r"q-front:bytes"),
        _never,
        "one key; an upper bound of what the HTTP queues hold, counted again from their entries at its cap",
        writer="refuse HTTP puts until it is counted again from the entries (a second)",
    ),
    Family(
        "mirror state",
        re.compile(r"mirror:(member|down:[0-9]|queues|registered:.+)"),
        _never,
        "a few keys per mirrored queue: which server is in sync must not expire",
        writer="make the repair copy a mirror again",
    ),
    Family(
        "cached user",
        re.compile(r"user:[^.\s]+\.[0-9a-f]{8}"),
        users.cache_ttl,
        "a copy of a database row, dropped on every node when the user is saved; the lifetime bounds "
        "what an update(), which tells no one, leaves stale",
        writer="sealed and dated; a planted, moved or superseded copy reads as missing",
        refused_as="user",
    ),
    Family(
        "cached session",
        re.compile(r"session:[0-9a-f]{40}"),
        sessions.longest_copy,
        "a copy of a database row: an active user costs one query per SESSION_CACHE_TTL",
        writer="sealed, dated and bound to its session; a planted, moved or ended one is read from the "
        "database",
        refused_as="session",
    ),
)


def family_of(key: str) -> Family | None:
    """The family of a key (without the namespace), or None for a key this farm never writes."""
    for family in FAMILIES:
        if family.pattern.fullmatch(key):
            return family
    return None


def lifetime_bound(family: Family, key: str, value: Any = None) -> int | None:
    """The longest `key` of `family` may live with the current settings.
    Queue entries: by what they hold (value, the entry's bytes)."""
    if family.name == "queue entry" and isinstance(value, bytes | bytearray):
        marker = bytes(value[:1])
        if marker == b"A":
            return _queues("FINISHED_TTL")
        if marker == b"H":
            return _queues("HOLE_TTL")
        if key.removeprefix("broker:").startswith("dq:"):
            return _queues("DEAD_LETTER_TTL")
    return family.lifetime()
